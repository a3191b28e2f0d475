// Random activations and expert weights shared by the host and CUDA mixture-of-experts tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/quantize.hpp"
#include "test_random.hpp"

namespace mixq::moe_test {

using test::randn;

// E experts [N][K] of `scheme`, weights N(0, 0.05); expert e drawn with seed + e * seed_stride.
inline std::vector<QuantizedWeight> make_experts(const std::string& scheme, int64_t E, int64_t N,
                                                 int64_t K, uint32_t seed, uint32_t seed_stride) {
  std::vector<QuantizedWeight> out;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> w = randn(size_t(N * K), seed + uint32_t(e) * seed_stride, 0.05f);
    out.push_back(quantize_weight(TensorView(w.data(), DType::F32, {N, K}), parse_scheme(scheme)));
  }
  return out;
}

}  // namespace mixq::moe_test
