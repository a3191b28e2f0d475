// Inputs of the weight-only GPU tests: a weight quantized from normal random floats (optionally
// with a shuffled act-order permutation) and activations rounded to the device dtype.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/host_data.hpp"
#include "mixq/quantize.hpp"
#include "mixq/tensor.hpp"

namespace mixq::test {

inline QuantizedWeight make_weight(int64_t N, int64_t K, const std::string& scheme, uint32_t seed,
                                   bool act_order = false) {
  std::vector<float> w = randn(size_t(N * K), seed, 0.05f);
  QuantizedWeight q =
      quantize_weight(TensorView(w.data(), DType::F32, {N, K}), parse_scheme(scheme));
  if (act_order) {
    q.k_perm.resize(size_t(K));
    std::iota(q.k_perm.begin(), q.k_perm.end(), 0);
    std::shuffle(q.k_perm.begin(), q.k_perm.end(), std::mt19937(seed + 7));
    q.validate();
  }
  return q;
}

// Activations rounded to the device dtype.
inline HostMat make_acts(int64_t M, int64_t K, DType t, uint32_t seed) {
  return random_mat(M, K, t, seed);
}

}  // namespace mixq::test
