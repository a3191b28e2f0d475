// The CUDA form of a GGUF block tensor at its native width (built once at prepare by
// src/cuda/backend/ggml_native.cpp, read by the kernels of this folder). Host and device code.
//
// The file's blocks are split into four planes, each [N rows][row pitch], so that every lane of
// a warp reads its 32-element chunk of a row with one aligned vector load per plane and a warp's
// loads of a plane are contiguous (512 bytes for 4-bit codes):
//
//   lo   the low LB bits of each code, per 32-element chunk:
//          LB = 4: 16 bytes, byte t = code t (low nibble) | code t + 16 (high nibble)
//          LB = 8: 32 bytes, the signed codes (Q8_0)
//          LB = 2: 8 bytes, bits 2p..2p+1 of byte t = code t + 8p
//   hi   the high bits, per chunk: HB = 1: 4 bytes, bit 8i + j = top bit of code 4j + i;
//        HB = 2: 8 bytes, bits 8i + 2(j % 4) of word j / 4 = top two bits of code 4j + i
//   d    the block's f16 scale (2 bytes) or f16 (scale, min) pair (4 bytes)
//   sc   the super-block's integer sub-block scales (K-quants, IQ4_XS), per block:
//          K4      u8 sc[8], u8 mn[8]              (Q4_K, Q5_K)
//          Q2K     ggml's packed byte per 16        (Q2_K: scale low 4 bits, min high 4)
//          S16     s8 per 16                        (Q6_K: the file's; Q3_K: the 6-bit scale - 32)
//          S32     s8 per 32: ls - 32               (IQ4_XS)
//
// Every plane's row pitch is padded to a multiple of 16 bytes (at most 15 bytes a row), so that
// the tensor-core kernel's 16-byte asynchronous copies of a row's run of chunks are aligned.
//
// With those, a lane turns its chunk into eight 32-bit words of four signed bytes each (word j =
// codes 4j .. 4j + 3, in element order: the operand of one dp4a against the same four activation
// bytes) with a shift and a mask per word, and a third of a shift-mask-or for the high plane. The
// element's value is ggml's own arithmetic, unfused, in f32:  w = s * float(u - bias) + o  with
// s and o of its sub-block (docs/decisions/cuda-ggml-native.md lists them per type).
//
// Bytes per 256 weights against the file: equal for every type except the super-block scales
// the kernel would otherwise unpack from 6 bits: Q4_K 148 / 144 (+2.8 %), Q5_K 180 / 176
// (+2.3 %), Q3_K 114 / 110 (+3.6 %), IQ4_XS 138 / 136 (+1.5 %).
#pragma once

#include <cstdint>

namespace mixq::cuda::ggml {

enum class GType : int { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS };
constexpr int kGTypes = 12;

enum class GScale : int { Single, Affine, K4, Q2K, S16, S32 };

struct GFormat {
  int qk;     // elements per block
  int lb, hb; // low / high code bits
  int bias;   // value = u - bias (0 where the plane holds the signed value or a codebook index)
  GScale sk;
  bool iq4;   // the 4-bit code is an index into ggml's IQ4 codebook
  __host__ __device__ constexpr int d_bytes() const {
    return (sk == GScale::Affine || sk == GScale::K4 || sk == GScale::Q2K) ? 4 : 2;
  }
  __host__ __device__ constexpr int sc_bytes() const {
    return sk == GScale::K4 || sk == GScale::Q2K || sk == GScale::S16 ? 16 : sk == GScale::S32 ? 8 : 0;
  }
  __host__ __device__ constexpr bool has_min() const {
    return sk == GScale::Affine || sk == GScale::K4 || sk == GScale::Q2K;
  }
  // two scales per 32-element chunk (sub-blocks of 16)
  __host__ __device__ constexpr bool halves() const { return sk == GScale::Q2K || sk == GScale::S16; }
  __host__ __device__ constexpr int lo_chunk() const { return 4 * lb; }  // bytes per 32 elements
  __host__ __device__ constexpr int hi_chunk() const { return 4 * hb; }
};

__host__ __device__ constexpr GFormat gformat(GType t) {
  switch (t) {
    case GType::Q4_0: return {32, 4, 0, 8, GScale::Single, false};
    case GType::Q4_1: return {32, 4, 0, 0, GScale::Affine, false};
    case GType::Q5_0: return {32, 4, 1, 16, GScale::Single, false};
    case GType::Q5_1: return {32, 4, 1, 0, GScale::Affine, false};
    case GType::Q8_0: return {32, 8, 0, 0, GScale::Single, false};
    case GType::IQ4_NL: return {32, 4, 0, 0, GScale::Single, true};
    case GType::Q2_K: return {256, 2, 0, 0, GScale::Q2K, false};
    case GType::Q3_K: return {256, 2, 1, 4, GScale::S16, false};
    case GType::Q4_K: return {256, 4, 0, 0, GScale::K4, false};
    case GType::Q5_K: return {256, 4, 1, 0, GScale::K4, false};
    case GType::Q6_K: return {256, 4, 2, 32, GScale::S16, false};
    case GType::IQ4_XS: return {256, 4, 0, 0, GScale::S32, true};
  }
  return {32, 4, 0, 0, GScale::Single, false};
}

// ggml's IQ4 codebook (kvalues_iq4nl).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// The tensor-core kernel copies a 64-row tile's planes to shared memory a step of chunks at a
// time: 8 chunks (256 columns, one super-block), or 16 for the super-block types whose f16 scale
// is 2 bytes (Q3_K, Q6_K, IQ4_XS), so that a step's scale field is one aligned 4-byte copy.
__host__ __device__ constexpr int mma_step_chunks(GType t) {
  return gformat(t).qk == 256 && gformat(t).d_bytes() == 2 ? 16 : 8;
}

// Where the planes of a prepared tensor are (device pointers) and their row pitches in bytes.
struct GPlanes {
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  const uint8_t* d = nullptr;
  const uint8_t* sc = nullptr;
  int64_t lo_pitch = 0, hi_pitch = 0, d_pitch = 0, sc_pitch = 0;
};

// The q8 activations of the integer path, row-major by token: q [M][K] int8 codes (round(x / d)
// with d = amax / 127 per 32 columns), and meta [M][K / 32] float4 {d, sum of x over columns
// 0..15, over 16..31, the two 16-column sums of the codes as int16 halves of one 32-bit word}.
// Within each 32-byte chunk the eight 4-byte code words (word j = codes 4j .. 4j + 3) are stored
// in the order 0 4 1 5 2 6 3 7: the tensor-core B fragment of lane (g, t), words t and t + 4 of
// token g, is then one 8-byte shared-memory load, and the GEMV reads the chunk as two 16-byte
// vectors either way.
struct GQ8 {
  int8_t* q = nullptr;
  float4* meta = nullptr;
};
// the tensor-core kernel's n8 token groups
__host__ __device__ constexpr int64_t q8_groups(int64_t M) { return (M + 7) / 8; }
// The dequantizing tensor-core kernel's token tile (TN tokens, n8 groups) for M tokens: 16, 32,
// else 64 (ggml_hmma.cuh; the backend asks whether the device holds that tile's shared memory).
__host__ __device__ constexpr int hmma_token_tile(int64_t M) { return M <= 16 ? 16 : M <= 32 ? 32 : 64; }

// The few-token kernel's CTAs an SM (ggml_stream.cuh: its __launch_bounds__, and the slots its K
// split fills): 4 (16 warps, up to 128 registers) with the deepest ring, or 6 (24 warps, up to 80
// registers) with a ring of two groups, more warps to hide the decode's dependency chains.
// Measured on an H200 against 4 CTAs (forced, 1, 4 and 8 tokens, the four layer shapes of
// 4096 x 4096 to 14336 x 4096): 6 CTAs ran Q4_0 1.00-1.12x as fast (4096 x 6144 at 8 tokens
// 13.1 -> 11.7 us), Q4_K / IQ4_XS 0.89-0.99x, Q8_0 0.70-0.95x, Q6_K 0.66-0.84x; 5 CTAs
// 0.85-1.03x, no type gaining.
__host__ __device__ constexpr int stream_ctas_per_sm(GType t) { return t == GType::Q4_0 ? 6 : 4; }

// One product Y[M][N] = X Wᵀ (+ bias, clamp) on the integer path.
struct GemvParams {
  GPlanes w;
  int64_t N = 0, K = 0;
  int M = 0;
  const int8_t* xq = nullptr;     // GQ8::q
  const float4* xmeta = nullptr;  // GQ8::meta
  void* y = nullptr;
  int64_t ldy = 0;
  int y_type = 0;  // 0 f16, 1 bf16, 2 f32
  const void* bias = nullptr;
  int bias_type = 2;
  float clamp_lo = 0, clamp_hi = 0;
  bool pdl = false;  // launched dependent on the quantizer (programmatic stream serialization)
  int8_t pairs = -1;  // one token, the launcher's choice: -1 by the waves, 0 a row a warp, 1 two
};

// The tensor-core kernel's call: the product, its K split (splits of split_chunks chunks each) and,
// with more than one split, the f32 partials [splits][M][N] the finalize pass sums.
struct MmaParams : GemvParams {
  int splits = 1;
  int64_t split_chunks = 0;
  float* partial = nullptr;
};

// The dequantizing tensor-core kernel's call (ggml_hmma.cuh): X itself, f16 or bf16 (x_type 0 / 1
// of the launcher), rows 16-byte aligned; split_chunks a multiple of 8.
struct HmmaParams : MmaParams {
  const void* x = nullptr;
  int64_t ldx = 0;  // elements, a multiple of 8
  // f16 X: the weights are formed as 2^e (s q + o) in f16 (wscale = 2^e, chosen at prepare from a
  // bound on |w| so that no weight overflows and small scales stay normal) and the sums scaled
  // back (unscale = 2^-e, exact); 1 for bf16, whose range is f32's
  float wscale = 1.f, unscale = 1.f;
};

}  // namespace mixq::cuda::ggml
