// Random device inputs shared by the GPU tests (kept apart from device_checks.hpp, whose users
// do not all want the host test helpers' namespace).
#pragma once

#include <cstdint>
#include <vector>

#include "mixq/numeric.hpp"
#include "mixq/tensor.hpp"
#include "unit/test_util.hpp"

namespace mixq::test {

// A device bf16 [rows][cols] matrix of random values in [-scale, scale] (16 bytes of slack).
inline DeviceBuffer device_bf16(int64_t rows, int64_t cols, uint32_t seed, float scale = 1.f) {
  const std::vector<float> f =
      mixq::testing::random_floats(size_t(rows * cols), seed, -scale, scale);
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = f32_to_bf16(f[i]);
  DeviceBuffer d(h.size() * 2 + 16);
  d.copy_from_host(h.data(), h.size() * 2);
  return d;
}

}  // namespace mixq::test
