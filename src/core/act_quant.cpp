// Public activation quantizers into caller buffers (mixq/act_quant.hpp): argument validation,
// the CPU implementation (host quantizers + the GEMM layout) and dispatch to CUDA.
#include "mixq/act_quant.hpp"

#include <cstring>

#include "core/act_quant_dispatch.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"

namespace mixq {

int64_t act_quant_row_pitch(int64_t K) { return (K + 15) / 16 * 16; }
int64_t act_quant_meta_pitch(int64_t M) { return (M + 3) / 4 * 4; }

namespace {

struct Problem {
  int64_t M = 0, K = 0, n_blocks = 0;
};

void check_same_device(const TensorView& x, const TensorView& t, const char* op, const char* arg) {
  MIXQ_CHECK_ARG(t.device == x.device && t.device_index == x.device_index, op, ": ", arg, " (",
                 t.describe(), ", device index ", t.device_index, ") is not on x's device (",
                 device_name(x.device), " ", x.device_index, ")");
}

Problem check_x(const TensorView& x, const char* op, int64_t block) {
  check_view(x, op, 2, x.device);
  check_rows_contiguous(x, op);
  MIXQ_CHECK_ARG(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16, op,
                 ": x must be f32, f16 or bf16, got ", x.describe());
  MIXQ_CHECK_ARG(x.shape[0] >= 1 && x.shape[1] >= 1, op, ": empty x ", x.describe());
  return Problem{x.shape[0], x.shape[1], (x.shape[1] + block - 1) / block};
}

void check_codes(const TensorView& x, const TensorView& q, const Problem& p, bool fp8,
                 const char* op) {
  check_same_device(x, q, op, "q");
  check_view(q, "q", 2, x.device);
  check_rows_contiguous(q, "q");
  if (fp8)
    MIXQ_CHECK_ARG(q.dtype == DType::F8E4M3 || q.dtype == DType::U8, op,
                   ": q must be f8e4m3 or u8, got ", q.describe());
  else
    MIXQ_CHECK_ARG(q.dtype == DType::I8, op, ": q must be i8, got ", q.describe());
  const int64_t pitch = act_quant_row_pitch(p.K);
  MIXQ_CHECK_ARG(q.shape[0] == p.M && (q.shape[1] == p.K || q.shape[1] == pitch), op,
                 ": q must be [M][K] or [M][row pitch] = [", p.M, "][", p.K, "] or [", p.M, "][",
                 pitch, "], got ", q.describe());
  MIXQ_CHECK_ARG(q.stride[0] >= pitch, op, ": q row stride (", q.stride[0],
                 ") is smaller than act_quant_row_pitch(K) = ", pitch, " (the zero-padded row)");
}

void check_meta(const TensorView& x, const TensorView& t, DType dtype, const Problem& p,
                const char* op, const char* arg) {
  check_same_device(x, t, op, arg);
  check_view(t, arg, 2, x.device);
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

// Host: codes row by row with the zero padding up to the row pitch.
void put_codes(const TensorView& q, const uint8_t* codes, const Problem& p) {
  const int64_t pitch = act_quant_row_pitch(p.K);
  auto* base = static_cast<uint8_t*>(q.data);
  for (int64_t m = 0; m < p.M; ++m) {
    std::memcpy(base + m * q.stride[0], codes + m * p.K, static_cast<size_t>(p.K));
    std::memset(base + m * q.stride[0] + p.K, 0, static_cast<size_t>(pitch - p.K));
  }
}

// Host: [M][n_blocks] -> block-major [kb * ld + m].
template <typename T>
void put_meta(const TensorView& t, const std::vector<T>& v, const Problem& p) {
  T* base = static_cast<T*>(t.data);
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t kb = 0; kb < p.n_blocks; ++kb) base[kb * t.stride[0] + m] = v[m * p.n_blocks + kb];
}

}  // namespace

void quantize_activations_fp8_block(const TensorView& x, const TensorView& q,
                                    const TensorView& scale, const ExecContext& ctx) {
  const char* op = "quantize_activations_fp8_block";
  const Problem p = check_x(x, op, Fp8BlockActivations::kGroup);
  check_codes(x, q, p, true, op);
  check_meta(x, scale, DType::F32, p, op, "scale");
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
  const Problem p = check_x(x, op, block);
  check_codes(x, q, p, false, op);
  check_meta(x, scale, DType::F32, p, op, "scale");
  check_meta(x, offset, DType::F32, p, op, "offset");
  check_meta(x, sums, DType::I32, p, op, "sums");
  MIXQ_CHECK_ARG(offset.stride[0] == scale.stride[0] && sums.stride[0] == scale.stride[0], op,
                 ": scale, offset and sums must share one row stride, got ", scale.stride[0], ", ",
                 offset.stride[0], ", ", sums.stride[0]);
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
