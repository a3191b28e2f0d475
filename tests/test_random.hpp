// Normal random floats for the tests (host, unit and GPU): one generator, so the same seed gives
// the same data in every test that shares it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace mixq::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace mixq::test
