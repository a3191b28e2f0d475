// INT8 W8A8 experts on CUDA (act = int8-block: int8 codes per block of 64 or 128 along K, symmetric
// or with offsets, activations quantized per token per block at the call): the grouped block GEMM
// against the CPU backend's INT8 experts (the device quantizer does the host's math, so the codes
// are the same), contiguous layout with 0, 1, 7, 127-129, 300 rows an expert (experts starting at
// rows that are not multiples of 4; N and K not multiples of 128; K blocks of 64 with an odd count;
// more than one rank-1 stage; rows with large activation offsets; per-expert bias; f32 and bf16
// outputs: the direct and the TMA-store epilogues, clipped to each expert's rows), E = 1 bit for
// bit against linear(), the masked layout under a CUDA graph with counts changing between replays,
// moe_mlp, and bad offsets refused in the kernel (error bits, outputs untouched). Skips without a
// Hopper GPU.
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
using test::download;
using test::upload;

PrepareOptions int8_on(BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  o.act = ActQuant::Int8Block;
  return o;
}

TensorView dev(const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
  return TensorView(b.data(), t, shape, Device::CUDA);
}

// Activations as bf16 (what the device call reads) and the same values as f32 (the CPU's input);
// every third row shifted by 1.5, so that the activation offsets' term matters.
struct Acts {
  std::vector<uint8_t> bf16;
  std::vector<float> f32;
};
Acts make_acts(int64_t R, int64_t K, uint32_t seed) {
  std::vector<float> xf = randn(size_t(R * K), seed);
  for (int64_t r = 0; r < R; r += 3)
    for (int64_t k = 0; k < K; ++k) xf[size_t(r * K + k)] += 1.5f;
  Acts a;
  a.bf16 = test::to_bytes(xf, DType::BF16);
  a.f32.resize(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) a.f32[i] = float(test::value(a.bf16, DType::BF16, i));
  return a;
}

// y against the CPU backend's want, row by row: the same codes and the same four terms per K block,
// evaluated in f32 in another order (a few roundings per block, partly cancelling offset terms:
// the linear kernels' 2e-5 against float64), plus the 16-bit output's rounding.
void expect_rows_near(const std::vector<double>& y, const std::vector<float>& want, int64_t R, int64_t N,
                      double tol, const std::string& what) {
  for (int64_t r = 0; r < R; ++r) {
    double rms = 0;
    for (int64_t n = 0; n < N; ++n) rms += double(want[size_t(r * N + n)]) * want[size_t(r * N + n)];
    rms = std::sqrt(rms / double(N));
    for (int64_t n = 0; n < N; ++n) {
      const double w = want[size_t(r * N + n)];
      ASSERT_NEAR(y[size_t(r * N + n)], w, tol * (std::fabs(w) + rms) + 1e-30)
          << what << " row " << r << " n " << n;
    }
  }
}

std::vector<double> as_doubles(const std::vector<uint8_t>& bytes, DType t, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = test::value(bytes, t, i);
  return v;
}

class CudaMoeInt8Schemes : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMoeInt8Schemes, GroupedContiguousMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const std::string scheme = GetParam();
  const std::vector<int32_t> counts = {0, 1, 7, 128, 0, 300, 127, 129, 2, 0, 65};
  // K = 1088: 17 blocks of 64 (an odd count: the last stage's second half is past K) and 9 of 128,
  // two rank-1 stages either way
  const int64_t E = int64_t(counts.size()), N = 200, K = 1088;
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  const auto experts = moe_test::make_experts(scheme, E, N, K, 41, 131u);
  const PreparedExperts gpu = prepare_experts(experts, int8_on(BackendKind::CUDA));
  const PreparedExperts cpu = prepare_experts(experts, int8_on(BackendKind::CPU));
  ASSERT_NE(gpu.kernel_name(R).find("sm90_i8_grouped"), std::string::npos) << gpu.kernel_name(R);
  const Acts x = make_acts(R, K, 9);
  const std::vector<float> bias = randn(size_t(E * N), 3);
  std::vector<float> yc(size_t(R * N));
  Epilogue cep;
  cep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {E, N});
  grouped_linear(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {R, K}), cpu,
                 TensorView(yc.data(), DType::F32, {R, N}),
                 MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})), cep);
  const DeviceBuffer doff = upload(off), dx = upload(x.bf16), dbias = upload(bias);
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
    expect_rows_near(y, yc, R, N, yt == DType::F32 ? 5e-5 : 5e-3, scheme + " " + dtype_name(yt));
  }
}

// E = 1 with more rows than the skinny kernels serve: the same quantizer, tile, rank-1 stages and
// per-block promotion order as linear()'s block GEMM, so the same bits.
TEST_P(CudaMoeInt8Schemes, OneExpertMatchesLinearBitForBit) {
  SKIP_WITHOUT_HOPPER();
  const int64_t N = 328, K = 1152, R = 300;
  const auto experts = moe_test::make_experts(GetParam(), 1, N, K, 7, 1u);
  const PreparedExperts pe = prepare_experts(experts, int8_on(BackendKind::CUDA));
  PrepareOptions lo = int8_on(BackendKind::CUDA);
  lo.force_kernel = "sm90_i8_128x128";
  const PreparedWeight pw = prepare(experts[0], lo);
  const Acts x = make_acts(R, K, 2);
  const std::vector<int32_t> off = {0, int32_t(R)};
  DeviceBuffer dx = upload(x.bf16), doff = upload(off), a(size_t(R * N) * 4), b(size_t(R * N) * 4),
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

INSTANTIATE_TEST_SUITE_P(Schemes, CudaMoeInt8Schemes,
                         ::testing::Values("w8g128", "w8g64", "w8g128asym", "w8g64asym"));

// The masked layout under a CUDA graph, replayed with new counts (max_tokens 72: a full 64-row
// sub-tile takes the TMA store, the rest the clipped direct stores; experts start at rows 72 e,
// 8 past a multiple of 16); rows past each count keep their sentinel; then a count over max_tokens
// sets the error bit and writes nothing.
TEST(CudaMoeInt8, MaskedLayoutGraphReplaysWithChangingCounts) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, max = 72, N = 256, K = 384;
  const auto experts = moe_test::make_experts("w8g128asym", E, N, K, 13, 131u);
  const PreparedExperts gpu = prepare_experts(experts, int8_on(BackendKind::CUDA));
  const PreparedExperts cpu = prepare_experts(experts, int8_on(BackendKind::CPU));
  const Acts x = make_acts(E * max, K, 1);
  const std::vector<float> sentinel_f(size_t(E * max * N), -3.f);
  const std::vector<uint8_t> sentinel = test::to_bytes(sentinel_f, DType::BF16);
  DeviceBuffer dx = upload(x.bf16), dy = upload(sentinel), dcounts(E * 4), derr(16),
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
    grouped_linear(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {E, max, K}), cpu,
                   TensorView(yc.data(), DType::F32, {E, max, N}),
                   MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max));
    const auto y = as_doubles(download<uint8_t>(dy, dy.size()), DType::BF16, sentinel_f.size());
    expect_rows_near(y, yc, E * max, N, 5e-3, "masked");
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
TEST(CudaMoeInt8, BadOffsetsAreRefusedInKernel) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 4, N = 128, K = 256, R = 10;
  const PreparedExperts gpu =
      prepare_experts(moe_test::make_experts("w8g64", E, N, K, 1, 131u), int8_on(BackendKind::CUDA));
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

// Too small a workspace is refused on the host, naming the size it needs.
TEST(CudaMoeInt8, ShortWorkspaceIsRefused) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 2, N = 128, K = 128, R = 4;
  const PreparedExperts gpu =
      prepare_experts(moe_test::make_experts("w8g128", E, N, K, 1, 131u), int8_on(BackendKind::CUDA));
  const std::vector<int32_t> off = {0, 2, 4};
  const size_t need = grouped_linear_workspace_size(gpu, R);
  DeviceBuffer dx(size_t(R * K) * 4), dy(size_t(R * N) * 4), doff = upload(off), ws(need);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = need - 1;
  try {
    grouped_linear(dev(dx, DType::F32, {R, K}), gpu, dev(dy, DType::F32, {R, N}),
                   MoeRows::contiguous(dev(doff, DType::I32, {E + 1})), {}, ctx);
    FAIL() << "a short workspace was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(std::to_string(need)), std::string::npos) << e.what();
  }
}

// The whole MoE MLP on INT8 experts (routing, gather, grouped gate_up, SiLU * up, grouped down,
// weighted sum) against the CPU backend's, bf16 activations.
TEST(CudaMoeInt8, MlpMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 16, T = 203, k = 4, H = 384, I = 256;
  std::vector<QuantizedWeight> gu;
  const auto gate = moe_test::make_experts("w8g128", E, I, H, 50, 131u),
             up = moe_test::make_experts("w8g128", E, I, H, 150, 131u),
             down = moe_test::make_experts("w8g128", E, H, I, 250, 131u);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const PreparedExperts ggu = prepare_experts(gu, int8_on(BackendKind::CUDA)),
                        gdown = prepare_experts(down, int8_on(BackendKind::CUDA)),
                        cgu = prepare_experts(gu, int8_on(BackendKind::CPU)),
                        cdown = prepare_experts(down, int8_on(BackendKind::CPU));
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> w(size_t(T * k));
  for (int64_t t = 0; t < T; ++t)  // distinct experts per token (offsets 0, 3, 6, 9 mod 14), 2 idle
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = int32_t((t * 7 + t / 3 + 3 * j) % (E - 2));
      w[size_t(t * k + j)] = 0.2f + 0.05f * float(j);
    }
  const Acts x = make_acts(T, H, 4);
  std::vector<float> yc(size_t(T * H));
  moe_mlp(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {T, H}),
          TensorView(ids.data(), DType::I32, {T, k}), TensorView(w.data(), DType::F32, {T, k}), cgu,
          cdown, TensorView(yc.data(), DType::F32, {T, H}));
  DeviceBuffer dx = upload(x.bf16), dids = upload(ids), dw = upload(w), dy(size_t(T * H) * 2), derr(16),
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
  // activation again to int8 from those; the CPU one from its f32 values
  EXPECT_LT(std::sqrt(num / den), 2e-2);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], 0);
}

}  // namespace
}  // namespace mixq
