// Host-side data of `mixq bench`: fast random weights and activations, and the float64
// reference on a sample of the outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_driver.hpp"

namespace mixq::bench {

// A random QuantizedWeight in `scheme` without running the float quantizer (too slow for the
// 117M-element Llama-3 layers): codes are drawn from a 64K-entry table of codes of rounded
// Gaussian samples (so their histogram looks like real quantized weights, FP8 included, and never
// holds NaN codes), scales are random positive values in the scheme's scale type, offsets random
// around zero, zero points random near the middle of the code range. ~0.1 s per 100M codes.
QuantizedWeight random_quantized_weight(int64_t N, int64_t K, const QuantScheme& scheme,
                                        uint64_t seed);

// Fills n floats with approximately standard-normal values times sigma (table lookup; fast).
void fill_random_normal(float* dst, int64_t n, float sigma, uint64_t seed);

// Rounds values in place to what `dtype` (F32, F16, BF16) can hold.
void round_to_dtype(float* v, int64_t n, DType dtype);

// Which outputs the float64 reference is computed for: up to 4 rows of M (first, last and
// evenly spaced) times up to 256 columns of N (evenly spaced, first and last included).
struct OutputSample {
  std::vector<int64_t> rows, cols;
  std::string describe(int64_t M, int64_t N) const;  // "4 of 256 rows x 256 of 6144 cols"
};
OutputSample choose_sample(int64_t M, int64_t N, int64_t max_rows = 4, int64_t max_cols = 256);

// The sampled weight rows (output columns s.cols), dequantized once per weight and reused for
// every M and act mode: f32 [cols][K], original K order. `weight_row(n, buf)` writes row n.
std::vector<float> sampled_weight_rows(int64_t K, const OutputSample& s,
                                       const std::function<void(int64_t, float*)>& weight_row);

// Float64 reference on the sample: ref[r][c] = sum_k xs[r][k] * wrows[c][k]. xs are the sampled
// activation rows (f64 [rows][K]), wrows from sampled_weight_rows.
std::vector<double> reference_on_sample(const std::vector<double>& xs, int64_t K,
                                        const OutputSample& s, const std::vector<float>& wrows);

// Sampled activation rows as the kernel's math sees them: the rows themselves (act None), or
// quantized with mixq's run-time activation quantizers and dequantized (Int8Block with `block`,
// Fp8Block).
std::vector<double> sampled_activations(const float* x, int64_t K, const OutputSample& s,
                                        ActQuant act, int64_t block);
// The same for the CPU backend's weight-only int8-dot kernel (cpu_*_i8dot): each row quantized
// per *segment* (every weight block of block_k columns split into pieces of <= 256 columns),
// with the arithmetic of quantize_activations_int8_block applied to each piece.
std::vector<double> sampled_activations_i8dot(const float* x, int64_t K, const OutputSample& s,
                                              int64_t block_k);

// Relative Frobenius error ||y - ref|| / ||ref|| over the sample; y is the full [M][N] output.
// NaN when y holds a non-finite value at a sampled position.
double relative_error(const float* y, int64_t N, const OutputSample& s,
                      const std::vector<double>& ref);

}  // namespace mixq::bench
