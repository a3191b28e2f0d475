#include "mixq/quantized_weight.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

const char* zero_kind_name(ZeroKind z) {
  switch (z) {
    case ZeroKind::None: return "none";
    case ZeroKind::Offset: return "offset";
    case ZeroKind::ZeroPoint: return "zero-point";
  }
  return "?";
}

namespace {

float load_float(const uint8_t* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return f16_to_f32(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * i, 2);
      return bf16_to_f32(h);
    }
    default: MIXQ_FAIL(ErrorCode::Internal, "load_float: ", dtype_name(t));
  }
}

bool is_code_type(DType t) {
  switch (t) {
    case DType::I4: case DType::U4: case DType::I8: case DType::U8: case DType::F8E4M3:
    case DType::F16: case DType::BF16: case DType::F32: return true;
    default: return false;
  }
}
bool is_dense_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

}  // namespace

int32_t QuantizedWeight::code_int(int64_t n, int64_t k) const {
  const uint8_t* row = codes.data() + n * row_bytes();
  switch (code_type) {
    case DType::I4: {
      const int v = (row[k >> 1] >> ((k & 1) * 4)) & 0xF;
      return v >= 8 ? v - 16 : v;
    }
    case DType::U4: return (row[k >> 1] >> ((k & 1) * 4)) & 0xF;
    case DType::I8: return static_cast<int8_t>(row[k]);
    case DType::U8: return row[k];
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "code_int: ", dtype_name(code_type), " codes are not integers");
  }
}

void QuantizedWeight::set_code_int(int64_t n, int64_t k, int32_t q) {
  MIXQ_CHECK_ARG(q >= code_min(code_type) && q <= code_max(code_type), "set_code_int: code ", q,
                 " outside [", code_min(code_type), ", ", code_max(code_type), "] of ",
                 dtype_name(code_type));
  uint8_t* row = codes.data() + n * row_bytes();
  if (is_subbyte(code_type)) {
    const int shift = (k & 1) * 4;
    row[k >> 1] = static_cast<uint8_t>((row[k >> 1] & ~(0xF << shift)) | ((q & 0xF) << shift));
  } else {
    row[k] = static_cast<uint8_t>(q & 0xFF);
  }
}

float QuantizedWeight::code_value(int64_t n, int64_t k) const {
  switch (code_type) {
    case DType::F8E4M3: return e4m3_to_f32(codes[n * row_bytes() + k]);
    case DType::F16:
    case DType::BF16:
    case DType::F32: return load_float(codes.data() + n * row_bytes(), code_type, k);
    default: return static_cast<float>(code_int(n, k));
  }
}

float QuantizedWeight::scale(int64_t nb, int64_t kb) const {
  return load_float(scales.data(), scale_type, nb * n_blocks_k() + kb);
}
float QuantizedWeight::offset(int64_t nb, int64_t kb) const {
  return load_float(zeros.data(), scale_type, nb * n_blocks_k() + kb);
}
int32_t QuantizedWeight::zero_point(int64_t nb, int64_t kb) const {
  int32_t z;
  std::memcpy(&z, zeros.data() + 4 * (nb * n_blocks_k() + kb), 4);
  return z;
}

int64_t QuantizedWeight::k_block(int64_t k) const {
  if (k_block_starts.empty()) return (k + k_phase) / block_k;
  // The last start <= k whose block is not empty.
  const auto it = std::upper_bound(k_block_starts.begin(), k_block_starts.end() - 1,
                                   static_cast<int32_t>(k));
  return static_cast<int64_t>(it - k_block_starts.begin()) - 1;
}

int64_t QuantizedWeight::k_block_begin(int64_t kb) const {
  if (!k_block_starts.empty()) return k_block_starts[static_cast<size_t>(kb)];
  return std::max<int64_t>(0, kb * block_k - k_phase);
}

int64_t QuantizedWeight::k_block_end(int64_t kb) const {
  if (!k_block_starts.empty()) return k_block_starts[static_cast<size_t>(kb + 1)];
  return std::min<int64_t>(K, (kb + 1) * block_k - k_phase);
}

float QuantizedWeight::dequant(int64_t n, int64_t k) const {
  if (!has_scales) return code_value(n, k);
  const int64_t nb = n_block(n), kb = k_block(k);
  const float s = scale(nb, kb);
  switch (zero_kind) {
    case ZeroKind::None: return code_value(n, k) * s;
    case ZeroKind::Offset: {
      // Two roundings, in this order (the library builds with -ffp-contract=off, so no FMA):
      // matches ggml's d*q + m and gguf-py's numpy decoders bit for bit.
      return code_value(n, k) * s + offset(nb, kb);
    }
    case ZeroKind::ZeroPoint:
      return s * static_cast<float>(code_int(n, k) - zero_point(nb, kb));
  }
  return 0.f;
}

void QuantizedWeight::allocate() {
  MIXQ_CHECK_ARG(N >= 1 && K >= 1, "QuantizedWeight::allocate: N (", N, ") and K (", K,
                 ") must be >= 1");
  // Same bound as validate(): N * row_bytes must not overflow before it reaches the allocator.
  MIXQ_CHECK_ARG(N <= (int64_t(1) << 31) && K <= (int64_t(1) << 31), "QuantizedWeight::allocate: N (",
                 N, ") or K (", K, ") exceeds 2^31");
  codes.assign(static_cast<size_t>(N * row_bytes()), 0);
  const int64_t ns = n_scale_entries();
  scales.assign(static_cast<size_t>(ns * (has_scales ? dtype_bits(scale_type) / 8 : 0)), 0);
  if (zero_kind == ZeroKind::Offset)
    zeros.assign(static_cast<size_t>(ns * dtype_bits(scale_type) / 8), 0);
  else if (zero_kind == ZeroKind::ZeroPoint)
    zeros.assign(static_cast<size_t>(ns * 4), 0);
  else
    zeros.clear();
}

void QuantizedWeight::validate() const {
  const char* w = "QuantizedWeight";
  MIXQ_CHECK_ARG(N >= 1 && K >= 1, w, ": N (", N, ") and K (", K, ") must be >= 1");
  MIXQ_CHECK_ARG(N <= (int64_t(1) << 31) && K <= (int64_t(1) << 31), w, ": N (", N, ") or K (",
                 K, ") exceeds 2^31");
  MIXQ_CHECK_ARG(is_code_type(code_type), w, ": code_type ", dtype_name(code_type),
                 " is not one of i4, u4, i8, u8, f8e4m3, f16, bf16, f32");
  MIXQ_CHECK_ARG(codes.size() == static_cast<size_t>(N * row_bytes()), w, ": codes hold ",
                 codes.size(), " bytes, expected N (", N, ") * row_bytes (", row_bytes(), ")");
  MIXQ_CHECK_ARG(k_phase >= 0 && n_phase >= 0, w, ": k_phase (", k_phase, ") and n_phase (",
                 n_phase, ") must be >= 0");
  if (!has_scales) {
    MIXQ_CHECK_ARG(is_dense_float(code_type), w, ": only dense float codes (f16/bf16/f32) may omit "
                   "scales, code_type is ", dtype_name(code_type));
    MIXQ_CHECK_ARG(plain_blocks(), w, ": a weight without scales has no blocks, but k_phase (",
                   k_phase, "), n_phase (", n_phase, ") or k_block_starts (",
                   k_block_starts.size(), " entries) is set");
    MIXQ_CHECK_ARG(zero_kind == ZeroKind::None, w, ": zero_kind ", zero_kind_name(zero_kind),
                   " needs scales");
    // Stale scale / zero buffers would be streamed (storage_bytes) and are a sign of a
    // half-converted weight.
    MIXQ_CHECK_ARG(scales.empty() && zeros.empty(), w, ": a weight without scales holds ",
                   scales.size(), " bytes of scales and ", zeros.size(), " bytes of zeros");
  } else {
    // A shard's block may reach past its own K (its first block starts k_phase columns before
    // column 0); a plain weight's blocks lie within K.
    // (Listed blocks: block_k only bounds their sizes, an act-order shard may hold fewer columns.)
    MIXQ_CHECK_ARG(block_k >= 1 && (block_k <= K + k_phase || !k_block_starts.empty()), w,
                   ": block_k (", block_k, ") must be in [1, K=", K, " + k_phase=", k_phase, "]");
    MIXQ_CHECK_ARG(block_n >= 1 && block_n <= std::max<int64_t>(N + n_phase, 128), w,
                   ": block_n (", block_n, ") must be in [1, max(N + n_phase, 128)]");
    MIXQ_CHECK_ARG(k_phase < block_k, w, ": k_phase (", k_phase, ") must be < block_k (", block_k,
                   ")");
    MIXQ_CHECK_ARG(n_phase < block_n, w, ": n_phase (", n_phase, ") must be < block_n (", block_n,
                   ")");
    if (!k_block_starts.empty()) {
      MIXQ_CHECK_ARG(k_phase == 0, w, ": k_block_starts and k_phase (", k_phase,
                     ") are exclusive");
      MIXQ_CHECK_ARG(k_block_starts.size() >= 2 && k_block_starts.front() == 0 &&
                         k_block_starts.back() == K,
                     w, ": k_block_starts (", k_block_starts.size(), " entries, first ",
                     k_block_starts.front(), ", last ", k_block_starts.back(),
                     ") must run from 0 to K (", K, ") in >= 2 entries");
      for (size_t i = 1; i < k_block_starts.size(); ++i) {
        const int64_t len = int64_t(k_block_starts[i]) - k_block_starts[i - 1];
        MIXQ_CHECK_ARG(len >= 0 && len <= block_k, w, ": K block ", i - 1, " of k_block_starts (",
                       k_block_starts[i - 1], " .. ", k_block_starts[i], ") holds ", len,
                       " columns, expected 0 .. block_k (", block_k, ")");
      }
    }
    MIXQ_CHECK_ARG(scale_type == DType::F32 || scale_type == DType::F16 ||
                       scale_type == DType::BF16,
                   w, ": scale_type ", dtype_name(scale_type), " must be f32, f16 or bf16");
    const int64_t ns = n_scale_entries();
    MIXQ_CHECK_ARG(scales.size() == static_cast<size_t>(ns * dtype_bits(scale_type) / 8), w,
                   ": scales hold ", scales.size(), " bytes, expected ", ns, " ",
                   dtype_name(scale_type), " entries ([", n_blocks_n(), "][", n_blocks_k(), "])");
    for (int64_t i = 0; i < ns; ++i) {
      const float s = load_float(scales.data(), scale_type, i);
      MIXQ_CHECK_ARG(std::isfinite(s), w, ": scale entry ", i, " (block n ", i / n_blocks_k(),
                     ", k ", i % n_blocks_k(), ") is not finite (", s, ")");
    }
    switch (zero_kind) {
      case ZeroKind::None:
        MIXQ_CHECK_ARG(zeros.empty(), w, ": zero_kind none but zeros hold ", zeros.size(), " bytes");
        break;
      case ZeroKind::Offset:
        MIXQ_CHECK_ARG(zeros.size() == static_cast<size_t>(ns * dtype_bits(scale_type) / 8), w,
                       ": offsets hold ", zeros.size(), " bytes, expected ", ns, " ",
                       dtype_name(scale_type), " entries");
        for (int64_t i = 0; i < ns; ++i) {
          const float o = load_float(zeros.data(), scale_type, i);
          MIXQ_CHECK_ARG(std::isfinite(o), w, ": offset entry ", i, " is not finite (", o, ")");
        }
        break;
      case ZeroKind::ZeroPoint: {
        MIXQ_CHECK_ARG(is_integer(code_type), w, ": zero-point form needs integer codes, got ",
                       dtype_name(code_type));
        MIXQ_CHECK_ARG(zeros.size() == static_cast<size_t>(ns * 4), w, ": zero points hold ",
                       zeros.size(), " bytes, expected ", ns, " int32 entries");
        // GPTQ stores z in [0, 2^bits] (v1 "z - 1" can reach 2^bits after the +1): allow one
        // beyond the code range, nothing further.
        const int32_t lo = code_min(code_type), hi = code_max(code_type) + 1;
        for (int64_t i = 0; i < ns; ++i) {
          int32_t z;
          std::memcpy(&z, zeros.data() + 4 * i, 4);
          MIXQ_CHECK_ARG(z >= lo && z <= hi, w, ": zero point entry ", i, " (", z,
                         ") outside [", lo, ", ", hi, "]");
        }
        break;
      }
    }
  }
  if (ggml) {
    const formats::GgmlTypeInfo* t = formats::ggml_type_info(ggml->type);
    MIXQ_CHECK_ARG(t != nullptr && t->convertible && t->block_elems > 1, w,
                   ": ggml blocks of type ", formats::ggml_type_name(ggml->type), " (id ",
                   ggml->type, ") are not a block-quantized type mixq reads");
    MIXQ_CHECK_ARG(K % t->block_elems == 0, w, ": K (", K, ") is not a multiple of the ", t->name,
                   " block size ", t->block_elems);
    const int64_t want = N * (K / t->block_elems) * t->block_bytes;
    MIXQ_CHECK_ARG(ggml->data.size() == static_cast<size_t>(want), w, ": ggml ", t->name,
                   " blocks hold ", ggml->data.size(), " bytes, expected N (", N, ") * ",
                   K / t->block_elems, " blocks * ", t->block_bytes, " = ", want);
    MIXQ_CHECK_ARG(k_perm.empty(), w, ": ggml blocks cannot describe a column-permuted weight");
    MIXQ_CHECK_ARG(plain_blocks(), w, ": ggml blocks cannot describe a weight with k_phase (",
                   k_phase, "), n_phase (", n_phase, ") or k_block_starts");
  }
  if (!k_perm.empty()) {
    MIXQ_CHECK_ARG(static_cast<int64_t>(k_perm.size()) == K, w, ": k_perm has ", k_perm.size(),
                   " entries, K is ", K);
    std::vector<uint8_t> seen(static_cast<size_t>(K), 0);
    for (int64_t j = 0; j < K; ++j) {
      const int32_t p = k_perm[j];
      MIXQ_CHECK_ARG(p >= 0 && p < K && !seen[p], w, ": k_perm is not a permutation of [0, K=", K,
                     "): entry ", j, " = ", p, (p >= 0 && p < K ? " (repeated)" : " (out of range)"));
      seen[p] = 1;
    }
  }
}

int64_t QuantizedWeight::storage_bytes() const {
  return static_cast<int64_t>(codes.size() + scales.size() + zeros.size());
}

double QuantizedWeight::bits_per_weight() const {
  return N * K > 0 ? 8.0 * storage_bytes() / (double(N) * double(K)) : 0.0;
}

std::string QuantizedWeight::describe() const {
  std::ostringstream os;
  os << dtype_name(code_type) << " [" << N << " x " << K << "]";
  if (has_scales) {
    if (block_k == K)
      os << " per-channel";
    else
      os << " g" << block_k;
    if (block_n != 1) os << "x" << block_n;
    os << " scales " << dtype_name(scale_type) << " zero=" << zero_kind_name(zero_kind);
  }
  if (!k_perm.empty()) os << " act-order";
  if (k_phase || n_phase) os << " phase k" << k_phase << " n" << n_phase;
  if (!k_block_starts.empty()) os << " " << n_blocks_k() << " listed K blocks";
  os << " (" << bits_per_weight() << " bits/weight)";
  return os.str();
}

void dequantize_rows(const QuantizedWeight& w, int64_t n0, int64_t n1, float* out,
                     bool original_order) {
  MIXQ_CHECK_ARG(n0 >= 0 && n0 <= n1 && n1 <= w.N, "dequantize_rows: rows [", n0, ", ", n1,
                 ") outside [0, N=", w.N, ")");
  const bool permute = original_order && !w.k_perm.empty();
  for (int64_t n = n0; n < n1; ++n) {
    float* row = out + (n - n0) * w.K;
    for (int64_t k = 0; k < w.K; ++k) {
      const float v = w.dequant(n, k);
      row[permute ? w.k_perm[k] : k] = v;
    }
  }
}

std::vector<float> dequantize_to_f32(const QuantizedWeight& w) {
  std::vector<float> out(static_cast<size_t>(w.N * w.K));
  dequantize_rows(w, 0, w.N, out.data(), false);
  return out;
}

}  // namespace mixq
