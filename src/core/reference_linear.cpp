// Exact reference linear kernels: float64 accumulation over dequantized f32 weights.
#include <cmath>
#include <vector>

#include "core/act_layout.hpp"
#include "core/fp8_act_weights.hpp"
#include "core/reference_parallel.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/reference.hpp"

namespace mixq::ref {

double load_as_double(const TensorView& v, int64_t i, int64_t j) {
  const int64_t off = i * v.stride[0] + j * v.stride[1];
  switch (v.dtype) {
    case DType::F32: return v.ptr<const float>()[off];
    case DType::F16: return f16_to_f32(v.ptr<const uint16_t>()[off]);
    case DType::BF16: return bf16_to_f32(v.ptr<const uint16_t>()[off]);
    case DType::F64: return v.ptr<const double>()[off];
    case DType::I8: return v.ptr<const int8_t>()[off];
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "load_as_double: unsupported ", v.describe());
  }
}

namespace {

// double -> f32 rounding to ODD: truncate, and set the last bit when anything was dropped.
// Rounding that result to nearest-even in a format with at least two fewer significand bits
// (f16: 11, bf16: 8, vs f32's 24) equals rounding the double directly. Going through a
// round-to-nearest f32 instead rounds twice: 1 + 2^-11 + 2^-40 becomes the f16 tie 1 + 2^-11 and
// then 1.0, where the correctly rounded f16 is 1 + 2^-10.
float to_f32_round_odd(double v) {
  float f = static_cast<float>(v);
  if (!std::isfinite(f) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return bits_f32(f32_bits(f) | 1u);
}

}  // namespace

void store_from_double(const TensorView& v, int64_t i, int64_t j, double value) {
  const int64_t off = i * v.stride[0] + j * v.stride[1];
  switch (v.dtype) {
    case DType::F32: v.ptr<float>()[off] = static_cast<float>(value); return;
    case DType::F16: v.ptr<uint16_t>()[off] = f32_to_f16(to_f32_round_odd(value)); return;
    case DType::BF16: v.ptr<uint16_t>()[off] = f32_to_bf16(to_f32_round_odd(value)); return;
    case DType::F64: v.ptr<double>()[off] = value; return;
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "store_from_double: unsupported ", v.describe());
  }
}

namespace {

double bias_at(const Epilogue& ep, int64_t n) {
  if (ep.bias.empty()) return 0.0;
  const TensorView& b = ep.bias;
  const int64_t off = n * b.stride[0];
  switch (b.dtype) {
    case DType::F32: return b.ptr<const float>()[off];
    case DType::F16: return f16_to_f32(b.ptr<const uint16_t>()[off]);
    case DType::BF16: return bf16_to_f32(b.ptr<const uint16_t>()[off]);
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "bias: unsupported ", b.describe());
  }
}

double apply_epilogue(const Epilogue& ep, int64_t n, double acc) {
  double v = acc + bias_at(ep, n);
  if (v < ep.clamp_lo) v = ep.clamp_lo;
  if (v > ep.clamp_hi) v = ep.clamp_hi;
  return v;
}

void check_2d(const TensorView& x, const TensorView& y, int64_t K, int64_t N, const char* op) {
  MIXQ_CHECK_ARG(x.rank == 2 && y.rank == 2, op, ": x and y must be rank 2, got ", x.describe(),
                 " and ", y.describe());
  MIXQ_CHECK_ARG(x.shape[1] == K, op, ": x.shape[1] (", x.shape[1], ") != K (", K, ")");
  MIXQ_CHECK_ARG(y.shape[0] == x.shape[0] && y.shape[1] == N, op, ": y is ", y.describe(),
                 ", expected [", x.shape[0], ", ", N, "]");
}

}  // namespace

void linear_weight_only(const TensorView& x, const QuantizedWeight& w, const TensorView& y,
                        const Epilogue& ep) {
  w.validate();
  check_2d(x, y, w.K, w.N, "ref::linear_weight_only");
  const int64_t M = x.shape[0], N = w.N, K = w.K;
  // X in original order, gathered into canonical column order once.
  std::vector<double> xs(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < K; ++j)
      xs[m * K + j] = load_as_double(x, m, w.k_perm.empty() ? j : w.k_perm[j]);
  for_each_chunk(N, 8, [&](int64_t n0, int64_t n1) {
    std::vector<float> wrow(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_rows(w, n, n + 1, wrow.data(), false);
      for (int64_t m = 0; m < M; ++m) {
        double acc = 0.0;
        const double* xr = &xs[m * K];
        for (int64_t k = 0; k < K; ++k) acc += xr[k] * static_cast<double>(wrow[k]);
        store_from_double(y, m, n, apply_epilogue(ep, n, acc));
      }
    }
  });
}

namespace {

// Both W8A8 oracles take the same weights: the four-term formula needs i8 codes in symmetric or
// offset form, per-row blocks aligned with the activation blocks, and canonical column order.
void check_w8a8_weight(const QuantizedWeight& w, int64_t act_block, const char* op) {
  MIXQ_CHECK_ARG(w.code_type == DType::I8 && w.has_scales && w.block_n == 1 &&
                     w.zero_kind != ZeroKind::ZeroPoint && w.k_perm.empty() &&
                     w.plain_blocks() && w.block_k == act_block,
                 op, ": needs i8 weights (symmetric or offset, no act-order) with block_k == "
                 "act_block (", act_block, "), got ", w.describe());
}

void check_fp8_weight(const QuantizedWeight& w) {
  // block_k is 128, or K itself when K < 128 (quantize_weight clamps the block to K: one
  // partial block either way). k_perm would be silently ignored by the group loop below.
  MIXQ_CHECK_ARG((e4m3_k_blocks(w) || w4a8_weight(w)) && w.plain_blocks(),
                 "ref::linear_fp8_block: needs f8e4m3 weights with 128-wide K blocks, or 4-bit "
                 "integer codes (W4A8) in per-row groups of 128 along K, symmetric or with zero "
                 "points; no act-order; got ", w.describe());
}

// The weight's factor of the FP8 product at (n, k): the e4m3 value, or (W4A8) the integer q - z.
double fp8_operand(const QuantizedWeight& w, int64_t n, int64_t k) {
  if (w.code_type == DType::F8E4M3) return double(w.code_value(n, k));
  const int32_t z = w.zero_kind == ZeroKind::ZeroPoint ? w.zero_point(w.n_block(n), w.k_block(k)) : 0;
  return double(w.code_int(n, k) - z);
}

// Host-quantized activations: views of `kind` in the QuantizedActivations layout on the CPU, K of
// the weight, y [M][N]. Returns M.
int64_t check_quantized(const QuantizedActivations& a, ActQuant kind, const TensorView& y,
                        const QuantizedWeight& w, const char* op) {
  MIXQ_CHECK_ARG(a.kind == kind, op, ": a.kind is ", act_quant_name(a.kind), ", expected ",
                 act_quant_name(kind));
  const detail::ActPlace host{Device::CPU, -1, "the host"};
  const int64_t M = detail::check_quantized_activations(a, kind, w.K, host, op, "a").M;
  MIXQ_CHECK_ARG(y.rank == 2 && y.shape[0] == M && y.shape[1] == w.N, op, ": y is ",
                 y.describe(), ", expected [", M, ", ", w.N, "]");
  return M;
}

}  // namespace

void linear_w8a8_block(const TensorView& x, const QuantizedWeight& w, int64_t act_block,
                       const TensorView& y, const Epilogue& ep) {
  w.validate();
  check_2d(x, y, w.K, w.N, "ref::linear_w8a8_block");
  check_w8a8_weight(w, act_block, "ref::linear_w8a8_block");
  linear_w8a8_block(quantize_activations_int8_block(x, act_block).view(), w, y, ep);
}

void linear_w8a8_block(const QuantizedActivations& a, const QuantizedWeight& w,
                       const TensorView& y, const Epilogue& ep) {
  w.validate();
  const int64_t M = check_quantized(a, ActQuant::Int8Block, y, w, "ref::linear_w8a8_block");
  const int64_t act_block = a.block;
  check_w8a8_weight(w, act_block, "ref::linear_w8a8_block");
  const detail::ActReader r(a);
  const int64_t N = w.N, K = w.K, nb = (K + act_block - 1) / act_block;
  for_each_chunk(N, 8, [&](int64_t n0, int64_t n1) {
    std::vector<int32_t> qw(static_cast<size_t>(K));
    std::vector<int64_t> wsum(static_cast<size_t>(nb));
    for (int64_t n = n0; n < n1; ++n) {
      // The row's codes and per-block sums (precomputed with the weights in a real kernel).
      std::fill(wsum.begin(), wsum.end(), 0);
      for (int64_t k = 0; k < K; ++k) {
        qw[k] = w.code_int(n, k);
        wsum[k / act_block] += qw[k];
      }
      for (int64_t m = 0; m < M; ++m) {
        double acc = 0.0;
        for (int64_t b = 0; b < nb; ++b) {
          const int64_t k0 = b * act_block, k1 = std::min(K, k0 + act_block);
          int64_t dot = 0;
          const int8_t* qx = r.int8_row(m);
          for (int64_t k = k0; k < k1; ++k) dot += int64_t(qx[k]) * int64_t(qw[k]);
          const double sx = r.scale_of(m, b), ox = r.offset_of(m, b);
          const double sw = w.scale(n, b);
          const double ow = w.zero_kind == ZeroKind::Offset ? w.offset(n, b) : 0.0;
          const double g = static_cast<double>(k1 - k0);
          acc += sx * sw * double(dot) + sx * ow * double(r.sum_of(m, b)) +
                 ox * sw * double(wsum[b]) + g * ox * ow;
        }
        store_from_double(y, m, n, apply_epilogue(ep, n, acc));
      }
    }
  });
}

void linear_w8a8_block_dequant(const TensorView& x, const QuantizedWeight& w, int64_t act_block,
                               const TensorView& y, const Epilogue& ep) {
  w.validate();
  check_2d(x, y, w.K, w.N, "ref::linear_w8a8_block_dequant");
  // Without this check a zero-point weight was multiplied as if symmetric (z ignored).
  check_w8a8_weight(w, act_block, "ref::linear_w8a8_block_dequant");
  const QuantizedActivationsBuffer a = quantize_activations_int8_block(x, act_block);
  const int64_t M = x.shape[0], N = w.N, K = w.K;
  std::vector<double> xd(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t b = k / act_block;
      xd[m * K + k] = double(a.int8_code(m, k)) * a.scale_of(m, b) + a.offset_of(m, b);
    }
  for_each_chunk(N, 8, [&](int64_t n0, int64_t n1) {
    std::vector<double> wd(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t k = 0; k < K; ++k) {  // exact in double (no f32 rounding, unlike dequant())
        const int64_t b = k / w.block_k;
        wd[k] = double(w.code_int(n, k)) * w.scale(n, b);
        if (w.zero_kind == ZeroKind::Offset) wd[k] += w.offset(n, b);
      }
      for (int64_t m = 0; m < M; ++m) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k) acc += xd[m * K + k] * wd[k];
        store_from_double(y, m, n, apply_epilogue(ep, n, acc));
      }
    }
  });
}

void linear_fp8_block(const TensorView& x, const QuantizedWeight& w, const TensorView& y,
                      const Epilogue& ep) {
  w.validate();
  check_2d(x, y, w.K, w.N, "ref::linear_fp8_block");
  check_fp8_weight(w);
  linear_fp8_block(quantize_activations_fp8_block(x).view(), w, y, ep);
}

void linear_fp8_block(const QuantizedActivations& a, const QuantizedWeight& w, const TensorView& y,
                      const Epilogue& ep) {
  w.validate();
  const int64_t M = check_quantized(a, ActQuant::Fp8Block, y, w, "ref::linear_fp8_block");
  MIXQ_CHECK_ARG(a.block == QuantizedActivations::kFp8Block, "ref::linear_fp8_block: a.block (",
                 a.block, ") must be ", QuantizedActivations::kFp8Block);
  check_fp8_weight(w);
  const detail::ActReader r(a);
  constexpr int64_t G = QuantizedActivations::kFp8Block;
  const int64_t N = w.N, K = w.K, ng = (K + G - 1) / G;
  // The operands decoded once into doubles (a chunk of weight rows, one activation row per chunk
  // and row), not per product: the same sums in the same order, several times faster.
  constexpr int64_t kRows = 64;
  for_each_chunk(N, kRows, [&](int64_t n0, int64_t n1) {
    std::vector<double> wd(static_cast<size_t>(kRows * K)), xd(static_cast<size_t>(K));
    const int64_t rows = n1 - n0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < K; ++k) wd[size_t(i * K + k)] = fp8_operand(w, n0 + i, k);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) xd[size_t(k)] = double(e4m3_to_f32(r.row(m)[k]));
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t n = n0 + i;
        const double* wr = wd.data() + i * K;
        double acc = 0.0;
        for (int64_t g = 0; g < ng; ++g) {
          double part = 0.0;
          for (int64_t k = g * G; k < std::min(K, g * G + G); ++k) part += xd[size_t(k)] * wr[k];
          acc += part * double(r.scale_of(m, g)) * double(w.scale(n / w.block_n, g));
        }
        store_from_double(y, m, n, apply_epilogue(ep, n, acc));
      }
    }
  });
}

void linear_int8_requant(const TensorView& x, const QuantizedWeight& w, Int8TensorQuant in,
                         Int8TensorQuant out, const TensorView& y, const Epilogue& ep) {
  w.validate();
  check_2d(x, y, w.K, w.N, "ref::linear_int8_requant");
  MIXQ_CHECK_ARG(x.dtype == DType::I8, "ref::linear_int8_requant: x must be i8, got ", x.describe());
  // scale(n, 0) below assumes one scale per row and canonical column order.
  MIXQ_CHECK_ARG(w.code_type == DType::I8 && w.has_scales && w.block_k == w.K && w.block_n == 1 &&
                     w.zero_kind == ZeroKind::None && w.k_perm.empty() && w.plain_blocks(),
                 "ref::linear_int8_requant: needs i8 symmetric per-channel weights without "
                 "act-order, got ", w.describe());
  MIXQ_CHECK_ARG(y.dtype == DType::I8 || y.dtype == DType::F32,
                 "ref::linear_int8_requant: y must be i8 or f32, got ", y.describe());
  const int64_t M = x.shape[0], N = w.N, K = w.K;
  for_each_chunk(N, 8, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t m = 0; m < M; ++m) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (int64_t(x.ptr<const int8_t>()[m * x.stride[0] + k]) - in.zero) * w.code_int(n, k);
        const double real =
            apply_epilogue(ep, n, double(in.scale) * double(w.scale(n, 0)) * double(acc));
        if (y.dtype == DType::I8) {
          double q = std::nearbyint(real / double(out.scale)) + out.zero;
          q = std::min(127.0, std::max(-128.0, q));
          y.ptr<int8_t>()[m * y.stride[0] + n] = static_cast<int8_t>(q);
        } else {
          store_from_double(y, m, n, real);
        }
      }
  });
}

}  // namespace mixq::ref
