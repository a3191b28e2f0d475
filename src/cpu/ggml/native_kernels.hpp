// The native GGUF kernels: one table per ISA level (scalar, avx2, avx512), picked at prepare.
//
// A call works panel chunk by panel chunk: the blocks of one 16-row panel over a K range are
// decoded once (block_decode.hpp) into L1-resident scratch, then every activation row of the
// task is multiplied against them, so the decode is paid once per call whatever M is.
//
// Integer path (q8 activations, the llama.cpp vec_dot recipe): activations are quantized per
// 32 along K, symmetric (dx = amax / 127, qx = round(x / dx), as ggml's q8_0), and
//   y[m][r] += sum_lane s16[r][lane / 4] * dx[m][lane] * (binit[m][lane] + sum_4 u[r][k] * qx[m][k])
//            + sum_16 o16[r][j] * xs16[m][j]
// where a lane is 4 consecutive k, s16 the weight scale of 16 elements,
// binit = -bias * sum_4 qx (so the integer sum is exactly sum (u - bias) * qx), and xs16 the f32
// sum of x over 16 elements (the mins meet the unquantized activations). The only rounding
// beyond f32 accumulation is the activations' (documented tolerance, docs/cpu-backend.md).
//
// Exact path: w = s16 * float(u - bias) + o16 in f32 (ggml's decode, bit for bit), then f32 FMA
// with the activations (GEMV form for few rows; for many rows the chunk is transposed to
// [k][16] and handed to the canonical backend's register-blocked GEMM tile).
#pragma once

#include <cstdint>
#include <string>

#include "cpu/ggml/native_weight.hpp"

namespace mixq::cpu::ggml {

constexpr int64_t kPad = 64;  // decoded / staged K ranges are padded to this many elements

struct I8DotArgs {
  const uint8_t* u;       // decoded codes [wrows][ldu]
  const float* s16;       // [wrows][ldu / 16] weight scale per 16 codes
  const float* o16;       // [wrows][ldu / 16] (read only when has_min)
  int64_t ldu;
  int wrows;              // weight rows (<= 16)
  const int8_t* q;        // activation codes [mrows][ldq] (this chunk's column 0)
  const float* dxl;       // [mrows][ldq / 4] activation scale per lane
  const int32_t* binit;   // [mrows][ldq / 4]
  const float* xs16;      // [mrows][ldq / 16 + 16] (read only when has_min)
  int64_t ldq;
  int mrows;
  int64_t kc;             // elements of the chunk, a multiple of kPad
  bool has_min;
  int bias;
  float* c;               // c[m * ldc + r] += result
  int64_t ldc;
};

struct F32DotArgs {
  const float* w;  // [wrows][ldw] dequantized weights
  int64_t ldw;
  int wrows;
  const float* x;  // [mrows][ldx] activations (this chunk's column 0)
  int64_t ldx;
  int mrows;
  int64_t kc;      // a multiple of kPad
  float* c;        // c[m * ldc + r] += result
  int64_t ldc;
};

struct NativeKernels {
  const char* isa;  // "scalar", "avx2", "avx512"
  // Blocks [kb0, kb0 + nb) of every row of panel p into the integer form (zero past nb * qk up
  // to ldu, which is a multiple of kPad).
  void (*decode_i8)(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, uint8_t* u,
                    float* s16, float* o16, int64_t ldu);
  // The same blocks dequantized to f32, [row][ldw] (zero past nb * qk), or transposed to
  // [k][16] (rows past the panel's zero) for the GEMM tile.
  void (*decode_f32)(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out,
                     int64_t ldw);
  void (*decode_f32_t)(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out);
  void (*dot_i8)(const I8DotArgs& a);
  void (*dot_f32)(const F32DotArgs& a);
};

const NativeKernels& native_scalar_kernels();
const NativeKernels* native_avx2_kernels();    // nullptr when not compiled in
const NativeKernels* native_avx512_kernels();  // nullptr when not compiled in

// `isa` ("avx512", "avx2", "scalar") where this CPU runs it; empty: the canonical backend's
// choice (MIXQ_CPU_ISA, else the best the CPU has).
const NativeKernels& select_native_kernels(const std::string& isa);

}  // namespace mixq::cpu::ggml
