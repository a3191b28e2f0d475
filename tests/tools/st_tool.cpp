// Test tool for the safetensors oracle tests (tests/oracle/test_safetensors_oracle.py):
//   mixq_st_tool dequant FILE TENSOR OUT.npy   load_weight + dequantize (original K order) -> f32
//   .npy mixq_st_tool copy IN OUT                   re-write every tensor and the metadata with
//   mixq's writer mixq_st_tool save-mixq IN OUT              load every weight of IN, save in
//   mixq's own layout
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/safetensors.hpp"

namespace {

void write_npy_f32(const std::string& path, const std::vector<float>& data, int64_t rows,
                   int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  MIXQ_CHECK(f != nullptr, mixq::ErrorCode::Io, path, ": cannot create");
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                static_cast<unsigned char>(header.size() >> 8)};
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(len, 1, 2, f) == 2 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), 4, data.size(), f) == data.size();
  ok = std::fclose(f) == 0 && ok;
  MIXQ_CHECK(ok, mixq::ErrorCode::Io, path, ": write failed");
}

int run(int argc, char** argv) {
  using namespace mixq::formats;
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "dequant" && argc == 5) {
    const mixq::QuantizedWeight w = load_weight(argv[2], argv[3]);
    std::vector<float> out(static_cast<size_t>(w.N * w.K));
    mixq::dequantize_rows(w, 0, w.N, out.data(), /*original_order=*/true);
    write_npy_f32(argv[4], out, w.N, w.K);
    return 0;
  }
  if (cmd == "copy" && argc == 4) {
    const auto in = SafetensorsFile::open(argv[2]);
    SafetensorsWriter w;
    for (const auto& t : in->tensors()) w.add(t.name, t.dtype, t.shape, t.data, t.nbytes);
    for (const auto& kv : in->metadata()) w.set_metadata(kv.first, kv.second);
    w.write(argv[3]);
    return 0;
  }
  if (cmd == "save-mixq" && argc == 4) {
    std::vector<std::pair<std::string, mixq::QuantizedWeight>> weights;
    for (const auto& e : inspect_checkpoint(argv[2]).tensors)
      if (e.is_weight) weights.emplace_back(e.name, load_weight(argv[2], e.name));
    save_mixq_safetensors(argv[3], weights, {{"source", argv[2]}});
    return 0;
  }
  std::fprintf(
      stderr, "usage: mixq_st_tool dequant FILE TENSOR OUT.npy | copy IN OUT | save-mixq IN OUT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
