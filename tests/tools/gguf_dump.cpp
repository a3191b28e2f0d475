// Test helper for the Python oracle tests (tests/oracle/test_gguf_oracle.py), standing in for the
// mixq CLI until it exists:
//   gguf_dump dequantize FILE TENSOR -o OUT.npy     canonical weight -> float32 [N, K] .npy
//   gguf_dump encode OUT.gguf TYPE N K IN.f32       raw float32 [N][K] -> GGUF tensor "w"
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/gguf.hpp"

using namespace mixq;
using namespace mixq::formats;

namespace {

void write_npy(const std::string& path, const std::vector<float>& v, int64_t n, int64_t k) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) +
                       ", " + std::to_string(k) + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  MIXQ_CHECK(f, ErrorCode::Io, path, ": cannot create");
  const uint16_t hl = static_cast<uint16_t>(header.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&hl, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(v.data(), 4, v.size(), f);
  MIXQ_CHECK(std::fclose(f) == 0, ErrorCode::Io, path, ": write failed");
}

GgmlType parse_type(const std::string& s) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeInfo* t = ggml_type_info(id);
    if (t && s == t->name) return static_cast<GgmlType>(id);
  }
  MIXQ_FAIL(ErrorCode::InvalidArgument, "unknown ggml type ", s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "dequantize" && argc == 6 && std::string(argv[4]) == "-o") {
      QuantizedWeight w = GgufFile::open(argv[2])->load_weight(argv[3]);
      w.validate();
      write_npy(argv[5], dequantize_to_f32(w), w.N, w.K);
      return 0;
    }
    if (cmd == "encode" && argc == 7) {
      const GgmlType type = parse_type(argv[3]);
      const int64_t n = std::stoll(argv[4]), k = std::stoll(argv[5]);
      std::vector<float> x(static_cast<size_t>(n * k));
      std::FILE* f = std::fopen(argv[6], "rb");
      MIXQ_CHECK(f && std::fread(x.data(), 4, x.size(), f) == x.size(), ErrorCode::Io, argv[6],
                 ": cannot read ", x.size(), " floats");
      std::fclose(f);
      save_gguf(argv[2], {{"w", {n, k}, type, x.data()}},
                {{"general.architecture", GgufValue::string("llama")}});
      return 0;
    }
    std::fprintf(stderr,
                 "usage: gguf_dump dequantize FILE TENSOR -o OUT.npy\n"
                 "       gguf_dump encode OUT.gguf TYPE N K IN.f32\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
