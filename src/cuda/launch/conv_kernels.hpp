// Host-side entry points of the conv2d kernels (plain C++ declarations).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/kernels/conv/conv_params.hpp"
#include "cuda/kernels/conv/conv_stem.hpp"

namespace mixq::cuda {

// Enqueues the conv on `stream`: grid (ceil(M / kConvBM), ceil(Co / kConvBN), splits) of
// kConvThreads, then (splits > 1) the reduction of p.partial into y. f16 activations run f16 MMAs,
// bf16 bf16 MMAs, f32 the three-product bf16 split. No allocation, no synchronisation
// (graph-capturable).
void launch_conv_igemm(const ConvIgemmParams& p, cudaStream_t stream);

// The few-input-channel conv (conv_stem.hpp; the plan from conv_stem_plan): a persistent grid of
// the blocks `sms` SMs hold at once. No allocation, no synchronisation.
void launch_conv_stem(const ConvStemParams& s, int sms, cudaStream_t stream);

// Its kernel name for activations of IoType x_type (f16 or bf16), and the INT8 stem's.
std::string conv_stem_name(IoType x_type, bool tma);
std::string conv_stem_i8_name(bool tma);

// The INT8 stem's input (s.requant; kernels/conv/stem_int8_input.cuh): the int8 image x
// ([batch][Ci][hw] if nchw, else [batch][hw][Ci]; Ci 1-4) as f16 x - zero into xc [batch][hw][Ci].
// No allocation, no synchronisation.
void launch_conv_stem_i8_input(const int8_t* x, void* xc, int64_t batch, int Ci, int64_t hw,
                               bool nchw, int zero, int sms, cudaStream_t stream);

// The INT8 per-tensor conv (kernel name sm80_conv_igemm_64x64_i8): same grid, no allocation.
void launch_conv_igemm_i8(const ConvI8Params& p, cudaStream_t stream);

// The INT8 per-tensor conv as the INT8 GEMM with its A operand gathered from an NHWC image
// (Int8GemmParams::conv; Ci a multiple of 16, x 16-byte aligned, B the codes [Np][Kp] in the
// KhKwCi order): tile 0, 1, 2 the GEMM's 16x32, 64x64 and 128x128 CTA tiles (int8_gemm.hpp), 3
// the 64x64 tile with a 3-stage pipeline (short K loops, more CTAs per SM). A
// multi-stage cp.async pipeline, where the sm80_conv_igemm_64x64_i8 kernel loads each K step
// synchronously. No allocation, no synchronisation.
void launch_conv_int8_gemm(const Int8GemmParams& p, int tile, cudaStream_t stream);

// dst[b][c][r] = src[b][r][c] for a batch of [rows][cols] matrices of 1-, 2- or 4-byte elements
// (bits copied): NCHW -> NHWC with rows = C, cols = H * W, and back with rows = H * W, cols = C
// (kernels/conv/layout_transpose.cuh). src and dst must not overlap and must be aligned to the
// element size. No allocation, no synchronisation (graph-capturable). pdl (sm_90 only):
// launched with programmatic dependent launch (kernels/common/grid_dependency.cuh).
void launch_image_transpose(const void* src, void* dst, int elem_bytes, int64_t batch,
                            int64_t rows, int64_t cols, cudaStream_t stream, bool pdl);

// The kernel name a call with activations of IoType x_type runs (KernelId-style, for
// PreparedWeight::kernel_name); `packed`: the packed-taps form (conv_params.hpp).
std::string conv_igemm_name(IoType x_type, bool packed);

}  // namespace mixq::cuda
