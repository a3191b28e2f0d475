// The checks the FP8 block and INT8 W8A8 experts' GPU tests share (test_moe_fp8_cuda.cpp,
// test_moe_int8_cuda.cpp): the CUDA grouped call against the CPU backend's experts of the same
// scheme, which quantize the activations the same way, on the same bf16 activations.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "device_vectors.hpp"
#include "host_data.hpp"
#include "mixq/moe.hpp"
#include "mixq/numeric.hpp"
#include "moe_test_data.hpp"

namespace mixq::moe_test {

inline TensorView dev(const DeviceBuffer& b, DType t, std::initializer_list<int64_t> shape) {
  return TensorView(b.data(), t, shape, Device::CUDA);
}

// Activations as bf16 (what the device call reads) and the same values as f32 (the CPU's input);
// with a shift, every third row is moved by it (large per-block offsets).
struct Acts {
  std::vector<uint8_t> bf16;
  std::vector<float> f32;
};
inline Acts make_acts(int64_t R, int64_t K, uint32_t seed, float shift = 0.f) {
  std::vector<float> xf = randn(size_t(R * K), seed);
  if (shift != 0.f)
    for (int64_t r = 0; r < R; r += 3)
      for (int64_t k = 0; k < K; ++k) xf[size_t(r * K + k)] += shift;
  Acts a;
  a.bf16 = test::to_bytes(xf, DType::BF16);
  a.f32.resize(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) a.f32[i] = float(test::value(a.bf16, DType::BF16, i));
  return a;
}

inline std::vector<double> as_doubles(const std::vector<uint8_t>& bytes, DType t, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = test::value(bytes, t, i);
  return v;
}

// y against the CPU backend's want, row by row: |y - want| <= tol (|want| + the row's RMS).
inline void expect_rows_near(const std::vector<double>& y, const std::vector<float>& want, int64_t R,
                             int64_t N, double tol, const std::string& what) {
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

// Rows an expert: 0, 1, 7, 127-129, 300 (11 experts; experts starting at rows that are not
// multiples of 4); a decode routing of 8 rows, at most 3 an expert.
inline const std::vector<int32_t> kMixedCounts = {0, 1, 7, 128, 0, 300, 127, 129, 2, 0, 65};
inline const std::vector<int32_t> kDecodeCounts = {1, 0, 0, 2, 1, 0, 0, 0, 1, 3, 0};

// Contiguous layout with `counts` rows an expert, per-expert bias, f32 and bf16 outputs (the direct
// and the TMA-store epilogues, clipped to each expert's rows) poisoned with NaN first; each output
// within tol_f32 / tol_bf16 (expect_rows_near) of the CPU backend's f32 output. kernel: a part of
// the grouped kernel's name.
inline void check_contiguous_vs_cpu(const PreparedExperts& gpu, const PreparedExperts& cpu,
                                    float act_shift, double tol_f32, double tol_bf16,
                                    const std::string& kernel,
                                    const std::vector<int32_t>& counts = kMixedCounts) {
  const int64_t E = int64_t(counts.size()), N = gpu.N(), K = gpu.K();
  ASSERT_EQ(gpu.num_experts(), E);
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  ASSERT_NE(gpu.kernel_name(R).find(kernel), std::string::npos) << gpu.kernel_name(R);
  const Acts x = make_acts(R, K, 9, act_shift);
  const std::vector<float> bias = randn(size_t(E * N), 3);
  std::vector<float> yc(size_t(R * N));
  Epilogue cep;
  cep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {E, N});
  grouped_linear(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {R, K}), cpu,
                 TensorView(yc.data(), DType::F32, {R, N}),
                 MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})), cep);
  const DeviceBuffer doff = test::upload(off), dx = test::upload(x.bf16), dbias = test::upload(bias);
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
    const auto y = as_doubles(test::download<uint8_t>(dy, dy.size()), yt, size_t(R * N));
    expect_rows_near(y, yc, R, N, yt == DType::F32 ? tol_f32 : tol_bf16, dtype_name(yt));
  }
}

// The few-token kernel's grouped form (decode shares; kernels/w8a8/sm90_skinny_grouped.cuh): each
// token tile forced (16, 32, 64) on the mixed counts (experts of many tiles), then the plan's own
// choice on the decode routing, whose few units are cut into K splits (name "..._split2": K must
// have >= 8 stages of 128) summed in partial slots. experts: 11 of them. kernel: the form's name
// before "_mt".
inline void check_few_token_form_vs_cpu(const std::vector<QuantizedWeight>& experts,
                                        PrepareOptions gpu_opts, const PrepareOptions& cpu_opts,
                                        float act_shift, double tol_f32, double tol_bf16,
                                        const std::string& kernel) {
  const PreparedExperts cpu = prepare_experts(experts, cpu_opts);
  for (int mt : {16, 32, 64}) {
    SCOPED_TRACE("token tile " + std::to_string(mt));
    gpu_opts.tuning.moe_token_tile = mt;
    check_contiguous_vs_cpu(prepare_experts(experts, gpu_opts), cpu, act_shift, tol_f32, tol_bf16,
                            kernel + "_mt" + std::to_string(mt));
  }
  gpu_opts.tuning.moe_token_tile = 0;
  check_contiguous_vs_cpu(prepare_experts(experts, gpu_opts), cpu, act_shift, tol_f32, tol_bf16,
                          kernel + "_mt16_split2", kDecodeCounts);
  // the tiles listed by the schedule kernel instead of the GEMM itself
  SCOPED_TRACE("schedule kernel");
  gpu_opts.tuning.moe_own_schedule = Toggle::Off;
  check_contiguous_vs_cpu(prepare_experts(experts, gpu_opts), cpu, act_shift, tol_f32, tol_bf16,
                          kernel + "_mt16_split2", kDecodeCounts);
  gpu_opts.tuning.moe_token_tile = 32;
  check_contiguous_vs_cpu(prepare_experts(experts, gpu_opts), cpu, act_shift, tol_f32, tol_bf16,
                          kernel + "_mt32");
}

// One expert (E = 1) over R = 300 rows, more than the skinny kernels serve: the grouped call's
// f32 output equals linear()'s on the same prepared weight bit for bit (the same quantizer, tile
// and per-block accumulation order). linear_opts may force the plain kernel.
inline void check_one_expert_equals_linear(const QuantizedWeight& w, const PrepareOptions& opts,
                                           const PrepareOptions& linear_opts, float act_shift) {
  const int64_t N = w.N, K = w.K, R = 300;
  const PreparedExperts pe = prepare_experts({w}, opts);
  const PreparedWeight pw = prepare(w, linear_opts);
  const Acts x = make_acts(R, K, 2, act_shift);
  const std::vector<int32_t> off = {0, int32_t(R)};
  DeviceBuffer dx = test::upload(x.bf16), doff = test::upload(off), a(size_t(R * N) * 4),
               b(size_t(R * N) * 4), ws(grouped_linear_workspace_size(pe, R)),
               lws(std::max<size_t>(linear_workspace_size(pw, R), 16));
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
  EXPECT_EQ(test::download<float>(a, size_t(R * N)), test::download<float>(b, size_t(R * N)));
}

// The masked layout under a CUDA graph, replayed with new counts (max_tokens 72: a full 64-row
// sub-tile takes the TMA store, the rest the clipped direct stores; experts start at rows 72 e);
// rows past each count keep their sentinel; then a count over max_tokens sets the error bit and
// writes nothing. x: [E * 72][K] activations.
inline void check_masked_graph_replays(const PreparedExperts& gpu, const PreparedExperts& cpu,
                                       const Acts& x, double tol) {
  const int64_t E = gpu.num_experts(), max = 72, N = gpu.N(), K = gpu.K();
  const std::vector<float> sentinel_f(size_t(E * max * N), -3.f);
  const std::vector<uint8_t> sentinel = test::to_bytes(sentinel_f, DType::BF16);
  DeviceBuffer dx = test::upload(x.bf16), dy = test::upload(sentinel), dcounts(E * 4), derr(16),
               ws(grouped_linear_workspace_size(gpu, E * max));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ExecContext ctx = test::on_stream(s, ws);
  MoeRows rows = MoeRows::masked(dev(dcounts, DType::I32, {E}), max);
  rows.error = dev(derr, DType::I32, {1});
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  grouped_linear(dev(dx, DType::BF16, {E, max, K}), gpu, dev(dy, DType::BF16, {E, max, N}), rows, {}, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<std::vector<int32_t>> replays = {std::vector<int32_t>(size_t(E), 0),
                                               std::vector<int32_t>(size_t(E), 0),
                                               std::vector<int32_t>(size_t(E), 72)};
  const int32_t mixed[6] = {72, 0, 65, 3, 64, 1};
  for (int64_t e = 0; e < E; ++e) replays[0][size_t(e)] = mixed[e % 6];
  replays[1][size_t(E - 1)] = 1;
  for (const std::vector<int32_t>& counts : replays) {
    dcounts.copy_from_host(counts.data(), E * 4);
    dy.copy_from_host(sentinel.data(), sentinel.size());
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> yc(sentinel_f);
    grouped_linear(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {E, max, K}), cpu,
                   TensorView(yc.data(), DType::F32, {E, max, N}),
                   MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max));
    const auto y = as_doubles(test::download<uint8_t>(dy, dy.size()), DType::BF16, sentinel_f.size());
    expect_rows_near(y, yc, E * max, N, tol, "masked");
    ASSERT_EQ(test::download<int32_t>(derr, 1)[0], 0);
  }
  std::vector<int32_t> bad(size_t(E), 0);
  bad[0] = 1;
  bad[size_t(E > 1 ? 1 : 0)] = 73;
  dcounts.copy_from_host(bad.data(), E * 4);
  dy.copy_from_host(sentinel.data(), sentinel.size());
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(test::download<int32_t>(derr, 1)[0], kMoeErrorCounts);
  EXPECT_EQ(test::download<uint8_t>(dy, sentinel.size()), sentinel);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Offsets that do not end at the row count (10 rows, the offsets end at 9): error bit, y untouched.
inline void check_bad_offsets_refused(const PreparedExperts& gpu) {
  const int64_t E = gpu.num_experts(), N = gpu.N(), K = gpu.K(), R = 10;
  ASSERT_EQ(E, 4);
  const std::vector<float> sentinel(size_t(R * N), 5.f);
  const std::vector<int32_t> off = {0, 3, 5, 8, 9};
  DeviceBuffer dx = test::upload(randn(size_t(R * K), 1)), dy = test::upload(sentinel),
               doff = test::upload(off), derr(16), ws(grouped_linear_workspace_size(gpu, R));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  MoeRows rows = MoeRows::contiguous(dev(doff, DType::I32, {E + 1}));
  rows.error = dev(derr, DType::I32, {1});
  grouped_linear(dev(dx, DType::F32, {R, K}), gpu, dev(dy, DType::F32, {R, N}), rows, {}, ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::download<int32_t>(derr, 1)[0], kMoeErrorOffsets);
  EXPECT_EQ(test::download<float>(dy, sentinel.size()), sentinel);
}

// The whole MoE MLP (routing, gather, grouped gate_up, SiLU * up, grouped down, weighted sum) on
// CUDA against the CPU backend's, bf16 activations of T = 203 tokens, top-4 of E = 16 experts (2
// idle): the relative RMS error. gate, up: [E] of [I][H]; down: [E] of [H][I].
inline double mlp_error_vs_cpu(const std::vector<QuantizedWeight>& gate,
                               const std::vector<QuantizedWeight>& up,
                               const std::vector<QuantizedWeight>& down, const PrepareOptions& gpu_opts,
                               const PrepareOptions& cpu_opts, float act_shift) {
  const int64_t E = int64_t(gate.size()), T = 203, k = 4, H = gate[0].K;
  std::vector<QuantizedWeight> gu;
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const PreparedExperts ggu = prepare_experts(gu, gpu_opts), gdown = prepare_experts(down, gpu_opts),
                        cgu = prepare_experts(gu, cpu_opts), cdown = prepare_experts(down, cpu_opts);
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> w(size_t(T * k));
  for (int64_t t = 0; t < T; ++t)  // distinct experts per token (offsets 0, 3, 6, 9 mod E - 2)
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = int32_t((t * 7 + t / 3 + 3 * j) % (E - 2));
      w[size_t(t * k + j)] = 0.2f + 0.05f * float(j);
    }
  const Acts x = make_acts(T, H, 4, act_shift);
  std::vector<float> yc(size_t(T * H));
  moe_mlp(TensorView(const_cast<float*>(x.f32.data()), DType::F32, {T, H}),
          TensorView(ids.data(), DType::I32, {T, k}), TensorView(w.data(), DType::F32, {T, k}), cgu,
          cdown, TensorView(yc.data(), DType::F32, {T, H}));
  DeviceBuffer dx = test::upload(x.bf16), dids = test::upload(ids), dw = test::upload(w),
               dy(size_t(T * H) * 2), derr(16), mws(moe_mlp_workspace_size(ggu, gdown, T, k, DType::BF16));
  EXPECT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = mws.data();
  ctx.workspace_bytes = mws.size();
  moe_mlp(dev(dx, DType::BF16, {T, H}), dev(dids, DType::I32, {T, k}), dev(dw, DType::F32, {T, k}), ggu, gdown,
          dev(dy, DType::BF16, {T, H}), MoeActivation::Silu, dev(derr, DType::I32, {1}), ctx);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::download<int32_t>(derr, 1)[0], 0);
  const auto y = as_doubles(test::download<uint8_t>(dy, dy.size()), DType::BF16, size_t(T * H));
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - yc[i]) * (y[i] - yc[i]);
    den += double(yc[i]) * yc[i];
  }
  return std::sqrt(num / den);
}

}  // namespace mixq::moe_test
