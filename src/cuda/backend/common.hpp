// Internal helpers shared by the CUDA prepared weights (backend/*.cpp): the kernels' dtype codes,
// the quantizers' tuning, and for the two INT8 ones device selection and workspace carving.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/int8_gemm.hpp"
#include "cuda/kernels/common/quant_out.hpp"
#include "mixq/tuning.hpp"
#include "mixq/error.hpp"
#include "mixq/ops.hpp"
#include "mixq/tensor.hpp"

namespace mixq::cuda {

// The kernels' code of a floating-point activation / output / bias type (IoType: 0 f16, 1 bf16,
// 2 f32); `what` names the backend in the error for any other type.
inline int float_type_code(DType t, const char* what) {
  switch (t) {
    case DType::F16: return 0;
    case DType::BF16: return 1;
    case DType::F32: return 2;
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, what, ": unsupported activation/output/bias dtype ", dtype_name(t));
  }
}

// The quantizers' part of a prepared weight's tuning.
// Where the block GEMM's quantizing epilogue writes a validated quantized output yq of N columns
// (linear(..., yq); kernels/common/epilogue_quant.cuh).
inline sm90::QuantOut quant_out_of(const QuantizedActivations& yq, int64_t N) {
  sm90::QuantOut q;
  q.kind = yq.kind == ActQuant::Fp8Block ? 1 : 2;
  q.block = int(yq.block);
  q.pitch = int(act_row_pitch(N));
  q.q = static_cast<uint8_t*>(yq.q.data);
  q.ld_q = yq.q.stride[0];
  q.scale = static_cast<float*>(yq.scale.data);
  q.offset = static_cast<float*>(yq.offset.data);
  q.sums = static_cast<int*>(yq.sums.data);
  q.ld_meta = yq.scale.stride[0];
  return q;
}

inline ActQuantTuning act_quant_tuning(const Tuning& t) {
  ActQuantTuning a;
  a.pieces = t.act_quant_pieces;
  a.ctas_per_sm = t.act_quant_ctas_per_sm;
  a.band = t.act_quant_band;
  return a;
}

}  // namespace mixq::cuda

namespace mixq::cuda::int8b {

using cuda::DeviceGuard;

// 0 f16, 1 bf16, 2 f32, 3 i8 (the kernels' type codes).
inline int type_code(DType t) { return t == DType::I8 ? 3 : float_type_code(t, "cuda int8"); }

inline size_t align256(size_t b) { return (b + 255) / 256 * 256; }
inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The forced int8 kernel (an unknown name is an error): PrepareOptions::force_kernel, else
// MIXQ_FORCE_KERNEL when it names an int8 kernel ("sm80_i8_...", "sm90_i8_...").
inline std::string force_kernel(const PrepareOptions& o) {
  return forced_kernel(o, {"sm80_i8", "sm90_i8"});
}

inline void check_device(const PrepareOptions& o) { check_device_ordinal(o.device); }

// The output fields of the GEMM parameters: the epilogue's bias and clamp (set_epilogue), y and
// its dtype (set_y), or both (set_output).
inline void set_epilogue(Int8GemmParams& p, const Epilogue& ep) {
  p.bias = ep.bias.empty() ? nullptr : ep.bias.data;
  p.bias_type = ep.bias.empty() ? 2 : type_code(ep.bias.dtype);
  p.clamp_lo = ep.clamp_lo;
  p.clamp_hi = ep.clamp_hi;
}
inline void set_y(Int8GemmParams& p, const TensorView& y) {
  p.y = y.data;
  p.ldy = y.ld();
  p.y_type = type_code(y.dtype);
}
inline void set_output(Int8GemmParams& p, const TensorView& y, const Epilogue& ep) {
  set_y(p, y);
  set_epilogue(p, ep);
}

// The device a prepared INT8 weight lives on, checked at prepare: an mma.sync s8 GPU (compute
// capability >= 8.0). `what` names the prepared kind in the error.
struct Int8Device {
  int id = 0;
  DeviceContext* ctx = nullptr;
  DeviceCaps caps;
  Int8Device(const PrepareOptions& o, const char* what) {
    check_device(o);
    id = o.device;
    DeviceGuard guard(id);
    ctx = &DeviceContext::get(id);
    caps = ctx->caps();
    MIXQ_CHECK(caps.cc_major >= 8, ErrorCode::Unsupported, what, " needs compute capability >= 8.0 "
               "(mma.sync s8), device ", id, " is ", caps.cc_major, ".", caps.cc_minor);
  }
  // A device copy of host bytes (at least 16 bytes allocated).
  DeviceBuffer upload(const void* src, size_t bytes) const {
    DeviceBuffer b(bytes > 16 ? bytes : 16, id);
    b.copy_from_host(src, bytes);
    return b;
  }
};

}  // namespace mixq::cuda::int8b
