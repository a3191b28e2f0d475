// The native GGUF kernels: one table per kernel set (scalar, avx2, avx2vnni, avx512), picked at
// prepare.
// They read the lane-per-row records of native_format.hpp in place: one 32-bit lane per output
// row of a 16-row panel, so 4 codes x 16 rows are one vpdpbusd operand (AVX2: two ymm through
// vpmaddubsw + vpmaddwd), exactly like the canonical backend's int8-dot tile.
//
// Integer path (q8 activations, the llama.cpp vec_dot arithmetic): activations are quantized
// per 32 along K, symmetric (dx = amax / 127, qx = round(x / dx), as ggml's q8_0). Per weight
// sub-block j (16 or 32 elements) and activation row m:
//   i[m][r]  = corr[m][j] + sum_k u[r][k] * qx[m][k]        (int32; corr = -bias * sum qx, so
//                                                            i = sum (u - bias) * qx exactly)
//   y[m][r] += d[r] * sc[r][j] * dx[m][j] * i[m][r]  +  o[r][j] * xs[m][j]
// with the integer sub-block scale applied once per sub-block in f32, the f16 block scale once
// per block, and the mins (o) times the f32 sum xs of the unquantized activations. The only
// rounding beyond f32 accumulation is the activations' (documented tolerance).
//
// Exact path: a panel chunk is decoded with SIMD into f32 [k][16] in L1,
// w = s * float(u - bias) + o, unfused (ggml's decode bit for bit), and handed to the canonical
// backend's 12 x 32 GEMM tile (every M: for one row it is a GEMV over the L1-resident chunk).
#pragma once

#include <cstdint>
#include <string>

#include "cpu/ggml/native_weight.hpp"

namespace mixq::cpu::ggml {

// The weight stream's L2 software prefetch (M <= 4) for the super-block types: the record
// `ahead` bytes further on is requested a slice per 32-k span, [begin, end) of its 64-byte lines
// for span s of `spans`, so that lines are asked for at the pace they are consumed. Issued in one
// burst when a record starts (45-52 lines for Q5_K / Q6_K), they were worth less: on a 2-core AMD
// EPYC, one thread, M = 1, the same binary switching between the two, medians of 8 alternating
// rounds: 1.11-1.22x faster spread for Q4_K / Q5_K / Q6_K (1.03-1.06x IQ4_XS) on the avx2 set,
// 1.05-1.24x for Q5_K / Q6_K / IQ4_XS on the avx512 set (without any software prefetch Q6_K
// read 6.6 GB/s: the hardware prefetchers do not follow a record's planes). Records of one span
// (the 32-element block types) keep the burst.
struct PrefetchSlice {
  int64_t begin, end;
};
static inline PrefetchSlice prefetch_slice(int64_t record_bytes, int s, int spans) {
  const int64_t lines = (record_bytes + 63) / 64;
  return {64 * (lines * s / spans), 64 * (lines * (s + 1) / spans)};
}

// Integer tile: activation rows [0, rows) of the staged call against panel `panel`, blocks
// [kb0, kb1). Staged arrays are indexed by the global K coordinate (q) and the global sub-block
// index j = k / fmt.sub (dxs, corr, xs), in one of two forms:
//   row-major (i8_tile)          q [row][K], dxs / corr / xs [row][nj]; ldq = K, ldj = nj.
//   packed (i8_tile_decoded)     rows in groups of kPackRows: q [group][K / 4][kPackRows][4],
//                                dxs / corr / xs [group][nj][kPackRows]; ldq / ldj are a
//                                group's strides, and the tile's row 0 starts a group. A
//                                register tile then reads every row's 4 codes (or scale) at a
//                                fixed offset from one pointer: an embedded {1to16} broadcast
//                                operand, no pointer per row.
constexpr int kPackRows = 8;
struct I8TileArgs {
  const NativeWeight* w;
  int64_t panel;
  int64_t kb0, kb1;
  const int8_t* q;        // row 0 of the tile, k = 0
  int64_t ldq;
  const float* dxs;       // [rows][ldj] dx of the 32 that holds sub-block j
  const int32_t* corr;    // [rows][ldj] (avx512 set: plus kSumMagicBits, below)
  const float* xs;        // [rows][ldj] (types with mins)
  int64_t ldj;
  int rows;               // any count; the kernels tile it
  float* c;               // c + m * ldc: the panel's 16 outputs of row m
  int64_t ldc;
  bool accumulate;        // add to c (else overwrite)
  bool prefetch_l1;       // software prefetch of the records into L1 too (Tuning::cpu_l1_prefetch)
};

// Prefill form of one panel's K chunk (blocks [kb0, kb1) of I8TileArgs), decoded once and then
// read by every register tile of the task's activation rows: the codes as biased u8 in the
// records' dword layout ([k / 4][16 rows][4 k], 64 bytes per 4 k: a vpdpbusd operand per load),
// the f32 scale of each sub-block s[j][16] (block scale times integer sub-block scale) and, for
// types with mins, o[j][16] signed so that y += o * xs. j is local to the chunk.
struct DecodedChunk {
  const uint8_t* codes;
  const float* s;
  const float* o;  // nullptr: no min term
};

// A register tile's view of packed activation group g (rows r0.. of it) for the chunk
// [kb0, kb1) of I8TileArgs, whose sub-blocks hold SUB k each: where its codes, per-sub-block
// arrays and outputs start, and how many sub-blocks the chunk has. (static: each kernel file,
// compiled with its own ISA flags, keeps its own copy; an out-of-line copy shared by the linker
// could be the AVX-512 file's.)
struct PackedGroup {
  int64_t nsub;
  const int8_t* q;
  const float* dxs;
  const int32_t* corr;
  const float* xs;
  float* c;
};
template <int SUB>
static inline PackedGroup packed_group(const I8TileArgs& a, int64_t g, int r0 = 0) {
  const int64_t per_block = a.w->fmt.qk / SUB;
  const int64_t j0 = a.kb0 * per_block, k0 = a.kb0 * a.w->fmt.qk;
  const int64_t lane = g * a.ldj + j0 * kPackRows + r0;
  return {(a.kb1 - a.kb0) * per_block,
          a.q + g * a.ldq + k0 * kPackRows + r0 * 4,
          a.dxs + lane,
          a.corr + lane,
          a.xs + lane,
          a.c + (g * kPackRows + r0) * a.ldc};
}

// The avx512 set turns a sub-block's int32 sum into f32 without vcvtdq2ps (port 0 only, where
// the 512-bit vpdpbusd also issues): its quantize_row adds these bits (1.5 * 2^23 as f32) to corr,
// so the finished accumulator's bits read as the float 1.5 * 2^23 + sum, exact while
// |sum| < 2^22 (a sub-block sums at most 32 x 128 x 127 < 2^19), and one vsubps (ports 0 or 5)
// of 1.5 * 2^23 recovers the sum.
constexpr int32_t kSumMagicBits = 0x4B400000;

struct NativeKernels {
  const char* isa;  // "scalar", "avx2", "avx2vnni", "avx512"
  void (*i8_tile)(const I8TileArgs& a);
  // Prefill path (nullptr in sets without it): decode a chunk into the DecodedChunk buffers
  // (codes: 16 * (kb1 - kb0) * qk bytes, s and o: 16 * sub-blocks floats each), and the
  // integer tile over it (a.kb0 / a.kb1 name the chunk's blocks).
  void (*decode_i8)(const NativeWeight& w, int64_t p, int64_t kb0, int64_t kb1, uint8_t* codes,
                    float* s, float* o);
  // `panels` (1 or 2) chunks: panels a.panel, a.panel + 1, outputs side by side in a.c.
  void (*i8_tile_decoded)(const I8TileArgs& a, const DecodedChunk* d, int panels);
  // Blocks [kb0, kb0 + nb) of panel p dequantized to f32 [k][16] (rows past the tensor: 0).
  void (*decode_f32_t)(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out);
  // One activation row (K a multiple of 32): codes q[K] and per sub-block of `sub` elements
  // dxs, corr = -bias * sum q, xs = f32 sum of x.
  void (*quantize_row)(const float* x, int64_t K, int sub, int bias, int8_t* q, float* dxs,
                       int32_t* corr, float* xs);
};

const NativeKernels& native_scalar_kernels();
const NativeKernels* native_avx2_kernels();
const NativeKernels* native_avx2vnni_kernels();
const NativeKernels* native_avx512_kernels();

// `isa` ("avx512", "avx2vnni", "avx2", "scalar") where this CPU runs it; empty: the canonical
// backend's choice (MIXQ_CPU_ISA, else the best).
const NativeKernels& select_native_kernels(const std::string& isa);

}  // namespace mixq::cpu::ggml
