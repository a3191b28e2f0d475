// The repacked weight layout shared by the weight-only CUDA kernels (host and device).
//
// W[N][K] is padded to Np = round_up(N, 16) rows and Kp = round_up(K, 64) columns (padding codes
// are 0 and padding activations are 0, so padding contributes nothing). It is cut into tiles of
// 16 rows x 64 columns ("chunks"); tile (nt, kc) occupies 32 lanes x 16 bytes (int4) or
// 32 lanes x 32 bytes (int8), stored contiguously and ordered row-tile major:
//   byte offset of (nt, kc, lane) = ((nt * (Kp/64) + kc) * 32 + lane) * kChunkBytesPerLane
// so one warp streams a 16x64 tile with one (int4) or two (int8) fully coalesced 16-byte loads per
// lane, and every byte lands in the register of the lane whose MMA fragment needs it (order inside
// the words: see kernels/dequant_codes.cuh).
//
// Scales and offsets: one (s, o') pair per (row, group), float2 or half2, rows padded to Np:
//   w = s * u + o'   with u = q - code_min the unsigned code (I4: q + 8, I8: q + 128) and
//   o' = o + code_min * s (offset form), s * (code_min - z) (zero-point form), code_min * s
//   (symmetric).
// FP8 (e4m3) weights use the 8-bit layout with the e4m3 bytes stored as they are, and pairs
// (s, 0) with s the scale of the row's 128x128 block (so u is the e4m3 value, w = s * u).
#pragma once

#include <cstdint>

namespace mixq::cuda {

constexpr int kTileRows = 16;
constexpr int kChunkK = 64;

// Code kinds (the streaming kernel's template parameter): unsigned 4- or 8-bit integers, or e4m3
// bytes (8-bit storage).
constexpr int kCodesU4 = 4;
constexpr int kCodesU8 = 8;
constexpr int kCodesE4M3 = 83;
// W4A8: unsigned 4-bit codes laid in the e4m3 MMA's fragment order (repack: u4f8_slot_coords),
// multiplied with e4m3 activations (FP8 tensor cores; the wgmma kernel only).
constexpr int kCodesU4F8 = 48;

inline int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

#if defined(__CUDACC__)
#define MIXQ_HOST_DEVICE __host__ __device__
#else
#define MIXQ_HOST_DEVICE
#endif

// 16-row tiles of W per warp in the streaming kernel for a token tile of mt and 4- or 8-bit
// codes (host and device). Decode (mt = 8) with 4-bit codes takes four: the per-chunk bookkeeping
// (ring addresses, waits, activation fragments, the fold test) is then shared by 16 MMAs instead
// of 8 (M = 1 on 14336x21504, H100: 98.6 -> 77.5 us together with the cheaper conversion). 8-bit
// codes keep two: their chunk is twice the bytes already, and four spill at 128 registers; so do
// f32 activations (split_x: two MMAs per tile on hi/lo halves).
constexpr int kStreamRt4MaxMt = 8;
MIXQ_HOST_DEVICE constexpr int wo_row_tiles(int mt, int bits, bool split_x) {
  return mt <= kStreamRt4MaxMt && bits == 4 && !split_x ? 4 : mt <= 32 ? 2 : 1;
}

// Weight chunks per warp in the streaming kernel's register ring (4- or 8-bit codes, rt row
// tiles per warp): while one chunk is multiplied the other kDepth - 1 are in flight. Two already
// keep ~16 resident warps x 2 KB = 32 KB per SM in flight, about twice what HBM3's bandwidth x
// latency asks for; each further chunk costs rt * 4 (int4) or rt * 8 (int8) registers.
MIXQ_HOST_DEVICE constexpr int wo_stream_depth(int bits, int rt) { return (void)bits, (void)rt, 2; }

// Blocks per SM the streaming kernel for token tile mt is compiled for (launch bounds; 1: no
// constraint). The host planner sizes shared memory and the K split for that residency.
MIXQ_HOST_DEVICE constexpr int wo_stream_min_blocks(int mt, int bits) {
  return mt <= 8 ? (bits == 4 ? 4 : 5) : mt <= 16 ? 3 : 1;
}

// The streaming kernel folds its biased MMA sums (they grow with the bias times sum(x)) into the
// f32 accumulators once per run: a group, or a 2^kStreamMaxRunShift-long piece of a longer group.
// The activation sums of the offset term are kept per run (the host sizes them).
constexpr int kStreamMaxRunShift = 8;

// Largest thread-block cluster the streaming kernel's split-K reduction uses (the splits of one
// output tile form a cluster; 16 is H100's non-portable maximum).
constexpr int kStreamMaxClusterSplits = 16;

// Blocks per SM the host planner assumes for token tile mt (the K split is sized so that every
// block is resident at once): the launch bounds where they constrain, else what the registers
// allow (mt = 32 and 64 use ~190-240 registers: 2 blocks of 128 threads).
MIXQ_HOST_DEVICE constexpr int wo_stream_resident_blocks(int mt, int bits) {
  return mt <= 16 ? wo_stream_min_blocks(mt, bits) : 2;
}

// The grouped (mixture-of-experts) form of the streaming kernel (kernels/moe/): the same, except 4
// blocks an SM for 8-bit codes at the 8-token tile, where the tile list and expert tables left 5
// (102 registers) spilling 24-48 bytes.
MIXQ_HOST_DEVICE constexpr int moe_stream_min_blocks(int mt, int bits) {
  return mt <= 8 && bits != 4 ? 4 : wo_stream_min_blocks(mt, bits);
}
MIXQ_HOST_DEVICE constexpr int moe_stream_resident_blocks(int mt, int bits) {
  return mt <= 16 ? moe_stream_min_blocks(mt, bits) : 2;
}

struct WoLayout {
  int64_t N = 0, K = 0, Np = 0, Kp = 0;
  int bits = 4;          // 4 or 8
  int64_t group = 0;     // K-run per scale (>= Kp means a single group per row)
  int64_t groups = 0;    // groups per row = ceil(K / group)
  bool pair_f32 = false; // scale pairs stored as float2 (else half2)
  bool e4m3 = false;     // bits == 8 and the bytes are e4m3 values, not unsigned integers
  bool fp8_act = false;  // bits == 4, W4A8: codes in the e4m3 fragment order (kCodesU4F8)
  // W4A8: the integer zero point zc that every group with a nonzero scale shares (0 for unsigned
  // codes without zero points, 8 for symmetric signed ones, or a zero-point weight whose points
  // are all equal), -1 where they differ (docs/decisions/w4a8.md, "A shared zero point")
  int a8_zero = -1;

  int code_kind() const { return e4m3 ? kCodesE4M3 : fp8_act ? kCodesU4F8 : bits; }

  int64_t chunk_bytes_per_lane() const { return bits == 4 ? 16 : 32; }
  int64_t chunks_per_row_tile() const { return Kp / kChunkK; }
  int64_t packed_bytes() const { return (Np / kTileRows) * chunks_per_row_tile() * 32 * chunk_bytes_per_lane(); }
  int64_t pair_bytes() const { return Np * groups * (pair_f32 ? 8 : 4); }
  // the streaming kernel's copy of the pairs (stream_pair_index), rows padded to a multiple of 64
  int64_t stream_pair_bytes() const { return round_up(Np, 64) * groups * (pair_f32 ? 8 : 4); }
};

// The streaming kernel's copy of the (s, o') pairs, in lane order: at a group fold each lane of a
// warp needs the pairs of rows r and r + 8 (r = lane / 4) of each of its RT row tiles, and here
// those are contiguous. Row tiles are taken four at a time (a quad: 64 rows); quad q and group g
// own a block of 64 pairs in which lane quad lq (0-7) has 8 consecutive pairs, rows lq and lq + 8
// of the quad's tiles 0-3:
//   index of (row n, group g) = ((q * groups + g) * 8 + lq) * 8 + rt * 2 + h
//   with q = n / 64, rt = (n / 16) % 4, lq = n % 8, h = (n % 16) / 8.
// A warp's RT tiles start at a multiple of RT (4, 2 or 1), so a lane reads its 2 * RT pairs with
// one or two 16-byte loads (8 bytes for RT = 1 with half2 pairs), and a warp's fold reads one
// 256-byte block (half2) instead of touching 16 * RT rows' separate sectors: the row-major pairs
// cost an L1 wavefront per row and were 18% of the decode time on 14336x21504 W4
// (docs/decisions/wo-repack-and-pairs.md). Rows past Np are zero.
MIXQ_HOST_DEVICE constexpr int64_t stream_pair_index(int64_t n, int64_t g, int64_t groups) {
  return (((n / 64) * groups + g) * 8 + n % 8) * 8 + ((n / 16) % 4) * 2 + (n % 16) / 8;
}

}  // namespace mixq::cuda
