// The CPU micro-kernels: one panel of 16 output rows times a tile of at most kMaxTileRows
// activation rows over a range of segments. One table of function pointers per ISA level
// (scalar, avx2, avx2vnni, avx512); cpu_isa.cpp picks one from cpuid at prepare time.
#pragma once

#include <string>

#include <cstdint>

#include "cpu/packed_weight.hpp"

namespace mixq::cpu {

constexpr int kLanes = 16;
constexpr int kMaxTileRows = 8;

// Float path (weight-only exact, and FP8 after activation quantize-dequantize):
//   c[m][r] (+)= sum_seg ( scale[seg][r] * sum_{k in seg} x[m][k] * q[r][k]
//                          + offset[seg][r] * xsum[m][seg] )
// x rows are f32 in padded-K coordinates (padding is 0); xsum[m][seg] = sum of x over the segment.
struct FloatTileArgs {
  const PackedWeight* w;
  int64_t panel;
  int64_t seg0, seg1;
  const float* x;      // row 0 of the tile, column 0 (padded coordinates)
  int64_t ldx;
  const float* xsum;   // [m][n_segs], row 0 of the tile
  int64_t ldxs;
  int rows;            // 1..kMaxTileRows
  float* c;            // [rows][ldc], 16 outputs per row at c + m*ldc
  int64_t ldc;
  bool accumulate;
};

// Integer path (int8 activations times integer codes, vpdpbusd):
// Activation rows are bytes in padded-K coordinates: s8 codes qx when the weight codes are
// unsigned nibbles / u8 (Int4, Uint8), or u8 = qx + 128 when the weight codes are signed
// (Int8; vpdpbusd multiplies u8 by s8). Either way the kernel first recovers the exact
//   d = sum_k qx[m][k] * q[r][k]                       (int32, per segment)
// and then, in Float mode, accumulates the four-term formula of mission.md §2 in f32:
//   c += sx*sw*d + sw*qsum_w*ox + ow*(sx*sum_qx + g*ox)
// or, in Int mode, sums d over the segments into an int32 accumulator (per-tensor INT8).
struct ActSegment {   // per (activation row, segment), prepared with the activation codes
  float sx, ox;       // activation scale / offset (x = qx*sx + ox)
  float ow_coef;      // sx*sum_qx + g*ox
  int32_t sum_qx;     // sum of the codes qx over the segment
};

struct IntTileArgs {
  const PackedWeight* w;
  int64_t panel;
  int64_t seg0, seg1;
  const uint8_t* x;        // row 0 of the tile (bytes, see above)
  int64_t ldx;
  const ActSegment* xs;    // [m][n_segs], row 0 of the tile
  int64_t ldxs;
  int rows;
  bool int_mode;           // true: c is int32 sums of d; false: f32 four-term formula
  void* c;                 // float or int32 [rows][ldc]
  int64_t ldc;
  bool accumulate;
};

// Large-M float path (f32gemm): the weights of a K chunk are decoded once per call into f32
// (w = q * scale + offset, [padded k][16 lanes] per panel) and a register-blocked GEMM tile runs
// over every activation row: c[m][0..16*np) (+)= sum_k a[k][m] * w_p[k][lane].
constexpr int kGemmMaxRows = 12;  // rows of one GEMM register tile (12 x 32 = 24 accumulators)

struct GemmTileArgs {
  const float* a;     // activations packed [kc][rows] (row index fastest)
  int rows;           // 1..kGemmMaxRows
  const float* w0;    // panel 0 weights [kc][16]
  const float* w1;    // panel 1 weights [kc][16], or nullptr for a single panel
  int64_t kc;
  float* c;           // c + m*ldc: 16 (or 32) outputs of row m
  int64_t ldc;
  bool accumulate;
};

struct KernelTable {
  const char* isa;  // "scalar", "avx2", "avx512"
  void (*float_tile)(const FloatTileArgs&);
  void (*int_tile)(const IntTileArgs&);
  // Dequantizes segments [seg0, seg1) of a panel into out[(kp - kp0(seg0))][16] f32.
  void (*decode_panel)(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                       float* out);
  void (*gemm_tile)(const GemmTileArgs&);
  // q[i] = clamp(round_half_even((double(x[i]) - of) / sc), -128, 127) for i < n (sc > 0):
  // the arithmetic of quantize_activations_int8_block, bit for bit.
  void (*quantize_i8)(const float* x, int64_t n, float of, float sc, int8_t* q);
};

const KernelTable& scalar_kernels();
const KernelTable* avx2_kernels();      // AVX2 + FMA + F16C, vpmaddubsw integer dots
const KernelTable* avx2vnni_kernels();  // the same float kernels, AVX-VNNI integer dots
const KernelTable* avx512_kernels();    // AVX-512 F/BW/VL/DQ + VNNI
void int_tile_avx2vnni(const IntTileArgs& a);  // kernels_avx2vnni.cpp

// What cpuid (and the OS's saved register state, xgetbv) says this CPU runs.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;  // with OS support for ymm state
  bool avx_vnni = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false,
       avx512_vnni = false;  // with OS support for zmm / mask state
  bool intel = false;        // cpuid vendor "GenuineIntel" (prefetch policy: Tuning::cpu_l1_prefetch)
  std::string list() const;  // "avx2 fma f16c ..." (the ones present), "none" when none
};
const CpuFeatures& cpu_features();
// The features of `f` that kernel set `isa` needs and lacks ("" when it runs), space-separated.
std::string missing_features(const std::string& isa, const CpuFeatures& f);

// The kernel sets by name: "avx512", "avx2vnni", "avx2", "scalar" (each one exactly that set,
// never silently another). Whether this CPU runs `isa`, and the missing features if not.
bool cpu_runs(const std::string& isa, std::string* missing = nullptr);
// The best set this CPU runs (avx512 > avx2vnni > avx2 > scalar).
const KernelTable& best_kernels();
// The set named by `isa`, or the best one for "auto". An empty `isa` takes MIXQ_CPU_ISA (read
// once per process; unset or empty means auto). Throws mixq::Error (InvalidArgument) for an
// unknown name and (Unsupported) for a set this CPU lacks, naming the option
// (PrepareOptions::cpu_isa or MIXQ_CPU_ISA), the value, the missing and the present features.
const KernelTable& select_kernels(const std::string& isa = std::string());

}  // namespace mixq::cpu
