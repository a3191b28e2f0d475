// The INT8 per-tensor requantization's float path (kernels/common/int8_requant.cuh) against the
// reference's double expression, element by element, on the inputs where the two could part:
// exact rounding ties, near-ties where the double rounding decides, saturation by a hair and by a
// lot, clamps that cut, bias that cancels the product, and random scales over many decades.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "cuda/kernels/common/int8_requant.cuh"
#include "gpu/device_checks.hpp"

namespace {

struct RequantCase {
  int32_t acc;
  double ws, bias;
  float lo, hi;
  double out_scale;
  int out_zero;
};

// tile: RequantTile's code (undecided[i] = 1 where it deferred to the double expression), exact:
// the double expression.
__global__ void requant_both(const RequantCase* c, int n, int8_t* tile, int8_t* undecided, int8_t* exact) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const RequantCase k = c[i];
  exact[i] = mixq::cuda::requant_i8_double(k.acc, k.ws, k.bias, k.lo, k.hi, k.out_scale, k.out_zero);
  const mixq::cuda::RequantTile rt(k.lo, k.hi, k.out_scale, k.out_zero);
  int8_t out;
  const bool decided = rt.code(k.acc, rt.column(k.ws, k.bias), out);
  tile[i] = decided ? out : exact[i];
  undecided[i] = decided ? 0 : 1;
}

std::vector<RequantCase> requant_cases() {
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto log_uniform = [&](double lo, double hi) { return lo * std::pow(hi / lo, u01(rng)); };
  const float inf = std::numeric_limits<float>::infinity();
  const float clamps[][2] = {{-inf, inf}, {0.f, inf}, {0.f, 6.f}, {-1.5f, 2.25f}};
  std::vector<RequantCase> cs;
  // random scales over many decades, accumulators of every size, biases that cancel
  for (int i = 0; i < 200000; ++i) {
    RequantCase c{};
    const int bits = 1 + int(u01(rng) * 31);
    c.acc = int32_t(int64_t(u01(rng) * std::ldexp(2.0, bits)) - (int64_t(1) << bits));
    c.ws = log_uniform(1e-7, 1e-1);
    const double p = c.ws * c.acc;
    c.bias = i % 3 == 0 ? 0.0 : double(float(i % 3 == 1 ? -p * (0.9 + 0.2 * u01(rng)) : (u01(rng) - 0.5) * 4));
    c.out_scale = log_uniform(1e-3, 1e1);
    c.out_zero = int(u01(rng) * 41) - 20;
    c.lo = clamps[i % 4][0];
    c.hi = clamps[i % 4][1];
    cs.push_back(c);
  }
  // exact ties: ws and S_O powers of two, odd accumulators (q = acc / 2^k + 1/2)
  for (int i = 0; i < 50000; ++i) {
    RequantCase c{};
    c.acc = 2 * (int32_t(u01(rng) * 4000) - 2000) + 1;
    c.ws = std::ldexp(1.0, -int(1 + u01(rng) * 4));
    c.out_scale = std::ldexp(c.ws, 1) * (i % 2 ? 1.0 : 0.5);
    c.bias = i % 5 == 0 ? double(0.25f * float(int(u01(rng) * 16) - 8)) : 0.0;
    c.out_zero = int(u01(rng) * 21) - 10;
    c.lo = -inf;
    c.hi = inf;
    cs.push_back(c);
  }
  // near ties, where only the double rounding knows the side: q = acc * ws / S_O with ws / S_O a
  // half-integer in real numbers but not in binary (0.15 / 0.1, 0.3 / 0.2, 2.5 * 0.1 / 0.1 ...)
  const double near[][2] = {{0.15, 0.1}, {0.3, 0.2}, {0.25, 0.1}, {0.35, 0.1}, {0.45, 0.3}, {1.1, 0.2}};
  for (int i = 0; i < 60000; ++i) {
    RequantCase c{};
    c.acc = int32_t(u01(rng) * 200) - 100;
    c.ws = near[i % 6][0];
    c.out_scale = near[i % 6][1];
    c.bias = 0.0;
    c.out_zero = 0;
    c.lo = -inf;
    c.hi = inf;
    cs.push_back(c);
  }
  // saturation by a hair and by a lot; the extreme accumulators
  for (int i = 0; i < 20000; ++i) {
    RequantCase c{};
    c.out_zero = int(u01(rng) * 21) - 10;
    c.out_scale = 1.0;
    c.ws = 1.0;
    const int edge = i % 2 ? 127 - c.out_zero : -128 - c.out_zero;
    c.acc = i % 10 == 0 ? (i % 20 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min())
                        : edge + int(u01(rng) * 5) - 2;
    c.bias = i % 3 == 0 ? double(0.5f * float(int(u01(rng) * 5) - 2)) : 0.0;
    c.lo = -inf;
    c.hi = inf;
    cs.push_back(c);
  }
  return cs;
}

// Every case: the float path's code equals the double expression's.
TEST(CudaInt8Requant, FloatPathGivesTheDoubleBytes) {
  SKIP_WITHOUT_GPU();
  const std::vector<RequantCase> cs = requant_cases();
  const int n = int(cs.size());
  RequantCase* d_cases = nullptr;
  int8_t *d_exact = nullptr, *d_tile = nullptr, *d_undecided = nullptr;
  ASSERT_EQ(cudaMalloc(&d_cases, cs.size() * sizeof(RequantCase)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_exact, cs.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_tile, cs.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_undecided, cs.size()), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_tile, 0x6B, cs.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_cases, cs.data(), cs.size() * sizeof(RequantCase), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_exact, 0x3C, cs.size()), cudaSuccess);
  requant_both<<<(n + 255) / 256, 256>>>(d_cases, n, d_tile, d_undecided, d_exact);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int8_t> exact(cs.size()), tile(cs.size()), undecided(cs.size());
  ASSERT_EQ(cudaMemcpy(exact.data(), d_exact, cs.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(tile.data(), d_tile, cs.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(undecided.data(), d_undecided, cs.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_cases);
  cudaFree(d_exact);
  cudaFree(d_tile);
  cudaFree(d_undecided);
  int bad = 0, at_ends = 0, deferred_random = 0;
  const int n_random = 200000;  // requant_cases() starts with these
  for (int i = 0; i < n; ++i) {
    at_ends += exact[i] == 127 || exact[i] == -128;
    if (i < n_random) deferred_random += undecided[i];
    const RequantCase& c = cs[size_t(i)];
    auto describe = [&] {
      std::ostringstream os;
      os << "case " << i << ": acc " << c.acc << ", ws " << c.ws << ", bias " << c.bias << ", clamp [" << c.lo
         << ", " << c.hi << "], S_O " << c.out_scale << ", Z_O " << c.out_zero << ": double " << int(exact[i]);
      return os.str();
    };
    if (tile[i] != exact[i] && ++bad <= 10) ADD_FAILURE() << describe() << ", float path " << int(tile[i]);
  }
  EXPECT_EQ(bad, 0) << "of " << n;
  // the per-column path decides nearly every output itself: on the random cases (near-ties and
  // in-range outputs of a bias that cancels a large product) it defers under 2% to the double
  // expression
  EXPECT_LT(deferred_random, n_random / 50) << "of " << n_random;
  // the cases reach both the saturated and the in-range codes
  EXPECT_GT(at_ends, n / 20);
  EXPECT_LT(at_ends, n * 3 / 4);
}

}  // namespace
