// What every grouped (mixture-of-experts) form of the Hopper block GEMM takes besides its
// activations and weights (launch/sm90_fp8_grouped.hpp, launch/sm90_w8a8_grouped.hpp): the call's
// rows, the output and epilogue, the device-side tile list and the experts' descriptors.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/kernels/moe/moe_params.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

struct BlockGroupedCall {
  int64_t rows = 0, N = 0, K = 0;
  void* y = nullptr;            // [rows][ldy] in y_type (0 f16, 1 bf16, 2 f32)
  int64_t ldy = 0;
  int y_type = 2;
  const void* bias = nullptr;   // [N] or per expert [E][bias_stride] in bias_type, or null
  int bias_type = 2;
  int64_t bias_stride = 0;
  float clamp_lo = -__builtin_huge_valf(), clamp_hi = __builtin_huge_valf();
  const int* n_tiles = nullptr;  // the schedule kernel's list (tiles of the kernel's token tile)
  const MoeTile* tiles = nullptr;
  // ... or, for the few-token form's in-kernel schedule (no list), the routing itself: offsets
  // (contiguous, [E + 1]) or counts (masked, [E], max_tokens), and the caller's error word
  const int32_t* offsets = nullptr;
  const int32_t* counts = nullptr;
  int64_t E = 0, max_tokens = 0;
  int32_t* error = nullptr;
  int64_t max_tiles = 0;         // the list's bound for any routing (the grid's size)
  const CUtensorMap* maps = nullptr;  // [E][descriptors per expert], device memory, 64-byte aligned
  int num_sms = 132;
  int y_tma = -1;               // TMA-store epilogue for 16-bit outputs: -1 where it can run, 0 off
  // a dependent launch of the previous kernel: the block GEMM's is the schedule kernel; the
  // few-token form's is the quantizer (the routing, or the schedule kernel's list, is complete
  // before it starts: the GEMM reads it at once)
  bool pdl = true;
  // the block GEMM's unit order: an expert's token tiles innermost (dispatch/moe_plan.hpp,
  // moe_expert_major), else N tiles innermost
  bool expert_major = false;
};

// The few-token kernel's grouped form (kernels/w8a8/sm90_skinny_grouped.cuh) for decode shares:
// its token tile (the schedule's tile_m: 16, 32 or 64), the K ranges a unit is cut into, and where
// the cut units' pieces meet (splits > 1): a partial slot of 128 x mt floats per piece (16-byte
// aligned) and a ticket per unit, zero before the launch.
struct SkinnyGroupedWork {
  int mt = 16;
  int splits = 1;
  float* partial = nullptr;
  unsigned* tickets = nullptr;
  int64_t n_clear = 0;  // tickets the quantizer launched before the GEMM zeroes (ActQuantClear)
};

// The checks every grouped launcher makes of its call (name: the kernel, in the message); throws
// mixq::Error. max_n_k: the kernel's bound on N and K; routing_ok: the kernel can list the tiles
// itself from the routing (the few-token form).
inline void check_block_grouped_call(const BlockGroupedCall& c, int64_t max_n_k, const char* name,
                                     bool routing_ok = false) {
  MIXQ_CHECK_ARG(c.rows >= 1 && c.rows < (int64_t(1) << 31) && c.N >= 1 && c.N < max_n_k &&
                     c.K >= 1 && c.K < max_n_k,
                 name, ": rows (", c.rows, ") must be in [1, 2^31), N (", c.N, ") and K (", c.K,
                 ") in [1, ", max_n_k, ")");
  MIXQ_CHECK_ARG(c.ldy >= c.N && c.y_type >= 0 && c.y_type <= 2 && c.bias_type >= 0 && c.bias_type <= 2,
                 name, ": bad output (ldy ", c.ldy, ", type ", c.y_type, ") or bias type ", c.bias_type);
  MIXQ_CHECK(((c.n_tiles && c.tiles) || (routing_ok && (c.offsets || c.counts))) && c.maps,
             ErrorCode::Internal, name, ": no tile list, routing or expert descriptors");
}

inline void check_skinny_grouped_work(const SkinnyGroupedWork& w, int64_t num_kb, const char* name) {
  MIXQ_CHECK_ARG((w.mt == 16 || w.mt == 32 || w.mt == 64) && w.splits >= 1 && w.splits <= num_kb,
                 name, ": token tile ", w.mt, " (16, 32 or 64) or splits ", w.splits, " (1 .. ",
                 num_kb, " K stages)");
  MIXQ_CHECK_ARG(w.splits == 1 || (w.partial != nullptr && w.tickets != nullptr &&
                                   reinterpret_cast<uintptr_t>(w.partial) % 16 == 0),
                 name, ": ", w.splits, " splits need 16-byte aligned partial slots (",
                 static_cast<void*>(w.partial), ") and tickets");
}

}  // namespace mixq::cuda
