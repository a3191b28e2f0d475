// Host launcher of the Hopper INT8 W8A8 per-block GEMM: tensor maps over the quantized
// activations, the packed weight and both metas, then the persistent block-GEMM kernel.
#include "cuda/sm90_w8a8_gemm.hpp"

#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/kernels/sm90_block_gemm.cuh"
#include "cuda/kernels/sm90_w8a8_policy.cuh"
#include "cuda/sm90_tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

constexpr int kBN = 128, kStages = 6;  // 6 x (16 + 16 + 3) KiB of shared memory

template <bool kOffset>
void launch_w8a8(const Int8GemmParams& a, cudaStream_t stream) {
  using Policy = sm90::Int8BlockPolicy<kBN, kOffset>;
  using Shape = sm90::BlockGemmShape<kBN, kStages, Policy>;
  auto kernel = sm90::sm90_block_gemm_kernel<kBN, kStages, Policy>;
  MIXQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Shape::kSmemBytes));
  const uint64_t M = uint64_t(a.M), N = uint64_t(a.N), K = uint64_t(a.K);
  const uint64_t nkb = uint64_t(a.n_kblocks), Np = uint64_t(a.Np);
  // Codes: columns past K read as zeros (TMA fill), so neither operand needs its K padding.
  const CUtensorMap tm_a = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.a, K, M,
                                              uint64_t(a.lda), 128, Shape::kBM,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tm_b = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, a.b, K, N,
                                              uint64_t(a.ldb), 128, kBN,
                                              CU_TENSOR_MAP_SWIZZLE_128B);
  typename Policy::Params pp;
  const uint64_t row_pitch = uint64_t(a.ld_meta) * 4, col_pitch = Np * 4;
  pp.sx = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sx, M, nkb, row_pitch, 128, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.ox = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.ox, M, nkb, row_pitch, 128, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.sumx = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_INT32, a.sumx, M, nkb, row_pitch, 128, 1,
                               CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.sw = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.sw, Np, nkb, col_pitch, kBN, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.dw = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.dw, Np, nkb, col_pitch, kBN, 1,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  pp.ow = kOffset ? make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a.ow, Np, nkb, col_pitch,
                                       kBN, 1, CU_TENSOR_MAP_SWIZZLE_NONE)
                  : pp.dw;
  sm90::BlockGemmParams p;
  p.M = a.M;
  p.N = a.N;
  p.num_kb = a.n_kblocks;
  p.num_m = (a.M + Shape::kBM - 1) / Shape::kBM;
  p.num_n = (a.N + kBN - 1) / kBN;
  p.num_tiles = p.num_m * p.num_n;
  p.group_n = 8;
  p.set_output(a.y, a.ldy, a.y_type, a.bias, a.bias_type, a.clamp_lo, a.clamp_hi);
  int sms = a.num_sms;
  if (sms <= 0) {
    int dev = 0;
    MIXQ_CUDA_CHECK(cudaGetDevice(&dev));
    MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  const int grid = std::max(1, std::min(p.num_tiles, sms));
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(tm_a, tm_b, pp, p);
  MIXQ_CUDA_CHECK_LAUNCH("sm90_i8_128x128");
}

}  // namespace

bool sm90_int8_block_available() {
  static int cached[64];  // 0 unknown, 1 yes, 2 no (per device ordinal)
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  if (cached[dev] == 0) {
    cudaDeviceProp prop{};
    cudaFuncAttributes attr{};
    using Policy = sm90::Int8BlockPolicy<kBN, false>;
    const bool ok =
        cudaGetDeviceProperties(&prop, dev) == cudaSuccess && prop.major == 9 &&
        prop.minor == 0 &&
        cudaFuncGetAttributes(&attr, sm90::sm90_block_gemm_kernel<kBN, kStages, Policy>) ==
            cudaSuccess &&
        attr.binaryVersion == 90;
    cudaGetLastError();
    cached[dev] = ok ? 1 : 2;
  }
  return cached[dev] == 1;
}

void launch_sm90_int8_block(const Int8GemmParams& a, cudaStream_t stream) {
  MIXQ_CHECK(a.mode == Int8Mode::Block && a.kb == 128, ErrorCode::Unsupported,
             "sm90_i8_128x128 runs the block mode with K block 128 only (K block ", a.kb, ")");
  MIXQ_CHECK_ARG(a.M >= 1 && a.N >= 1 && a.K >= 1 && a.n_kblocks == (a.K + 127) / 128 &&
                     a.Np >= a.N && a.Np % 128 == 0,
                 "sm90_i8_128x128: bad sizes M ", a.M, ", N ", a.N, ", K ", a.K, ", K blocks ",
                 a.n_kblocks, ", Np ", a.Np);
  MIXQ_CHECK_ARG(a.lda >= a.K && a.lda % 16 == 0 && a.ldb >= a.K && a.ldb % 16 == 0 &&
                     a.ld_meta >= a.M && a.ld_meta % 4 == 0,
                 "sm90_i8_128x128: pitches lda ", a.lda, ", ldb ", a.ldb, ", ld_meta ", a.ld_meta,
                 " must cover K / M and be 16-byte multiples (TMA)");
  MIXQ_CHECK_ARG(a.ldy >= a.N && a.y_type >= 0 && a.y_type <= 2 && a.bias_type >= 0 &&
                     a.bias_type <= 2,
                 "sm90_i8_128x128: bad output (ldy ", a.ldy, ", type ", a.y_type,
                 ") or bias type ", a.bias_type);
  if (a.ow) launch_w8a8<true>(a, stream);
  else launch_w8a8<false>(a, stream);
}

}  // namespace mixq::cuda
