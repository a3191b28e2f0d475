// The two epilogues of the Hopper block GEMMs (src/cuda/kernels/w8a8/sm90_block_gemm.cuh) on one
// weight and one input, byte for byte: the weight prepared with the TMA-store epilogue (tuning
// w8a8_y_tma=auto: on wherever TMA can store Y: 16-bit, 16-byte aligned, ldy % 8 == 0 and
// N % 8 == 0) against the same weight prepared with the direct stores (w8a8_y_tma=off). Shared by
// the FP8 and INT8 GPU tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/test_tuning.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"

namespace mixq::test {

// Y's layout: M x N of a buffer of M rows of ldy elements, starting `shift` bytes into it (the
// buffer itself is 256-byte aligned).
struct YLayout {
  int64_t M, N, ldy;
  size_t shift = 0;
  DType yt = DType::BF16;
  bool bias = true;
  DType bias_t = DType::F32;
};

// One case of the epilogue tests: K and Y's layout. epilogue_shapes(long_k): the cases both
// block GEMMs run. M and N off the tile (M = 1 and 65: a consumer warpgroup's rows, a pair's second
// CTA or a second sub-tile past M), K off the 128-wide block (long_k: the rows of M = 1 / 65),
// bias (f32 / bf16 / f16) or none, f16 and bf16 outputs, the rings wrapping, and three layouts that
// take the direct stores both times: N = 517 in rows of 520 (a TMA store clipped inside a 16-byte
// chunk writes the whole chunk), a 517-element pitch, a base 2 bytes past 16-byte alignment.
struct EpilogueShape {
  int64_t K;
  YLayout y;
};
inline std::vector<EpilogueShape> epilogue_shapes(int64_t long_k) {
  return {
      {1000, {333, 517, 520, 0, DType::F16, true, DType::F32}},
      {1000, {333, 520, 520, 0, DType::BF16, true, DType::BF16}},
      {long_k, {1, 1000, 1000, 0, DType::BF16, false}},
      {long_k, {65, 1000, 1000, 0, DType::F16, true, DType::F16}},
      {776, {1000, 7168 + 64, 7168 + 64, 0, DType::BF16, true, DType::F32}},  // rings wrap
      {300, {300, 517, 517, 0, DType::F16, true, DType::F32}},   // direct stores both times
      {300, {300, 520, 520, 2, DType::BF16, true, DType::F32}},  // direct stores both times
  };
}

inline std::string describe(const YLayout& c) {
  return "M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " ldy " +
         std::to_string(c.ldy) + " shift " + std::to_string(c.shift) + " y=" + dtype_name(c.yt) +
         (c.bias ? std::string(" bias ") + dtype_name(c.bias_t) : std::string(" no bias")) +
         " relu6";
}

// w prepared with `o` twice, with the TMA-store epilogue (w8a8_y_tma=auto) and with the direct
// stores (w8a8_y_tma=off); linear(x, ., y) with relu6 (and a bias) on each into a poisoned (0xFF)
// buffer: the outputs must be the same bytes, none of the M x N outputs left poisoned, and nothing
// outside them (pad columns past N, the bytes before y) written. Returns the weight prepared with
// the TMA-store epilogue (for the caller's checks of its kernel).
inline PreparedWeight expect_epilogues_match(const QuantizedWeight& w, const PrepareOptions& o,
                                             const TensorView& x, const YLayout& c, uint32_t seed) {
  const PreparedWeight staged_w = prepare(w, with_tuning(o, "w8a8_y_tma=auto"));
  const PreparedWeight direct_w = prepare(w, with_tuning(o, "w8a8_y_tma=off"));
  SCOPED_TRACE(describe(c) + " kernel " + staged_w.kernel_name(c.M));
  EXPECT_EQ(staged_w.kernel_name(c.M), direct_w.kernel_name(c.M));
  const size_t eb = 2, bytes = c.shift + size_t(c.M * c.ldy) * eb;
  DeviceBuffer dy(bytes);
  const TensorView y = TensorView::strided(static_cast<uint8_t*>(dy.data()) + c.shift, c.yt,
                                           {c.M, c.N}, {c.ldy, 1}, Device::CUDA);
  Epilogue ep = Epilogue::relu6();
  DeviceBuffer dbias;
  if (c.bias) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.f, 2.f);
    const size_t bb = dtype_bits(c.bias_t) / 8;
    std::vector<uint8_t> b(size_t(c.N) * bb);
    for (int64_t n = 0; n < c.N; ++n) {
      const float v = d(rng);
      if (c.bias_t == DType::F32) {
        std::memcpy(b.data() + 4 * n, &v, 4);
      } else {
        const uint16_t h = c.bias_t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(b.data() + 2 * n, &h, 2);
      }
    }
    dbias = DeviceBuffer(b.size());
    dbias.copy_from_host(b.data(), b.size());
    ep.bias = dbias.view(c.bias_t, {c.N});
  }
  auto run = [&](bool staged) {
    EXPECT_EQ(cudaMemset(dy.data(), 0xFF, bytes), cudaSuccess);
    linear(x, staged ? staged_w : direct_w, y, ep);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> out(bytes);
    dy.copy_to_host(out.data(), bytes);
    return out;
  };
  const std::vector<uint8_t> direct = run(false), staged = run(true);
  size_t poisoned = 0, stray = 0;
  for (size_t i = 0; i < bytes; ++i) {
    const bool out = i < c.shift || int64_t((i - c.shift) / eb) % c.ldy >= c.N;
    if (out) stray += staged[i] != 0xFF;
    else if ((i - c.shift) % eb == 0) poisoned += staged[i] == 0xFF && staged[i + 1] == 0xFF;
  }
  EXPECT_EQ(poisoned, 0u) << "outputs left unwritten";
  EXPECT_EQ(stray, 0u) << "bytes written outside the M x N outputs";
  size_t diff = 0, first = bytes;
  for (size_t i = 0; i < bytes; ++i)
    if (staged[i] != direct[i]) {
      if (diff++ == 0) first = i;
    }
  const size_t e = first >= c.shift ? (first - c.shift) / eb : 0;
  EXPECT_EQ(diff, 0u) << "bytes differ between the epilogues, the first at byte " << first
                      << " (row " << e / size_t(c.ldy) << ", column " << e % size_t(c.ldy) << ")";
  return staged_w;
}

}  // namespace mixq::test
