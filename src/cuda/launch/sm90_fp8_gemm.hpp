// Hopper (sm_90a) FP8 block-scaled GEMM: Y = sum_kb (XQ_kb . WQ_kb^T) * sa[m][kb] * sb[n/128][kb]
// with e4m3 activations quantized per token per 128 along K (layout of act_quant.hpp) and e4m3
// weights with one f32 scale per 128x128 block. Epilogue: + bias[n], clamp, f16/bf16/f32 out.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/dispatch/fp8_plan.hpp"
#include "cuda/kernels/common/quant_out.hpp"
#include "cuda/launch/sm90_skinny_gemm.hpp"

namespace mixq::cuda {

struct Sm90Fp8GemmArgs {
  const uint8_t* a = nullptr;  // [M][lda] e4m3 codes, lda % 16 == 0, zeros past K not needed
  int64_t lda = 0;
  const float* sa = nullptr;   // sa(m, kb) at sa[kb * ld_sa + m], ld_sa % 4 == 0
  int64_t ld_sa = 0;
  const uint8_t* b = nullptr;  // [N][ldb] e4m3 codes, ldb % 16 == 0
  int64_t ldb = 0;
  const float* sb = nullptr;   // sb(nb, kb) at sb[nb * ld_sb + kb], ld_sb % 4 == 0
  int64_t ld_sb = 0;
  int64_t M = 0, N = 0, K = 0;
  void* y = nullptr;           // [M][ldy] in y_type (0 f16, 1 bf16, 2 f32)
  int64_t ldy = 0;
  int y_type = 2;
  const void* bias = nullptr;  // [N] in bias_type, or null
  int bias_type = 2;
  float clamp_lo = -__builtin_huge_valf(), clamp_hi = __builtin_huge_valf();
  int num_sms = 132;           // persistent grid size limit
  int group_n = 0;             // tile raster group along N (0 = kSm90Fp8DefaultGroupN)
  int block_n = 0;             // N tile: 128 or 192 (the plan's: dispatch/fp8_plan.hpp; 0 picks it)
  int cluster = 0;             // CTAs per cluster along M (B multicast): 0 (default), 1 or 2
  int block_m = 0;             // M tile: 0 (the plan's), 128, or 256 (with block_n 128, single CTAs)
  int y_tma = -1;              // TMA-store epilogue for 16-bit outputs: -1 where it can run, 0 off
  bool pdl = true;             // skinny kernel: a programmatic dependent launch (after the quantizer)
  // quant.kind != 0 (block GEMM, 128-wide tiles: block_n 128 or the 128-wide pick): the outputs
  // leave quantized for the next layer (kernels/common/epilogue_quant.cuh); y is not written.
  sm90::QuantOut quant;
};

// True when the device can run the kernel (compute capability 9.0: wgmma, TMA, setmaxnreg).
inline bool sm90_fp8_gemm_supported(int cc_major, int cc_minor) {
  return cc_major == 9 && cc_minor == 0;
}

// Throws mixq::Error (InvalidArgument) on sizes, pitches or types the kernels cannot take.
void check_sm90_fp8_gemm_args(const Sm90Fp8GemmArgs& args);
// Launches on `stream` without synchronising; throws mixq::Error on bad arguments.
void launch_sm90_fp8_block_gemm(const Sm90Fp8GemmArgs& args, cudaStream_t stream);

// Few tokens (decode): the weights as the MMA's wide operand, stream-K over all SMs
// (kernels/sm90_skinny_gemm.cuh, plan in sm90_skinny_gemm.hpp). Token tiles of 16, 32, 64, 128.
// "sm90_fp8_block_skinny_mt16" etc.; the token tile of such a name, 0 for other names.
const char* sm90_fp8_skinny_name(int mt);
int sm90_fp8_skinny_mt_by_name(const std::string& name);
// Launches on `stream` (a programmatic dependent launch where a.pdl): a.M <= plan.mt,
// a.block_n / a.cluster / a.group_n unused; partial (16-byte aligned) and tickets as the plan
// sizes them, tickets zero (every launch leaves them zero).
void launch_sm90_fp8_skinny_gemm(const Sm90Fp8GemmArgs& a, const Sm90SkinnyPlan& plan,
                                 float* partial, unsigned* tickets, cudaStream_t stream);

}  // namespace mixq::cuda
