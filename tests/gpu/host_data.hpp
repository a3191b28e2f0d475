// Host-side data of the GPU tests: normal random floats, their bytes in an activation dtype, host
// matrices of such bytes, and one element of a 16- or 32-bit float output read back as double.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/numeric.hpp"
#include "mixq/tensor.hpp"
#include "test_random.hpp"

namespace mixq::test {

// x as F32, F16 or BF16 bytes (16-bit: round to nearest even)
inline std::vector<uint8_t> to_bytes(const std::vector<float>& x, DType t) {
  std::vector<uint8_t> b(x.size() * (dtype_bits(t) / 8));
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(b.data() + 4 * i, &x[i], 4);
    } else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

// A host matrix in a float dtype (raw F32, F16 or BF16 bits), rows contiguous.
struct HostMat {
  std::vector<uint8_t> bytes;
  DType dtype;
  int64_t rows, cols;
  TensorView view() { return TensorView(bytes.data(), dtype, {rows, cols}); }
  // Rows `idx` only, in that order (references are row-independent).
  HostMat subset(const std::vector<int64_t>& idx) const {
    const size_t rb = size_t(cols) * (dtype_bits(dtype) / 8);
    HostMat s{std::vector<uint8_t>(idx.size() * rb), dtype, int64_t(idx.size()), cols};
    for (size_t i = 0; i < idx.size(); ++i)
      std::memcpy(s.bytes.data() + i * rb, bytes.data() + size_t(idx[i]) * rb, rb);
    return s;
  }
};

// rows x cols normal random floats (randn) rounded to t.
inline HostMat random_mat(int64_t rows, int64_t cols, DType t, uint32_t seed, float scale = 1.f) {
  return HostMat{to_bytes(randn(size_t(rows * cols), seed, scale), t), t, rows, cols};
}

// element i of y (F32, F16, BF16 or I8 bytes)
inline double value(const std::vector<uint8_t>& y, DType t, size_t i) {
  if (t == DType::I8) return double(int8_t(y[i]));
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, y.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, y.data() + 2 * i, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace mixq::test
