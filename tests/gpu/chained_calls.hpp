// Determinism, graph capture and programmatic dependent launch of a decode kernel pair: a chain
// of calls, each reading the previous call's output (poisoned before the chain), eager with
// dependent launch, graph-replayed, and with caller workspaces (one a call, or one for all: the
// next call's quantizer zeroes the tickets the previous GEMM may still hold), poisoned first, must
// give the bits of the same chain run one call at a time without dependent launch. Dependent launch is a knob of the
// prepared weight (tuning w8a8_skinny_pdl), so each weight is prepared twice: with it and without.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/test_tuning.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"

namespace mixq::test {

// One weight prepared with the few-token kernels launched dependent on the activation quantizer
// (w8a8_skinny_pdl=on) and without (w8a8_skinny_pdl=off), the rest of `o` the same.
struct PdlWeights {
  PreparedWeight pdl, no_pdl;
};
inline PdlWeights prepare_with_and_without_pdl(const QuantizedWeight& w, const PrepareOptions& o) {
  return {prepare(w, with_tuning(o, "w8a8_skinny_pdl=on")), prepare(w, with_tuning(o, "w8a8_skinny_pdl=off"))};
}

// wa, wb: D x D weights called alternately; x: M x D bf16 activations (random).
inline void expect_chained_calls_match(const PdlWeights& wa, const PdlWeights& wb, int64_t D,
                                       int64_t M, uint32_t seed) {
  SCOPED_TRACE("M = " + std::to_string(M) + " " + wa.pdl.kernel_name(M));
  EXPECT_EQ(wa.pdl.kernel_name(M), wa.no_pdl.kernel_name(M));
  EXPECT_EQ(wb.pdl.kernel_name(M), wb.no_pdl.kernel_name(M));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> xb(size_t(M * D));
  for (auto& v : xb) v = f32_to_bf16(nd(rng));
  constexpr int kCalls = 6;
  DeviceBuffer dx(xb.size() * 2);
  dx.copy_from_host(xb.data(), xb.size() * 2);
  std::vector<DeviceBuffer> ys, wss;
  size_t most = 0;
  for (int i = 0; i < kCalls; ++i) {
    ys.emplace_back(size_t(M * D * 2));
    wss.emplace_back(linear_workspace_size(i % 2 ? wb.pdl : wa.pdl, M));
    most = std::max(most, wss.back().size());
  }
  DeviceBuffer shared_ws(most);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  // pdl: the weights prepared with dependent launch (else without); caller_ws: 0 the weights' own
  // scratch, 1 a workspace a call, 2 one workspace for every call
  auto enqueue = [&](bool pdl, bool sync_each, int caller_ws) {
    for (auto& y : ys) ASSERT_EQ(cudaMemsetAsync(y.data(), 0xFF, y.size(), s), cudaSuccess);
    if (caller_ws) {
      for (auto& w : wss) ASSERT_EQ(cudaMemsetAsync(w.data(), 0x5C, w.size(), s), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(shared_ws.data(), 0x5C, shared_ws.size(), s), cudaSuccess);
    }
    for (int i = 0; i < kCalls; ++i) {
      ExecContext ctx;
      ctx.stream = s;
      if (caller_ws) {
        DeviceBuffer& w = caller_ws == 2 ? shared_ws : wss[size_t(i)];
        ctx.workspace = w.data();
        ctx.workspace_bytes = w.size();
      }
      const DeviceBuffer& in = i == 0 ? dx : ys[size_t(i - 1)];
      const PdlWeights& w = i % 2 ? wb : wa;
      linear(in.view(DType::BF16, {M, D}), pdl ? w.pdl : w.no_pdl,
             ys[size_t(i)].view(DType::BF16, {M, D}), {}, ctx);
      if (sync_each) {
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      }
    }
  };
  auto outputs = [&] {
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<std::vector<uint8_t>> out;
    for (auto& y : ys) {
      out.emplace_back(y.size());
      y.copy_to_host(out.back().data(), y.size());
    }
    return out;
  };
  enqueue(false, true, 0);
  const auto want = outputs();
  for (const auto& y : want)
    for (size_t i = 0; i < y.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, y.data() + i, 2);
      ASSERT_TRUE(std::isfinite(bf16_to_f32(h))) << "an output of the chain was not written";
    }
  for (int rep = 0; rep < 4; ++rep) {
    enqueue(true, false, rep < 2 ? 0 : rep - 1);
    EXPECT_EQ(outputs(), want) << "eager chain " << rep;
  }
  for (const int caller_ws : {0, 1, 2}) {
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    enqueue(true, false, caller_ws);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 4; ++rep) {
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      EXPECT_EQ(outputs(), want) << "graph replay " << rep
                                 << (caller_ws ? " (caller workspaces)" : "")
                                 << (caller_ws == 2 ? " (one for all)" : "");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(s);
}

}  // namespace mixq::test
