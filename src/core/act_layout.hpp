// Internal: the quantized-activation layout of mixq/act_quant.hpp, checked and read in one place,
// so that the quantizers (src/core/act_quant.cpp) and linear(QuantizedActivations) (ops.cpp)
// accept exactly the same buffers, and the host backends read them the same way.
#pragma once

#include <cstdint>

#include "mixq/act_quant.hpp"
#include "mixq/quantize.hpp"
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

// Host copies of validated CPU tensors in the host quantizers' structs (row-major meta).
Int8BlockActivations int8_block_activations(const QuantizedActivations& xq, int64_t K);
Fp8BlockActivations fp8_block_activations(const QuantizedActivations& xq, int64_t K);

}  // namespace mixq::detail
