// Public activation quantizers into caller buffers (mixq/act_quant.hpp): argument validation,
// the CPU implementation (host quantizers + the GEMM layout) and dispatch to CUDA; the layout's
// checks and host readers shared with linear(QuantizedActivations) (core/act_layout.hpp).
#include "mixq/act_quant.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "core/act_layout.hpp"
#include "core/act_quant_dispatch.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"

namespace mixq {

int64_t act_quant_row_pitch(int64_t K) { return (K + 15) / 16 * 16; }
int64_t act_quant_meta_pitch(int64_t M) { return (M + 3) / 4 * 4; }

namespace detail {

void check_act_place(const TensorView& t, const ActPlace& at, const char* op, const char* arg) {
  MIXQ_CHECK_ARG(t.device == at.device && (at.index < 0 || t.device_index == at.index), op, ": ",
                 arg, " (", t.describe(), ", device index ", t.device_index, ") is not on ",
                 at.what, " (", device_name(at.device), at.index < 0 ? "" : " ",
                 at.index < 0 ? std::string() : std::to_string(at.index), ")");
}

void check_act_codes(const TensorView& q, const ActLayout& p, bool fp8, const ActPlace& at,
                     const char* op, const char* arg) {
  check_act_place(q, at, op, arg);
  check_view(q, arg, 2, at.device);
  check_rows_contiguous(q, arg);
  if (fp8)
    MIXQ_CHECK_ARG(q.dtype == DType::F8E4M3 || q.dtype == DType::U8, op, ": ", arg,
                   " must be f8e4m3 or u8, got ", q.describe());
  else
    MIXQ_CHECK_ARG(q.dtype == DType::I8, op, ": ", arg, " must be i8, got ", q.describe());
  const int64_t pitch = act_quant_row_pitch(p.K);
  MIXQ_CHECK_ARG(q.shape[0] == p.M && (q.shape[1] == p.K || q.shape[1] == pitch), op, ": ", arg,
                 " must be [M][K] or [M][row pitch] = [", p.M, "][", p.K, "] or [", p.M, "][",
                 pitch, "], got ", q.describe());
  MIXQ_CHECK_ARG(q.stride[0] >= pitch, op, ": ", arg, " row stride (", q.stride[0],
                 ") is smaller than act_quant_row_pitch(K) = ", pitch, " (the zero-padded row)");
}

void check_act_meta(const TensorView& t, DType dtype, const ActLayout& p, const ActPlace& at,
                    const char* op, const char* arg) {
  check_act_place(t, at, op, arg);
  check_view(t, arg, 2, at.device);
  check_rows_contiguous(t, arg);
  MIXQ_CHECK_ARG(t.dtype == dtype, op, ": ", arg, " must be ", dtype_name(dtype), ", got ",
                 t.describe());
  const int64_t pitch = act_quant_meta_pitch(p.M);
  MIXQ_CHECK_ARG(t.shape[0] == p.n_blocks && (t.shape[1] == p.M || t.shape[1] == pitch), op,
                 ": ", arg, " must be [n_blocks][M] or [n_blocks][meta pitch] = [", p.n_blocks,
                 "][", p.M, "] or [", p.n_blocks, "][", pitch, "] (block-major, M contiguous), got ",
                 t.describe());
  MIXQ_CHECK_ARG(t.stride[0] >= pitch, op, ": ", arg, " row stride (", t.stride[0],
                 ") is smaller than act_quant_meta_pitch(M) = ", pitch);
}

void check_act_meta_strides(const TensorView& scale, const TensorView& offset,
                            const TensorView& sums, const char* op, const char* arg_prefix) {
  MIXQ_CHECK_ARG(offset.stride[0] == scale.stride[0] && sums.stride[0] == scale.stride[0], op,
                 ": ", arg_prefix, "scale, ", arg_prefix, "offset and ", arg_prefix,
                 "sums must share one row stride, got ", scale.stride[0], ", ", offset.stride[0],
                 ", ", sums.stride[0]);
}

namespace {
// Host: block-major [kb * ld + m] -> [M][n_blocks].
template <typename T>
std::vector<T> get_meta(const TensorView& t, int64_t M, int64_t n_blocks) {
  std::vector<T> v(static_cast<size_t>(M * n_blocks));
  const T* base = static_cast<const T*>(t.data);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kb = 0; kb < n_blocks; ++kb) v[m * n_blocks + kb] = base[kb * t.stride[0] + m];
  return v;
}

// Host: the first K codes of every row.
template <typename T>
std::vector<T> get_codes(const TensorView& q, int64_t M, int64_t K) {
  std::vector<T> v(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    std::memcpy(v.data() + m * K, static_cast<const uint8_t*>(q.data) + m * q.stride[0],
                static_cast<size_t>(K));
  return v;
}
}  // namespace

Int8BlockActivations int8_block_activations(const QuantizedActivations& xq, int64_t K) {
  Int8BlockActivations a;
  a.M = xq.q.shape[0];
  a.K = K;
  a.block = xq.block;
  a.q = get_codes<int8_t>(xq.q, a.M, K);
  a.scale = get_meta<float>(xq.scale, a.M, a.n_blocks());
  a.offset = get_meta<float>(xq.offset, a.M, a.n_blocks());
  a.sums = get_meta<int32_t>(xq.sums, a.M, a.n_blocks());
  return a;
}

Fp8BlockActivations fp8_block_activations(const QuantizedActivations& xq, int64_t K) {
  Fp8BlockActivations a;
  a.M = xq.q.shape[0];
  a.K = K;
  a.q = get_codes<uint8_t>(xq.q, a.M, K);
  a.scale = get_meta<float>(xq.scale, a.M, a.n_groups());
  return a;
}

}  // namespace detail

namespace {

using detail::ActLayout;
using detail::ActPlace;

ActLayout check_x(const TensorView& x, const char* op, int64_t block) {
  check_view(x, op, 2, x.device);
  check_rows_contiguous(x, op);
  MIXQ_CHECK_ARG(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16, op,
                 ": x must be f32, f16 or bf16, got ", x.describe());
  MIXQ_CHECK_ARG(x.shape[0] >= 1 && x.shape[1] >= 1, op, ": empty x ", x.describe());
  return ActLayout{x.shape[0], x.shape[1], (x.shape[1] + block - 1) / block};
}

ActPlace place_of(const TensorView& x) { return ActPlace{x.device, x.device_index, "x's device"}; }

// Host: codes row by row with the zero padding up to the row pitch.
void put_codes(const TensorView& q, const uint8_t* codes, const ActLayout& p) {
  const int64_t pitch = act_quant_row_pitch(p.K);
  auto* base = static_cast<uint8_t*>(q.data);
  for (int64_t m = 0; m < p.M; ++m) {
    std::memcpy(base + m * q.stride[0], codes + m * p.K, static_cast<size_t>(p.K));
    std::memset(base + m * q.stride[0] + p.K, 0, static_cast<size_t>(pitch - p.K));
  }
}

// Host: [M][n_blocks] -> block-major [kb * ld + m].
template <typename T>
void put_meta(const TensorView& t, const std::vector<T>& v, const ActLayout& p) {
  T* base = static_cast<T*>(t.data);
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t kb = 0; kb < p.n_blocks; ++kb) base[kb * t.stride[0] + m] = v[m * p.n_blocks + kb];
}

}  // namespace

void quantize_activations_fp8_block(const TensorView& x, const TensorView& q,
                                    const TensorView& scale, const ExecContext& ctx) {
  const char* op = "quantize_activations_fp8_block";
  const ActLayout p = check_x(x, op, Fp8BlockActivations::kGroup);
  detail::check_act_codes(q, p, true, place_of(x), op, "q");
  detail::check_act_meta(scale, DType::F32, p, place_of(x), op, "scale");
  if (x.device == Device::CUDA) {
    detail::quantize_activations_fp8_block_cuda(x, q, scale, ctx);
    return;
  }
  const Fp8BlockActivations a = quantize_activations_fp8_block(x);
  put_codes(q, a.q.data(), p);
  put_meta(scale, a.scale, p);
}

void quantize_activations_int8_block(const TensorView& x, int64_t block, const TensorView& q,
                                     const TensorView& scale, const TensorView& offset,
                                     const TensorView& sums, const ExecContext& ctx) {
  const char* op = "quantize_activations_int8_block";
  MIXQ_CHECK_ARG(block == 32 || block == 64 || block == 128 || block == 256, op, ": block (",
                 block, ") must be 32, 64, 128 or 256");
  const ActLayout p = check_x(x, op, block);
  detail::check_act_codes(q, p, false, place_of(x), op, "q");
  detail::check_act_meta(scale, DType::F32, p, place_of(x), op, "scale");
  detail::check_act_meta(offset, DType::F32, p, place_of(x), op, "offset");
  detail::check_act_meta(sums, DType::I32, p, place_of(x), op, "sums");
  detail::check_act_meta_strides(scale, offset, sums, op, "");
  if (x.device == Device::CUDA) {
    detail::quantize_activations_int8_block_cuda(x, block, q, scale, offset, sums, ctx);
    return;
  }
  const Int8BlockActivations a = quantize_activations_int8_block(x, block);
  put_codes(q, reinterpret_cast<const uint8_t*>(a.q.data()), p);
  put_meta(scale, a.scale, p);
  put_meta(offset, a.offset, p);
  put_meta(sums, a.sums, p);
}

}  // namespace mixq
