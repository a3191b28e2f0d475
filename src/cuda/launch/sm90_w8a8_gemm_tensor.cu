// The Hopper INT8 GEMM in the per-tensor mode (requantized output): the block skeleton's 128 x 128
// wgmma s8 kernel with integer totals and the exact epilogue of kernels/w8a8/sm90_i8_tensor_policy.cuh.
#include <algorithm>

#include "cuda/kernels/w8a8/sm90_i8_tensor_policy.cuh"
#include "cuda/launch/sm90_block_gemm_launch.cuh"
#include "cuda/launch/sm90_w8a8_gemm_configs.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

namespace {

// kBN = 128: 6 stages of 32 KiB (no metadata), the block mode's single-CTA shape. kBN = 64: 8 stages
// of 24 KiB, twice the tiles for a call whose 128 x 128 tiles leave SMs idle or end in a short last
// round (a convolution's deep layers: 3x3 512->512 @7 at batch 32 has 52 tiles for 132 SMs).
template <int kBN, int kStages>
void launch_tensor_tiles(const Int8GemmParams& a, cudaStream_t stream, const char* name) {
  using Policy = sm90::Int8TensorPolicy;
  using Shape = sm90::BlockGemmShape<kBN, kStages, Policy, 1, 1>;
  const uint64_t M = uint64_t(a.M), N = uint64_t(a.N), K = uint64_t(a.K);
  // Codes: columns past K read as zeros (TMA fill) on both sides. A convolution's A is the im2col
  // view of its NHWC image: 128 output pixels x 128 channels of one tap per stage (the padding
  // and pixels past the last image zero-filled; the policy's epilogue corrects for Z_I).
  const CUtensorMap tm_a =
      a.conv_on ? make_tensor_map_im2col_nhwc(a.a, a.conv, 128, uint32_t(Shape::kBM), CU_TENSOR_MAP_SWIZZLE_128B,
                                              CU_TENSOR_MAP_DATA_TYPE_UINT8)
                : make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, K, M, uint64_t(a.lda), 128, Shape::kBM,
                                     CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_b = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, K, N, uint64_t(a.ldb), 128,
                                              Shape::kBRowsPerCta, CU_TENSOR_MAP_SWIZZLE_128B);
  Policy::Params pp;
  pp.wsum = a.wsum;
  pp.wscale = a.wscale;
  pp.in_zero = a.in_zero;
  pp.out_scale = a.out_scale;
  pp.out_zero = a.out_zero;
  pp.y_i8 = a.y_type == 3 ? 1 : 0;
  pp.wsum_tap = a.wsum_tap;
  sm90::BlockGemmParams p;
  p.conv = a.conv;
  p.conv.Ck = im2col_tap_columns(p.conv);  // the kernel reads Ck
  p.conv_on = a.conv_on;
  p.set_tiles(a.M, a.N, (a.K + 127) / 128, Shape::kBM, kBN, 1);
  p.group_n = a.group_n > 0 ? a.group_n : 8;
  p.k_split = a.k_split;
  // The policy stores the outputs (int8 or f32): no TMA-store epilogue, no pairs.
  p.y = a.y;
  p.ldy = a.ldy;
  p.y_type = a.y_type;
  p.bias = a.bias;
  p.bias_type = a.bias_type;
  p.clamp_lo = a.clamp_lo;
  p.clamp_hi = a.clamp_hi;
  int sms = a.num_sms;
  if (sms <= 0) {
    int dev = 0;
    MIXQ_CUDA_CHECK(cudaGetDevice(&dev));
    MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  launch_block_gemm<kBN, kStages, Policy, 1, 1>(tm_a, tm_b, pp, p, sms, 0, stream, name);
}

}  // namespace

void launch_w8a8_tensor(const Int8GemmParams& a, cudaStream_t stream, const char* name) {
  MIXQ_CHECK_ARG(a.tile_n == 128 || a.tile_n == 64, name, ": tile_n (", a.tile_n, ") must be 128 or 64");
  MIXQ_CHECK_ARG(a.k_split == 1 || a.k_split == 2 || a.k_split == 4 || a.k_split == 8, name,
                 ": k_split (", a.k_split, ") must be 1, 2, 4 or 8");
  if (a.tile_n == 64) launch_tensor_tiles<64, 8>(a, stream, name);
  else launch_tensor_tiles<128, 6>(a, stream, name);
}

}  // namespace mixq::cuda
