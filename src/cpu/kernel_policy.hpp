// Which CPU kernel a call runs and how the work is cut: small pure functions, tested on their own.
//
// Path per activation mode:
//   weight-only   F32    dequantize-in-register + f32 FMA, relative error <= 1e-5 vs float64 (the
//                        only difference from the reference is f32 accumulation). Non-integer
//                        codes always; Tuning::cpu_activations=exact or "cpu_f32" for every M;
//                        under auto, M above the kernel set's measured int8 threshold.
//                 I8Dot  activations quantized per segment (<= 256 along K) to int8 with
//                        scale+offset, integer dots (vpdpbusd / vpmaddubsw, the ggml way);
//                        relative error ~5e-3 from activation rounding. Under auto for
//                        M <= auto_int8_max_rows(kernel set, code width); every M with
//                        cpu_activations=int8 or "cpu_i8dot". `mixq matmul` forces "cpu_f32"
//                        (it promises 1e-5).
//   int8-block    W8A8   quantize X exactly as quantize_activations_int8_block, integer dots,
//                        four-term formula per block in f32 registers.
//   fp8-block     Fp8    quantize X per token per 128 to e4m3 (bit-exact with the quantizer),
//                        dequantize to f32 once per call, then the float path on e4m3 codes.
//   int8-tensor   I8PerTensor  exact int32 accumulation, requantization in double.
// Within the float path, rows <= kGemvMaxRows run "f32gemv" (whole K per task, no K chunking:
// the weights stream once); larger M runs "f32gemm" (K cut into chunks of ~kGemmChunkK padded
// columns, each weight panel chunk dequantized once to f32, 12x32 register tiles over up to
// kRowsPerTask activation rows).
#pragma once

#include <cstdint>
#include <string>

#include "mixq/ops.hpp"
#include "mixq/tuning.hpp"

namespace mixq::cpu {

enum class CpuPath : uint8_t { F32, I8Dot, W8A8, Fp8, I8PerTensor };

constexpr int64_t kGemvMaxRows = 8;
constexpr int64_t kGemmChunkK = 512;
constexpr int64_t kRowsPerTask = 256;

// Largest M for which cpu_activations=auto runs I8Dot on kernel set `isa` ("avx512", "avx2vnni",
// "avx2", "scalar") for 4-bit or 8-bit integer codes; kAnyRows where the int8 path was measured
// faster at every M (docs/decisions/cpu-isa-dispatch.md has the numbers behind each entry).
constexpr int64_t kAnyRows = INT64_MAX;
int64_t auto_int8_max_rows(const std::string& isa, bool four_bit_codes);

// The path of a call with M activation rows. Weight-only: force_kernel "cpu_f32" (or f32gemv /
// f32gemm) selects F32 and "cpu_i8dot" I8Dot for every M; else `mode`: Exact -> F32, Int8 ->
// I8Dot (integer codes; float codes run F32), Auto -> I8Dot for integer codes and
// M <= int8_max_rows, F32 otherwise.
// Throws InvalidArgument for an unknown force_kernel, Unsupported when it cannot apply.
CpuPath choose_path(ActQuant act, const std::string& force_kernel, bool integer_codes,
                    int64_t M = kGemvMaxRows + 1,
                    Tuning::CpuActivations mode = Tuning::CpuActivations::Auto,
                    int64_t int8_max_rows = kGemvMaxRows);

// "cpu_<isa>_<kind>", kind one of f32gemv, f32gemm, i8dot, w8a8, fp8, i8tensor.
std::string cpu_kernel_name(const char* isa, CpuPath path, int64_t M);

struct WorkSplit {
  int64_t rows_per_task;    // activation rows per task
  int64_t panels_per_task;  // 16-row weight panels per task
  int64_t chunk_k;          // padded K columns per chunk (0 = all K in one pass)
};
// Splits along whichever of M and N gives more parallel work: M is cut in blocks of
// kRowsPerTask (1 block when M <= kGemvMaxRows) and N in enough panel groups to make about
// 4 tasks per thread (dynamic scheduling evens out the tails).
WorkSplit plan_work(int64_t M, int64_t n_panels, int threads);

}  // namespace mixq::cpu
