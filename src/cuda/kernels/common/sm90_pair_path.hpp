// How a register-A consumer turns a code and its row's (s, o') pair into the 16-bit A operand
// (kernels/common/sm90_wgmma_dequant.cuh): f32 arithmetic, f16x2 arithmetic on f16 pairs, or the
// bf16 integer-zero path on packed (s, 128 + zc) words. Plain C++: the planner picks one.
#pragma once

namespace mixq::cuda::sm90 {

enum class PairPath { F32, Half, Bf16Zero };

}  // namespace mixq::cuda::sm90
