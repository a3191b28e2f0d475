// Internal: the layout of QuantizedActivations (mixq/ops.hpp), checked and read in one place, so
// that the quantizers (src/core/act_quant.cpp), linear(QuantizedActivations) (ops.cpp) and the
// reference kernels accept exactly the same buffers, and the host backends read them the same way.
#pragma once

#include <cstdint>

#include "mixq/act_quant.hpp"
#include "mixq/tensor.hpp"

namespace mixq::detail {

struct ActLayout {
  int64_t M = 0, K = 0, n_blocks = 0;
};

// Where the tensors must live: `device`, and `index` unless it is < 0 (any); `what` names it in
// errors ("x's device", "the weight's device").
struct ActPlace {
  Device device = Device::CPU;
  int index = -1;
  const char* what = "";
};

// `op: arg (...) is not on <at.what>` unless t lives there.
void check_act_place(const TensorView& t, const ActPlace& at, const char* op, const char* arg);
// `op: arg ...` errors. Codes: [M][K] or [M][act_quant_row_pitch(K)], row stride >= that pitch,
// i8 (fp8 false) or f8e4m3 / u8 (fp8 true).
void check_act_codes(const TensorView& q, const ActLayout& p, bool fp8, const ActPlace& at,
                     const char* op, const char* arg);
// Meta: [n_blocks][M] or [n_blocks][act_quant_meta_pitch(M)] of `dtype`, M contiguous, row
// stride >= that pitch.
void check_act_meta(const TensorView& t, DType dtype, const ActLayout& p, const ActPlace& at,
                    const char* op, const char* arg);
// INT8: offset and sums share scale's row stride.
void check_act_meta_strides(const TensorView& scale, const TensorView& offset,
                            const TensorView& sums, const char* op, const char* arg_prefix);

// `op: ...` errors unless xq is a complete set of views of `kind` in the layout for M =
// xq.q.shape[0] rows of K columns, on `at` (the shared part of linear(xq)'s and the reference
// kernels' checks; the block itself is the caller's to check). Returns the layout.
// `name` prefixes the argument names ("xq" -> "xq.q", "xq.scale", ...).
ActLayout check_quantized_activations(const QuantizedActivations& xq, ActQuant kind, int64_t K,
                                      const ActPlace& at, const char* op, const char* name);

// Host reads of validated CPU views: code row m (K bytes; i8 bit patterns or e4m3) and the
// meta of row m, block kb.
struct ActReader {
  explicit ActReader(const QuantizedActivations& xq)
      : q(static_cast<const uint8_t*>(xq.q.data)), ldq(xq.q.stride[0]),
        scale(static_cast<const float*>(xq.scale.data)),
        offset(static_cast<const float*>(xq.offset.data)),
        sums(static_cast<const int32_t*>(xq.sums.data)), ldm(xq.scale.stride[0]) {}

  const uint8_t* row(int64_t m) const { return q + m * ldq; }
  const int8_t* int8_row(int64_t m) const { return reinterpret_cast<const int8_t*>(row(m)); }
  float scale_of(int64_t m, int64_t kb) const { return scale[kb * ldm + m]; }
  float offset_of(int64_t m, int64_t kb) const { return offset[kb * ldm + m]; }
  int32_t sum_of(int64_t m, int64_t kb) const { return sums[kb * ldm + m]; }

  const uint8_t* q;
  int64_t ldq;
  const float* scale;
  const float* offset;
  const int32_t* sums;
  int64_t ldm;  // offset and sums share scale's row stride (check_act_meta_strides)
};

}  // namespace mixq::detail
