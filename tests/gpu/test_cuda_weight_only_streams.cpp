// The weight-only linear under the runtime's concurrency features: graph capture and replay,
// chains of decode calls under programmatic dependent launch, and concurrent streams with caller
// workspaces. Every form gives the bits of the plain eager call.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device_checks.hpp"
#include "gpu/test_tuning.hpp"
#include "gpu/wo_test_inputs.hpp"
#include "mixq/ops.hpp"

using namespace mixq;
using test::HostMat;
using test::make_acts;
using test::make_weight;

// M = 1 (and 5 before Hopper): streaming kernel, split-K (clusters on sm_90); 40: the Hopper wgmma
// kernel with split-K (on sm_90a) or cuBLAS; 300: wgmma without split / cuBLAS. One eager call,
// then a graph of three calls replayed five times: every replay gives the eager call's bits
// (tickets and flags left ready by each launch, fixed summation orders). tuning: the knobs the
// weight is prepared with (test_tuning.hpp).
static void expect_replays_match_eager(int64_t M, int64_t N, int64_t K, const std::string& force,
                                       const std::string& tuning = "") {
  SCOPED_TRACE("M = " + std::to_string(M) + ", " + std::to_string(N) + "x" + std::to_string(K) +
               " " + force + " " + tuning);
  const QuantizedWeight w = make_weight(N, K, "w4g128", 7);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.force_kernel = force;
  const PreparedWeight pw = prepare(w, test::with_tuning(o, tuning));
  HostMat x = make_acts(M, K, DType::F16, 8);
  DeviceBuffer dx(x.bytes.size()), dy1(M * N * 2), dy2(M * N * 2);
  dx.copy_from_host(x.bytes.data(), x.bytes.size());
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ExecContext ctx;
  ctx.stream = s;
  linear(dx.view(DType::F16, {M, K}), pw, dy1.view(DType::F16, {M, N}), {}, ctx);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  for (int i = 0; i < 3; ++i)
    linear(dx.view(DType::F16, {M, K}), pw, dy2.view(DType::F16, {M, N}), {}, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int rep = 0; rep < 5; ++rep) {
    ASSERT_EQ(cudaMemsetAsync(dy2.data(), 0xFF, M * N * 2, s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<uint8_t> a(M * N * 2), b(M * N * 2);
    dy1.copy_to_host(a.data(), a.size());
    dy2.copy_to_host(b.data(), b.size());
    ASSERT_EQ(a, b) << "graph replay " << rep << " differs from the eager call";
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(CudaWeightOnly, DeterministicAndGraphCapturable) {
  SKIP_WITHOUT_GPU();
  for (const int64_t M : {int64_t(1), int64_t(5), int64_t(40), int64_t(300)})
    expect_replays_match_eager(M, 4096, 4096, "");
  // the streaming kernel's global partials shared by four reducing blocks per tile
  expect_replays_match_eager(8, 4096, 8192, "sm80_wo_stream", "wo_stream_cluster=off");
}

// Programmatic dependent launch (sm_90: the streaming kernel at M = 1-2, the wgmma kernel and its
// stream-K fixup at M = 16 and 64): a call may start while the previous kernel of its stream still
// runs, and must wait for it before it reads its activations or writes anything. A chain of calls,
// each reading the previous call's output (poisoned before the chain), eager and graph-replayed
// with dependent launch, gives the bits of the same chain run one call at a time without it.
TEST(CudaWeightOnly, ChainedDecodeCallsUnderDependentLaunch) {
  SKIP_WITHOUT_GPU();
  // Each weight prepared twice: PDL on both kernels, the wgmma kernel with its whole ring of
  // weight stages issued before the dependency wait (wo_early_stages=-1, the order of its
  // weight-stream-bound launches); and neither (the reference chain).
  const std::string pdl_on = "wo_stream_pdl=on,wo_wgmma_pdl=on,wo_early_stages=-1";
  const std::string pdl_off = "wo_stream_pdl=off,wo_wgmma_pdl=off,wo_early_stages=0";
  const int64_t D = 4096;
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  const QuantizedWeight qa = make_weight(D, D, "w4g128", 21), qb = make_weight(D, D, "w8g128", 22);
  const PreparedWeight wa = prepare(qa, test::with_tuning(o, pdl_on)),
                       wb = prepare(qb, test::with_tuning(o, pdl_on));
  const PreparedWeight wa_ref = prepare(qa, test::with_tuning(o, pdl_off)),
                       wb_ref = prepare(qb, test::with_tuning(o, pdl_off));
  for (const int64_t M : {int64_t(1), int64_t(2), int64_t(16), int64_t(64)}) {
    SCOPED_TRACE("M = " + std::to_string(M) + " " + wa.kernel_name(M) + " / " + wb.kernel_name(M));
    EXPECT_EQ(wa.kernel_name(M), wa_ref.kernel_name(M));
    EXPECT_EQ(wb.kernel_name(M), wb_ref.kernel_name(M));
    HostMat x = make_acts(M, D, DType::F16, 23);
    constexpr int kCalls = 6;
    DeviceBuffer dx(x.bytes.size());
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    std::vector<DeviceBuffer> ys;
    for (int i = 0; i < kCalls; ++i) ys.emplace_back(M * D * 2);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ExecContext ctx;
    ctx.stream = s;
    // pdl: the weights prepared with dependent launch (else the reference ones, without)
    auto chain = [&](bool pdl, bool sync_each) {
      for (auto& y : ys) ASSERT_EQ(cudaMemsetAsync(y.data(), 0xFF, y.size(), s), cudaSuccess);
      for (int i = 0; i < kCalls; ++i) {
        const DeviceBuffer& in = i == 0 ? dx : ys[size_t(i - 1)];
        const PreparedWeight& w = pdl ? (i % 2 ? wb : wa) : (i % 2 ? wb_ref : wa_ref);
        linear(in.view(DType::F16, {M, D}), w, ys[size_t(i)].view(DType::F16, {M, D}), {}, ctx);
        if (sync_each) ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      }
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    };
    auto outputs = [&] {
      std::vector<std::vector<uint8_t>> out;
      for (auto& y : ys) {
        out.emplace_back(y.size());
        y.copy_to_host(out.back().data(), y.size());
      }
      return out;
    };
    chain(false, true);
    const auto want = outputs();
    for (int rep = 0; rep < 3; ++rep) {
      chain(true, false);
      EXPECT_EQ(outputs(), want) << "eager chain " << rep;
    }
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    for (auto& y : ys) ASSERT_EQ(cudaMemsetAsync(y.data(), 0xFF, y.size(), s), cudaSuccess);
    for (int i = 0; i < kCalls; ++i) {
      const DeviceBuffer& in = i == 0 ? dx : ys[size_t(i - 1)];
      linear(in.view(DType::F16, {M, D}), i % 2 ? wb : wa, ys[size_t(i)].view(DType::F16, {M, D}),
             {}, ctx);
    }
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 5; ++rep) {
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(outputs(), want) << "graph replay " << rep;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

TEST(CudaWeightOnly, ConcurrentStreamsWithCallerWorkspaces) {
  SKIP_WITHOUT_GPU();
  for (const int64_t M : {int64_t(3), int64_t(40), int64_t(300)}) {
    SCOPED_TRACE("M = " + std::to_string(M));
    const int64_t N = 2048, K = 3072;
    const QuantizedWeight w = make_weight(N, K, "w4g64", 9);
    PrepareOptions o;
    o.backend = BackendKind::CUDA;
    const PreparedWeight pw = prepare(w, o);
    const size_t wsb = linear_workspace_size(pw, M);
    HostMat x = make_acts(M, K, DType::F16, 10);
    DeviceBuffer dx(x.bytes.size()), ref_y(M * N * 2);
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    linear(dx.view(DType::F16, {M, K}), pw, ref_y.view(DType::F16, {M, N}));
    std::vector<uint8_t> want(M * N * 2);
    ref_y.copy_to_host(want.data(), want.size());
    constexpr int kStreams = 4;
    cudaStream_t s[kStreams];
    std::vector<DeviceBuffer> ws, ys;
    for (int i = 0; i < kStreams; ++i) {
      ASSERT_EQ(cudaStreamCreate(&s[i]), cudaSuccess);
      ws.emplace_back(std::max<size_t>(wsb, 1));
      ys.emplace_back(M * N * 2);
    }
    for (int rep = 0; rep < 10; ++rep)
      for (int i = 0; i < kStreams; ++i) {
        ExecContext ctx;
        ctx.stream = s[i];
        ctx.workspace = ws[i].data();
        ctx.workspace_bytes = ws[i].size();
        linear(dx.view(DType::F16, {M, K}), pw, ys[i].view(DType::F16, {M, N}), {}, ctx);
      }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int i = 0; i < kStreams; ++i) {
      std::vector<uint8_t> got(M * N * 2);
      ys[i].copy_to_host(got.data(), got.size());
      EXPECT_EQ(got, want) << "stream " << i;
      cudaStreamDestroy(s[i]);
    }
  }
}
