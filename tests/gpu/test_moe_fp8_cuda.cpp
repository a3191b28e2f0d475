// FP8 block experts on CUDA (act = fp8-block, fp8b128 weights: DeepSeek-V3's routed experts): the
// grouped block GEMM against the CPU backend's FP8 block experts (the same e4m3 activation codes
// and scales), contiguous layout with 0, 1, 7, 127-129, 300 rows an expert (experts starting at odd
// rows; N and K not multiples of 128; per-expert bias; f32 and bf16 outputs: the direct and the
// TMA-store epilogues, clipped to each expert's rows), the masked layout under a CUDA graph with
// counts changing between replays, E = 1 bit for bit against linear(), moe_mlp, and bad offsets /
// counts refused in the kernel (error bits, outputs untouched). Skips without a Hopper GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device_checks.hpp"
#include "device_vectors.hpp"
#include "host_data.hpp"
#include "mixq/error.hpp"
#include "mixq/moe.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"
#include "moe_test_data.hpp"

namespace mixq {
namespace {

using moe_test::randn;

PrepareOptions fp8_on(BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  o.act = ActQuant::Fp8Block;
  return o;
}

std::vector<QuantizedWeight> fp8_experts(int64_t E, int64_t N, int64_t K, uint32_t seed) {
  return moe_test::make_experts("fp8b128", E, N, K, seed, 131u);
}

using test::download;
using test::upload;

TensorView dev(const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
  return TensorView(b.data(), t, shape, Device::CUDA);
}

// y against the CPU backend's want, row by row: the FP8 MMA keeps ~14 bits within a 128-wide
// block, so a cancelling sum keeps what the row's RMS bounds of its terms' rounding.
void expect_rows_near(const std::vector<double>& y, const std::vector<float>& want, int64_t R, int64_t N,
                      double tol, const std::string& what) {
  for (int64_t r = 0; r < R; ++r) {
    double rms = 0;
    for (int64_t n = 0; n < N; ++n) rms += double(want[size_t(r * N + n)]) * want[size_t(r * N + n)];
    rms = std::sqrt(rms / double(N));
    for (int64_t n = 0; n < N; ++n) {
      const double w = want[size_t(r * N + n)];
      ASSERT_NEAR(y[size_t(r * N + n)], w, tol * (std::fabs(w) + rms) + 1e-30) << what << " row " << r << " n " << n;
    }
  }
}

std::vector<double> as_doubles(const std::vector<uint8_t>& bytes, DType t, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = test::value(bytes, t, i);
  return v;
}

TEST(CudaMoeFp8, GroupedContiguousMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {0, 1, 7, 128, 0, 300, 127, 129, 2, 0, 65};
  const int64_t E = int64_t(counts.size()), N = 200, K = 704;
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  const auto experts = fp8_experts(E, N, K, 41);
  const PreparedExperts gpu = prepare_experts(experts, fp8_on(BackendKind::CUDA));
  const PreparedExperts cpu = prepare_experts(experts, fp8_on(BackendKind::CPU));
  ASSERT_NE(gpu.kernel_name(R).find("sm90_fp8_block_grouped"), std::string::npos) << gpu.kernel_name(R);
  const std::vector<float> xf = randn(size_t(R * K), 9);
  const std::vector<uint8_t> xb = test::to_bytes(xf, DType::BF16);
  std::vector<float> xr(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) xr[i] = float(test::value(xb, DType::BF16, i));
  const std::vector<float> bias = randn(size_t(E * N), 3);
  std::vector<float> yc(size_t(R * N));
  Epilogue cep;
  cep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {E, N});
  grouped_linear(TensorView(xr.data(), DType::F32, {R, K}), cpu, TensorView(yc.data(), DType::F32, {R, N}),
                 MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})), cep);
  const DeviceBuffer doff = upload(off), dx = upload(xb), dbias = upload(bias);
  Epilogue ep;
  ep.bias = dev(dbias, DType::F32, {E, N});
  for (DType yt : {DType::F32, DType::BF16}) {
    const size_t yb = size_t(dtype_bits(yt) / 8);
    DeviceBuffer dy(size_t(R * N) * yb), ws(grouped_linear_workspace_size(gpu, R));
    ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);  // NaN: rows never written show
    ASSERT_EQ(cudaMemset(ws.data(), 0x5c, ws.size()), cudaSuccess);
    ExecContext ctx;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    grouped_linear(dev(dx, DType::BF16, {R, K}), gpu, dev(dy, yt, {R, N}),
                   MoeRows::contiguous(dev(doff, DType::I32, {E + 1})), ep, ctx);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = as_doubles(download<uint8_t>(dy, dy.size()), yt, size_t(R * N));
    expect_rows_near(y, yc, R, N, yt == DType::F32 ? 4e-3 : 8e-3, dtype_name(yt));
  }
}

// E = 1 with more rows than the skinny kernel serves: the same quantizer, tile and per-block
// accumulation order as linear()'s block GEMM, so the same bits.
TEST(CudaMoeFp8, OneExpertMatchesLinearBitForBit) {
  SKIP_WITHOUT_HOPPER();
  const int64_t N = 328, K = 1152, R = 300;
  const auto experts = fp8_experts(1, N, K, 7);
  const PreparedExperts pe = prepare_experts(experts, fp8_on(BackendKind::CUDA));
  const PreparedWeight pw = prepare(experts[0], fp8_on(BackendKind::CUDA));
  const std::vector<uint8_t> xb = test::to_bytes(randn(size_t(R * K), 2), DType::BF16);
  const std::vector<int32_t> off = {0, int32_t(R)};
  DeviceBuffer dx = upload(xb), doff = upload(off), a(size_t(R * N) * 4), b(size_t(R * N) * 4),
               ws(grouped_linear_workspace_size(pe, R)), lws(std::max<size_t>(linear_workspace_size(pw, R), 16));
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  grouped_linear(dev(dx, DType::BF16, {R, K}), pe, dev(a, DType::F32, {R, N}),
                 MoeRows::contiguous(dev(doff, DType::I32, {2})), {}, ctx);
  ExecContext lctx;
  lctx.workspace = lws.data();
  lctx.workspace_bytes = lws.size();
  linear(dev(dx, DType::BF16, {R, K}), pw, dev(b, DType::F32, {R, N}), {}, lctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download<float>(a, size_t(R * N)), download<float>(b, size_t(R * N)));
}

// The masked layout under a CUDA graph, replayed with new counts (max_tokens 72: a full 64-row
// sub-tile takes the TMA store, the rest the clipped direct stores); rows past each count keep
// their sentinel; then a count over max_tokens sets the error bit and writes nothing.
TEST(CudaMoeFp8, MaskedLayoutGraphReplaysWithChangingCounts) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, max = 72, N = 256, K = 384;
  const auto experts = fp8_experts(E, N, K, 13);
  const PreparedExperts gpu = prepare_experts(experts, fp8_on(BackendKind::CUDA));
  const PreparedExperts cpu = prepare_experts(experts, fp8_on(BackendKind::CPU));
  const std::vector<float> xf = randn(size_t(E * max * K), 1);
  const std::vector<uint8_t> xb = test::to_bytes(xf, DType::BF16);
  std::vector<float> xr(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) xr[i] = float(test::value(xb, DType::BF16, i));
  const std::vector<float> sentinel_f(size_t(E * max * N), -3.f);
  const std::vector<uint8_t> sentinel = test::to_bytes(sentinel_f, DType::BF16);
  DeviceBuffer dx = upload(xb), dy = upload(sentinel), dcounts(E * 4), derr(16),
               ws(grouped_linear_workspace_size(gpu, E * max));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ExecContext ctx;
  ctx.stream = s;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  MoeRows rows = MoeRows::masked(dev(dcounts, DType::I32, {E}), max);
  rows.error = dev(derr, DType::I32, {1});
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  grouped_linear(dev(dx, DType::BF16, {E, max, K}), gpu, dev(dy, DType::BF16, {E, max, N}), rows, {}, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (const std::vector<int32_t>& counts :
       {std::vector<int32_t>{72, 0, 65, 3, 64, 1}, std::vector<int32_t>{0, 0, 0, 0, 0, 1},
        std::vector<int32_t>{72, 72, 72, 72, 72, 72}}) {
    dcounts.copy_from_host(counts.data(), E * 4);
    dy.copy_from_host(sentinel.data(), sentinel.size());
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> yc(sentinel_f);
    grouped_linear(TensorView(xr.data(), DType::F32, {E, max, K}), cpu, TensorView(yc.data(), DType::F32, {E, max, N}),
                   MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max));
    const auto y = as_doubles(download<uint8_t>(dy, dy.size()), DType::BF16, sentinel_f.size());
    expect_rows_near(y, yc, E * max, N, 8e-3, "masked");
    ASSERT_EQ(download<int32_t>(derr, 1)[0], 0);
  }
  const std::vector<int32_t> bad = {1, 73, 0, 0, 0, 0};
  dcounts.copy_from_host(bad.data(), E * 4);
  dy.copy_from_host(sentinel.data(), sentinel.size());
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorCounts);
  EXPECT_EQ(download<uint8_t>(dy, sentinel.size()), sentinel);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Offsets that do not end at the row count: error bit, y untouched.
TEST(CudaMoeFp8, BadOffsetsAreRefusedInKernel) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 4, N = 128, K = 256, R = 10;
  const PreparedExperts gpu = prepare_experts(fp8_experts(E, N, K, 1), fp8_on(BackendKind::CUDA));
  const std::vector<float> sentinel(size_t(R * N), 5.f);
  const std::vector<int32_t> off = {0, 3, 5, 8, 9};  // ends at 9, x has 10 rows
  DeviceBuffer dx = upload(randn(size_t(R * K), 1)), dy = upload(sentinel), doff = upload(off), derr(16),
               ws(grouped_linear_workspace_size(gpu, R));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  MoeRows rows = MoeRows::contiguous(dev(doff, DType::I32, {E + 1}));
  rows.error = dev(derr, DType::I32, {1});
  grouped_linear(dev(dx, DType::F32, {R, K}), gpu, dev(dy, DType::F32, {R, N}), rows, {}, ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorOffsets);
  EXPECT_EQ(download<float>(dy, sentinel.size()), sentinel);
}

// The whole MoE MLP on FP8 block experts (routing, gather, grouped gate_up, SiLU * up, grouped
// down, weighted sum) against the CPU backend's, bf16 activations.
TEST(CudaMoeFp8, MlpMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 16, T = 203, k = 4, H = 384, I = 256;  // fused gate+up: I a multiple of 128
  std::vector<QuantizedWeight> gu;
  const auto gate = fp8_experts(E, I, H, 50), up = fp8_experts(E, I, H, 150), down = fp8_experts(E, H, I, 250);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const PreparedExperts ggu = prepare_experts(gu, fp8_on(BackendKind::CUDA)),
                        gdown = prepare_experts(down, fp8_on(BackendKind::CUDA)),
                        cgu = prepare_experts(gu, fp8_on(BackendKind::CPU)),
                        cdown = prepare_experts(down, fp8_on(BackendKind::CPU));
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> w(size_t(T * k));
  for (int64_t t = 0; t < T; ++t)  // distinct experts per token (offsets 0, 3, 6, 9 mod 14), 2 idle
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = int32_t((t * 7 + t / 3 + 3 * j) % (E - 2));
      w[size_t(t * k + j)] = 0.2f + 0.05f * float(j);
    }
  const std::vector<float> xf = randn(size_t(T * H), 4);
  const std::vector<uint8_t> xb = test::to_bytes(xf, DType::BF16);
  std::vector<float> xr(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) xr[i] = float(test::value(xb, DType::BF16, i));
  std::vector<float> yc(size_t(T * H));
  moe_mlp(TensorView(xr.data(), DType::F32, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
          TensorView(w.data(), DType::F32, {T, k}), cgu, cdown, TensorView(yc.data(), DType::F32, {T, H}));
  DeviceBuffer dx = upload(xb), dids = upload(ids), dw = upload(w), dy(size_t(T * H) * 2), derr(16),
               mws(moe_mlp_workspace_size(ggu, gdown, T, k, DType::BF16));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = mws.data();
  ctx.workspace_bytes = mws.size();
  moe_mlp(dev(dx, DType::BF16, {T, H}), dev(dids, DType::I32, {T, k}), dev(dw, DType::F32, {T, k}), ggu, gdown,
          dev(dy, DType::BF16, {T, H}), MoeActivation::Silu, dev(derr, DType::I32, {1}), ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = as_doubles(download<uint8_t>(dy, dy.size()), DType::BF16, size_t(T * H));
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - yc[i]) * (y[i] - yc[i]);
    den += double(yc[i]) * yc[i];
  }
  // the CUDA path rounds the gate_up output and the activation to bf16 and quantizes the
  // activation again to e4m3 from those; the CPU one from its f32 values
  EXPECT_LT(std::sqrt(num / den), 3e-2);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], 0);
}

}  // namespace
}  // namespace mixq
