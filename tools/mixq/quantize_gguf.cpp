// `mixq quantize --format gguf` (see quantize_gguf.hpp).
#include "quantize_gguf.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/formats/value_range.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/formats/output_file.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cli {

namespace {

using formats::GgmlType;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool gguf_type_for(const std::string& scheme, GgmlType* type) {
  static const std::pair<const char*, GgmlType> kTypes[] = {
      {"q4_0", GgmlType::Q4_0}, {"q8_0", GgmlType::Q8_0}, {"q4_k", GgmlType::Q4_K},
      {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16}, {"f32", GgmlType::F32}};
  for (const auto& [name, t] : kTypes)
    if (lower(scheme) == name) {
      *type = t;
      return true;
    }
  return false;
}

bool is_float(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

GgmlType same_dtype(const std::string& dtype) {
  return dtype == "F32" ? GgmlType::F32 : dtype == "F16" ? GgmlType::F16 : GgmlType::BF16;
}

// Element i of a float tensor (the mapping may be unaligned: byte-wise little-endian loads).
float load_element(const formats::SafetensorsTensor& t, uint64_t i) {
  const uint8_t* p = t.data;
  if (t.dtype == "F32") {
    uint32_t u = 0;
    for (int b = 3; b >= 0; --b) u = (u << 8) | p[4 * i + b];
    return bits_f32(u);
  }
  const uint16_t h = static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8));
  return t.dtype == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
}

// Encodes the [N][K] matrix `t` row by row into `type`; non-finite inputs and values the type
// cannot represent (value_range.hpp) are errors naming the tensor and the row.
std::vector<uint8_t> encode_matrix(const formats::SafetensorsTensor& t, GgmlType type,
                                   const std::string& in) {
  const int64_t N = t.shape[0], K = t.shape[1];
  const formats::GgmlTypeInfo* info = formats::ggml_type_info(static_cast<uint32_t>(type));
  const std::string what = "quantize: " + in + ": tensor '" + t.name + "'";
  MIXQ_CHECK_ARG(K % info->block_elems == 0, what, " has K = ", K,
                 " columns, not a multiple of the ", info->name, " block size ",
                 info->block_elems, " (exclude it with --skip, or choose another type)");
  const int64_t row_bytes = formats::ggml_row_bytes(type, K);
  std::vector<uint8_t> out(static_cast<size_t>(N * row_bytes));
  std::vector<float> row(static_cast<size_t>(K));
  const bool to_16bit = type == GgmlType::F16 || type == GgmlType::BF16;
  formats::range::ValueRange values(type == GgmlType::F16);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      row[k] = load_element(t, static_cast<uint64_t>(n * K + k));
      MIXQ_CHECK_ARG(std::isfinite(row[k]), what, " element [", n, ", ", k, "] is not finite (",
                     row[k], ")");
      if (to_16bit) values.add(row[k]);
    }
    try {
      formats::ggml_quantize_row(type, row.data(), out.data() + n * row_bytes, K);
    } catch (const Error& e) {
      MIXQ_FAIL(e.code(), what, " row ", n, ": ", error_message_body(e),
                " (use --skip to keep this tensor in its own type, or another --scheme)");
    }
  }
  if (to_16bit) values.check(what);
  return out;
}

}  // namespace

bool is_gguf_scheme(const std::string& name) {
  GgmlType t;
  return gguf_type_for(name, &t);
}

bool TensorSelection::selected(const std::string& name) const {
  return (!only || only->search(name)) && !(skip && skip->search(name));
}

int quantize_to_gguf(const std::string& in, const std::string& out, const std::string& scheme,
                     const TensorSelection& sel) {
  GgmlType type = GgmlType::F32;
  MIXQ_CHECK_ARG(gguf_type_for(scheme, &type), "quantize: '", scheme, "' is not a GGUF type");
  const auto file = formats::SafetensorsCheckpoint::open(in);
  // Encoded bytes live here until save_gguf writes them (the output's size, not the input's).
  std::vector<std::vector<uint8_t>> encoded;
  encoded.reserve(file->tensors().size());
  std::vector<formats::GgufTensorToWrite> tensors;
  std::vector<std::string> left_out;
  int n_quantized = 0, n_copied = 0;
  int64_t in_bytes = 0, out_bytes = 0;
  for (const formats::SafetensorsTensor* tp : file->tensors()) {
    const formats::SafetensorsTensor& t = *tp;
    const bool nonempty =
        std::all_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d >= 1; });
    if (!is_float(t.dtype) || t.shape.empty() || t.shape.size() > 4 || !nonempty) {
      left_out.push_back(t.name + " (" + t.dtype + ", rank " + std::to_string(t.shape.size()) +
                         ")");
      continue;
    }
    formats::GgufTensorToWrite w;
    w.name = t.name;
    w.shape = t.shape;
    if (t.shape.size() == 2 && sel.selected(t.name)) {
      encoded.push_back(encode_matrix(t, type, in));
      w.type = type;
      w.raw = encoded.back().data();
      w.raw_bytes = encoded.back().size();
      ++n_quantized;
    } else {
      // GGUF's F32/F16/BF16 are the same little-endian bytes as safetensors': copied as they are.
      w.type = same_dtype(t.dtype);
      w.raw = t.data;
      w.raw_bytes = t.nbytes;
      ++n_copied;
    }
    in_bytes += static_cast<int64_t>(t.nbytes);
    out_bytes += static_cast<int64_t>(w.raw_bytes);
    tensors.push_back(std::move(w));
  }
  MIXQ_CHECK_ARG(n_quantized > 0, "quantize: no 2-D F32/F16/BF16 tensor of '", in,
                 "' was selected for quantization",
                 (sel.filtered() ? " by --only/--skip" : ""));
  const std::string type_name = formats::ggml_type_name(static_cast<uint32_t>(type));
  formats::save_gguf(out, tensors,
                     {{"mixq.scheme", formats::GgufValue::string(type_name)},
                      {"mixq.source", formats::GgufValue::string(in)}});
  for (const std::string& s : left_out)
    std::fprintf(stderr, "mixq quantize: left out %s\n", s.c_str());
  std::fprintf(formats::writes_to_stdout(out) ? stderr : stdout,
      "%s -> %s (gguf): %d tensor(s) quantized to %s, %d copied, %zu left out; "
      "%lld -> %lld bytes of tensors\n",
      in.c_str(), out.c_str(), n_quantized, type_name.c_str(), n_copied, left_out.size(),
      static_cast<long long>(in_bytes), static_cast<long long>(out_bytes));
  return 0;
}

}  // namespace mixq::cli
