// Internal: one factory per CUDA prepared-weight kind; prepare_cuda (backend_cuda.cpp) picks one
// from PrepareOptions::act. Each validates what it supports and throws Unsupported otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/prepared.hpp"
#include "cuda/kernels/common/im2col_conv.hpp"
#include "cuda/launch/sm90_w8a8_grouped.hpp"

namespace mixq::cuda {

std::shared_ptr<const PreparedImpl> prepare_weight_only(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_fp8_block(const QuantizedWeight& w,
                                                      const PrepareOptions& opts);
// What the grouped FP8 GEMM needs of one expert prepared by prepare_fp8_block (its device codes
// and block scales, backend/moe_fp8_experts.cpp); false when impl is not such a weight.
struct Fp8ExpertView {
  const uint8_t* codes = nullptr;  // [N][ldb] e4m3, zero codes past K
  int64_t ldb = 0;
  const float* sb = nullptr;       // sb(nb, kb) at [nb * ld_sb + kb]
  int64_t ld_sb = 0;
  int device = 0;
};
bool fp8_block_expert_view(const PreparedImpl& impl, Fp8ExpertView& view);
std::shared_ptr<const PreparedImpl> prepare_int8_block(const QuantizedWeight& w,
                                                       const PrepareOptions& opts);
// What the grouped INT8 GEMM needs of one expert prepared by prepare_int8_block
// (backend/moe_int8_experts.cpp); false when impl is not such a weight. w.r1w is null where the
// weight has no rank-1 planes (a device without the Hopper kernel).
struct Int8ExpertView {
  Int8ExpertWeights w;
  int g = 128;          // K block
  bool offset = false;  // offset weights
  int device = 0;
};
bool int8_block_expert_view(const PreparedImpl& impl, Int8ExpertView& view);
std::shared_ptr<const PreparedImpl> prepare_int8_tensor(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
// GGUF block tensors at their native width (ggml_native.cpp), when use_ggml_native says so:
// the weight carries its ggml blocks of a type the kernels read, act = none, and neither
// Tuning::cuda_ggml_native = Off nor a forced canonical kernel asks for the canonical form.
bool use_ggml_native(const QuantizedWeight& w, const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_ggml_native(const QuantizedWeight& w,
                                                        const PrepareOptions& opts);
// conv2d, weight-only (act = none): the implicit-GEMM kernel (conv_weight_only.cpp).
std::shared_ptr<const PreparedImpl> prepare_conv_weight_only(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts);
// The Hopper wgmma kernel of a weight-only linear weight (prepare_weight_only, N = Co, K = Kh Kw Ci
// in KhKwCi order) run as an implicit-GEMM conv2d over an NHWC 16-bit x through a TMA im2col map
// (weight_only.cpp). `conv_igemm_serves` says whether this device, weight and call can.
bool conv_igemm_serves(const PreparedImpl& linear_weight, const Im2colConv& g, const TensorView& x);
std::string conv_igemm_kernel_name(const PreparedImpl& linear_weight, int64_t M, DType act);
void conv_igemm(const PreparedImpl& linear_weight, const Im2colConv& g, const TensorView& x,
                const TensorView& y, const Epilogue& ep, const ExecContext& ctx);
// conv2d, act = int8-per-tensor: the INT8 implicit GEMM with requantized output
// (conv_int8_tensor.cpp).
std::shared_ptr<const PreparedImpl> prepare_conv_int8_tensor(const QuantizedWeight& w,
                                                             const ConvGeometry& g,
                                                             const PrepareOptions& opts);

}  // namespace mixq::cuda
