// Host entry point of the Hopper FP8 block-scaled GEMM: argument checks, then the planned tile
// configuration (sm90_fp8_gemm_launch.cuh, one file per tile width).
#include "cuda/launch/sm90_fp8_gemm.hpp"

#include <algorithm>

#include "cuda/runtime/check.hpp"
#include "cuda/launch/sm90_fp8_gemm_configs.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

void check_sm90_fp8_gemm_args(const Sm90Fp8GemmArgs& a) {
  MIXQ_CHECK_ARG(a.M >= 1 && a.N >= 1 && a.K >= 1 && a.M < (int64_t(1) << 31) &&
                     a.N < (int64_t(1) << 31) && a.K < (int64_t(1) << 31),
                 "sm90 fp8 gemm: M, N, K (", a.M, ", ", a.N, ", ", a.K, ") must be in [1, 2^31)");
  MIXQ_CHECK_ARG(a.lda >= a.K && a.lda % 16 == 0 && a.ldb >= a.K && a.ldb % 16 == 0,
                 "sm90 fp8 gemm: code pitches lda ", a.lda, ", ldb ", a.ldb,
                 " must be >= K (", a.K, ") and multiples of 16 bytes (TMA)");
  MIXQ_CHECK_ARG(a.ld_sa >= a.M && a.ld_sa % 4 == 0 && a.ld_sb >= (a.K + 127) / 128 &&
                     a.ld_sb % 4 == 0,
                 "sm90 fp8 gemm: scale pitches ld_sa ", a.ld_sa, ", ld_sb ", a.ld_sb,
                 " must cover M / the K blocks and be multiples of 4");
  MIXQ_CHECK_ARG((a.quant.kind != 0 || a.ldy >= a.N) && a.y_type >= 0 && a.y_type <= 2 &&
                     a.bias_type >= 0 && a.bias_type <= 2,
                 "sm90 fp8 gemm: bad output (ldy ", a.ldy, ", type ", a.y_type, ") or bias type ",
                 a.bias_type);
  sm90::check_quant_out(a.quant, a.M, a.N, "sm90 fp8 gemm");
}

void launch_sm90_fp8_block_gemm(const Sm90Fp8GemmArgs& a, cudaStream_t stream) {
  check_sm90_fp8_gemm_args(a);
  const Sm90Fp8Tile t = sm90_fp8_gemm_tile(a.M, a.N, a.num_sms, {a.block_n, a.cluster, a.block_m},
                                           a.quant.kind != 0);
  MIXQ_CHECK_ARG(a.quant.kind == 0 || t.block_n == 128,
                 "sm90 fp8 gemm: quantized outputs need 128-wide tiles, got block_n ", t.block_n);
  const bool pair = t.cluster == 2;
  // Stages: as many as fit in 227 KB of shared memory.
  if (t.block_m == 256) {
    if (pair) launch_fp8<128, 4, 2, 0, 2>(a, stream);
    else launch_fp8<128, 4, 1, 0, 2>(a, stream);
  } else if (t.block_n == 192) {
    if (pair) launch_fp8<192, 5, 2, 1>(a, stream);
    else launch_fp8<192, 5, 1, 1>(a, stream);
  } else {
    if (pair) launch_fp8<128, 6, 2, 2>(a, stream);
    else launch_fp8<128, 6, 1, 2>(a, stream);
  }
}

}  // namespace mixq::cuda
