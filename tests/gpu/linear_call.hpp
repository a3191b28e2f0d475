// One linear() call of the GPU tests that hold the output against a float64 reference on the same
// inputs: activations whose per-token magnitudes span 1e-3 .. 1e2 (row m scaled by 10^(m % 6 - 3))
// as bytes of the activation dtype, a NaN-poisoned output, an optional f32 bias and the clamp, and
// optionally a caller workspace (filled with garbage first where asked).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/host_data.hpp"
#include "mixq/ops.hpp"

namespace mixq::test {

struct LinearCall {
  int64_t M, K, N;
  DType xt, yt;
  std::vector<uint8_t> xb;   // the activations' bytes (the reference reads them too)
  std::vector<float> bias;   // the bias on the host (empty: none)
  DeviceBuffer dx, dbias;
  Epilogue ep;               // the device call's epilogue

  // x from randn(seed + 1), the bias from randn(seed + 3, scale 4)
  LinearCall(int64_t M_, int64_t K_, int64_t N_, DType xt_, DType yt_, bool with_bias, float lo, float hi,
             uint32_t seed)
      : M(M_), K(K_), N(N_), xt(xt_), yt(yt_) {
    std::vector<float> xf = randn(size_t(M * K), seed + 1);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) xf[size_t(m * K + k)] *= std::pow(10.f, float(m % 6) - 3.f);
    xb = to_bytes(xf, xt);
    dx = DeviceBuffer(xb.size());
    dx.copy_from_host(xb.data(), xb.size());
    ep.clamp_lo = lo;
    ep.clamp_hi = hi;
    if (with_bias) {
      bias = randn(size_t(N), seed + 3, 4.f);
      dbias = DeviceBuffer(bias.size() * 4);
      dbias.copy_from_host(bias.data(), bias.size() * 4);
      ep.bias = dbias.view(DType::F32, {N});
    }
  }

  // The epilogue of the reference: the same clamp, the host bias.
  Epilogue host_epilogue() const {
    Epilogue r = ep;
    if (!bias.empty()) r.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {N});
    return r;
  }

  // linear(x, pw) into a NaN-poisoned y; its bytes (empty after a failed check)
  std::vector<uint8_t> run(const PreparedWeight& pw, bool caller_workspace, bool garbage_workspace = false) const {
    const size_t yb = size_t(M * N) * (dtype_bits(yt) / 8);
    DeviceBuffer dy(yb);
    EXPECT_EQ(cudaMemset(dy.data(), 0xFF, yb), cudaSuccess);  // NaN poison in every float type
    ExecContext ctx;
    DeviceBuffer ws;
    if (caller_workspace) {
      ws = DeviceBuffer(linear_workspace_size(pw, M));
      if (garbage_workspace) EXPECT_EQ(cudaMemset(ws.data(), 0x5C, ws.size()), cudaSuccess);
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
    }
    linear(dx.view(xt, {M, K}), pw, dy.view(yt, {M, N}), ep, ctx);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      ADD_FAILURE() << "linear: " << cudaGetErrorString(cudaGetLastError());
      return {};
    }
    std::vector<uint8_t> y(yb);
    dy.copy_to_host(y.data(), yb);
    return y;
  }
};

}  // namespace mixq::test
