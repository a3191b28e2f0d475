// GGUF block weights at their native width on CUDA (src/cuda/kernels/ggml/): every ggml type
// mixq reads, both paths, against the float64 references of tests/ggml_test_data.hpp, at odd N,
// K with idle lanes (13 chunks) and long rows, M across every GEMV instance, the tensor-core
// kernel's token tiles and K splits, and the cuBLAS path,
// f32 / f16 / bf16 activations and outputs, strided X and Y, bias and clamp, CUDA graphs.
//
// Tolerances (max abs error / max abs reference):
//   q8 GEMV and tensor-core kernels,     1e-5 vs float64 of the same q8 activations,
//   f32 in and out
//                                        2e-2 vs the float64 product itself
//   dequantize + cuBLAS, f32              1e-5 vs float64 (the weights are ggml's exact decode)
//   dequantizing tensor-core kernel       2e-3 (f16) / 1e-2 (bf16) vs float64 of the rounded X;
//   (16-bit X only)                       where it forms the weights through f32 (bf16, 8-bit
//                                         codes), 1e-4 vs dequantize + cuBLAS (same weights)
//   16-bit activations / outputs          references from the rounded X; 1e-2 (bf16) / 2e-3
//                                         (f16) for the output rounding and 16-bit weights
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ggml_test_data.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/device_vectors.hpp"
#include "gpu/host_data.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"

using namespace mixq;
using namespace mixq::test::ggml;

namespace {

PrepareOptions cuda_opts(const std::string& force = "", const std::string& tune = "") {
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.force_kernel = force;
  if (!tune.empty()) o.tuning = Tuning::parse(tune);
  return o;
}

// x rounded to dtype t (as the device sees it), back in f32.
std::vector<float> rounded(const std::vector<float>& x, DType t) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    r[i] = t == DType::F16 ? f16_to_f32(f32_to_f16(x[i]))
           : t == DType::BF16 ? bf16_to_f32(f32_to_bf16(x[i])) : x[i];
  return r;
}

using test::to_bytes;
using test::value;

struct RunOpts {
  DType xt = DType::F32, yt = DType::F32;
  int64_t ldx_pad = 0, ldy_pad = 0;
  std::vector<float> bias;  // empty: none (f16 on the device)
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

// Runs y = x Wᵀ on the device with y poisoned (NaN) first; returns y [M][N] in f32 and checks that
// the padding columns of a strided y were not written.
std::vector<float> run(const PreparedWeight& pw, const std::vector<float>& x, int64_t M,
                       const RunOpts& o = {}) {
  const int64_t N = pw.N(), K = pw.K();
  const int64_t ldx = K + o.ldx_pad, ldy = N + o.ldy_pad;
  std::vector<float> xs(size_t(M * ldx), 0.f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xs[m * ldx + k] = x[m * K + k];
  const std::vector<uint8_t> xb = to_bytes(xs, o.xt);
  const size_t yeb = o.yt == DType::F32 ? 4 : 2;
  DeviceBuffer dx(xb.size()), dy(size_t(M * ldy) * yeb), db(o.bias.size() * 2 + 16);
  dx.copy_from_host(xb.data(), xb.size());
  std::vector<uint8_t> poison(size_t(M * ldy) * yeb, 0xFF);  // NaN in every float type
  dy.copy_from_host(poison.data(), poison.size());
  Epilogue ep;
  ep.clamp_lo = o.lo;
  ep.clamp_hi = o.hi;
  if (!o.bias.empty()) {
    const std::vector<uint8_t> bb = to_bytes(o.bias, DType::F16);
    db.copy_from_host(bb.data(), bb.size());
    ep.bias = TensorView(db.data(), DType::F16, {N}, Device::CUDA);
  }
  const TensorView xv = TensorView::strided(dx.data(), o.xt, {M, K}, {ldx, 1}, Device::CUDA);
  const TensorView yv = TensorView::strided(dy.data(), o.yt, {M, N}, {ldy, 1}, Device::CUDA);
  linear(xv, pw, yv, ep, ExecContext{});
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> yb(size_t(M * ldy) * yeb);
  dy.copy_to_host(yb.data(), yb.size());
  std::vector<float> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) y[m * N + n] = value(yb, o.yt, size_t(m * ldy + n));
    for (int64_t n = N; n < ldy; ++n)
      EXPECT_TRUE(std::isnan(value(yb, o.yt, size_t(m * ldy + n)))) << "y padding written";
  }
  return y;
}

void check_type(const TypeCase& tc, int64_t N, int64_t K, const std::vector<int64_t>& Ms,
                uint32_t seed) {
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, seed);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  const std::string tname = formats::ggml_type_name(uint32_t(tc.type));
  const PreparedWeight pw = prepare(w, cuda_opts());
  const PreparedWeight gemv = prepare(w, cuda_opts("cuda_ggml_q8"));
  const PreparedWeight mma = prepare(w, cuda_opts("cuda_ggml_mma"));
  const PreparedWeight deq = prepare(w, cuda_opts("cuda_ggml_dequant_cublas"));
  const PreparedWeight hmma = prepare(w, cuda_opts("cuda_ggml_hmma"));
  const PreparedWeight stream = prepare(w, cuda_opts("cuda_ggml_stream"));
  for (int64_t M : Ms) {
    SCOPED_TRACE(tname + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                 " M=" + std::to_string(M));
    const std::vector<float> x = random_x(M, K, seed + uint32_t(M));
    const Refs ref = reference(w, blocks, tc.type, x, M);
    const int64_t gemv_rows = tc.type == formats::GgmlType::Q4_0 || tc.type == formats::GgmlType::Q4_1 ? 3 : 4;
    EXPECT_EQ(pw.kernel_name(M, DType::F32), M <= gemv_rows ? "cuda_ggml_q8_" + tname
                                 : M <= 32 ? "cuda_ggml_mma_" + tname : std::string("cuda_ggml_dequant_cublas"));
    const bool four_bit = tc.type == formats::GgmlType::Q4_0 || tc.type == formats::GgmlType::Q4_1 ||
                          tc.type == formats::GgmlType::IQ4_NL || tc.type == formats::GgmlType::Q4_K ||
                          tc.type == formats::GgmlType::IQ4_XS;
    EXPECT_EQ(pw.kernel_name(M, DType::BF16), M <= gemv_rows ? "cuda_ggml_q8_" + tname
                                 : M <= 8 ? "cuda_ggml_stream_" + tname
                                 : M <= (four_bit ? 128 : 96) ? "cuda_ggml_hmma_" + tname
                                 : std::string("cuda_ggml_dequant_cublas"));
    // The two q8 kernels: the q8 emulation within f32 rounding, float64 within the q8 tolerance.
    for (const PreparedWeight* q : {&gemv, &mma}) {
      if (q == &gemv && M > 16) continue;
      const std::vector<float> y = run(*q, x, M);
      EXPECT_LE(max_err(y, ref.q8) / ref.max_q8, 1e-5) << q->kernel_name(M) << " vs the q8 emulation";
      EXPECT_LE(max_err(y, ref.exact) / ref.max_exact, 2e-2) << q->kernel_name(M) << " vs float64";
    }
    // The cuBLAS path: ggml's exact decode in f32.
    EXPECT_LE(max_err(run(deq, x, M), ref.exact) / ref.max_exact, 1e-5) << "dequant + cuBLAS";
    // The default plan runs one of the three.
    const bool default_q8 = M <= 32;
    EXPECT_LE(max_err(run(pw, x, M), default_q8 ? ref.q8 : ref.exact) /
                  (default_q8 ? ref.max_q8 : ref.max_exact), 1e-5) << pw.kernel_name(M, DType::F32);
    // The dequantizing tensor-core kernel, 16-bit X: the cuBLAS path's 16-bit weights, other sums.
    for (const DType xt : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string("x ") + dtype_name(xt));
      RunOpts o;
      o.xt = xt;
      const std::vector<float> xr = rounded(x, xt);
      const Refs rr = reference(w, blocks, tc.type, xr, M);
      const std::vector<float> yh = run(hmma, xr, M, o);
      EXPECT_EQ(hmma.kernel_name(M, xt), "cuda_ggml_hmma_" + tname);
      EXPECT_LE(max_err(yh, rr.exact) / rr.max_exact, xt == DType::BF16 ? 1e-2 : 2e-3) << "hmma vs float64";
      // the few-token kernel forms the same 16-bit weights (1..8 tokens; more: the plan's kernel)
      if (M <= 8) {
        EXPECT_EQ(stream.kernel_name(M, xt), "cuda_ggml_stream_" + tname);
        const std::vector<float> ys = run(stream, xr, M, o);
        EXPECT_LE(max_err(ys, rr.exact) / rr.max_exact, xt == DType::BF16 ? 1e-2 : 2e-3) << "stream vs float64";
      }
      // bf16 with 8-bit codes forms the weights through f32 as the dequantizer does: the same
      // 16-bit weights as the cuBLAS path, only the order of the f32 sums differs
      const bool eight_bit = tc.type == formats::GgmlType::Q8_0 || tc.type == formats::GgmlType::IQ4_NL ||
                             tc.type == formats::GgmlType::IQ4_XS;
      if (xt == DType::BF16 && eight_bit) {
        const std::vector<float> yd = run(deq, xr, M, o);
        EXPECT_LE(max_err(yh, std::vector<double>(yd.begin(), yd.end())) / rr.max_exact, 1e-4)
            << "hmma vs dequant + cuBLAS";
      }
    }
  }
}

class CudaGgmlNativeTypes : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaGgmlNativeTypes, BothPathsMatchFloat64) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[GetParam()];
  const int64_t qk = formats::ggml_type_info(uint32_t(tc.type))->block_elems;
  // 13 chunks of 32 (lanes 13..31 idle) or 24 (three super-blocks); N = 77 rows: partial CTAs
  // at every rows-per-warp.
  const int64_t K = qk == 32 ? 416 : 768;
  check_type(tc, 77, K, {1, 2, 3, 4, 5, 7, 8, 11, 16, 17, 33, 300}, 3000 + uint32_t(GetParam()));
}

TEST_P(CudaGgmlNativeTypes, LongRows) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[GetParam()];
  check_type(tc, 33, 14336, {1, 6, 16, 70}, 4000 + uint32_t(GetParam()));
}

// One token over a few thousand rows (odd): where a row a warp spills a partial second wave over the
// GPU's block slots and two rows a warp fit in one, the GEMV runs the single token through the
// two-token instance (on a 132-SM Hopper here: Q8_0 and Q6_K); its unstored second token must not
// disturb the first.
TEST_P(CudaGgmlNativeTypes, OneTokenOverManyRows) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[GetParam()];
  check_type(tc, 4099, 512, {1, 2}, 6000 + uint32_t(GetParam()));
}

// Both GEMV forms of one token, forced, agree with the float64 reference of the q8 activations.
TEST(CudaGgmlNative, OneTokenRowsPerWarpForced) {
  SKIP_WITHOUT_GPU();
  for (const TypeCase& tc : all_types()) {
    if (tc.type != formats::GgmlType::Q4_0 && tc.type != formats::GgmlType::Q6_K) continue;
    const int64_t N = 301, K = 512;
    const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 77);
    const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
    const std::vector<float> x = random_x(1, K, 78);
    const Refs ref = reference(w, blocks, tc.type, x, 1);
    for (const char* t : {"cuda_ggml_gemv_pairs=on", "cuda_ggml_gemv_pairs=off"}) {
      const std::vector<float> y = run(prepare(w, cuda_opts("", t)), x, 1);
      EXPECT_LE(max_err(y, ref.q8) / ref.max_q8, 1e-5) << t;
    }
  }
}

// Rows whose chunk count is not a multiple of the tensor-core kernel's step (203 chunks of 32, or
// 25 super-blocks: odd for the 16-chunk steps), long enough to be split over K.
TEST_P(CudaGgmlNativeTypes, SplitsEndInPartialSteps) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[GetParam()];
  const int64_t qk = formats::ggml_type_info(uint32_t(tc.type))->block_elems;
  check_type(tc, 77, qk == 32 ? 32 * 203 : 256 * 25, {1, 8, 9, 64}, 5000 + uint32_t(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGgmlNativeTypes, ::testing::Range<size_t>(0, all_types().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return std::string(formats::ggml_type_name(uint32_t(all_types()[i.param].type)));
                         });

// 16-bit activations and outputs, strided X and Y, bias and clamp, on both paths.
TEST(CudaGgmlNative, DtypesStridesAndEpilogue) {
  SKIP_WITHOUT_GPU();
  for (size_t ti : {size_t(0), size_t(8), size_t(10)}) {  // Q4_0, Q4_K, Q6_K
    const TypeCase& tc = all_types()[ti];
    const int64_t N = 45, K = 512;
    const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 50 + uint32_t(ti));
    const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
    const PreparedWeight pw = prepare(w, cuda_opts());
    const PreparedWeight deq = prepare(w, cuda_opts("cuda_ggml_dequant_cublas"));
    std::vector<float> bias(static_cast<size_t>(N), 0.f);
    for (int64_t n = 0; n < N; ++n) bias[n] = f16_to_f32(f32_to_f16(0.25f * float(n % 7) - 0.7f));
    for (const DType xt : {DType::F16, DType::BF16, DType::F32})
      for (const DType yt : {DType::F16, DType::BF16, DType::F32})
        for (const int64_t M : {3, 16, 70}) {
          SCOPED_TRACE(std::string(formats::ggml_type_name(uint32_t(tc.type))) + " x " +
                       dtype_name(xt) + " y " + dtype_name(yt) + " M=" + std::to_string(M));
          const std::vector<float> x = rounded(random_x(M, K, 60 + uint32_t(M)), xt);
          const Refs ref = reference(w, blocks, tc.type, x, M);
          RunOpts o;
          o.xt = xt;
          o.yt = yt;
          o.ldx_pad = 24;
          o.ldy_pad = 5;
          o.bias = bias;
          o.lo = -0.5f * float(ref.max_exact);
          o.hi = 0.5f * float(ref.max_exact);
          for (const bool exact : {false, true}) {
            // the default plan: the q8 kernels (the GEMV; f32 X, the q8 tensor-core kernel up to
            // 32 tokens), else the exactly decoded weights of the dequantizing tensor-core kernel
            // (16-bit X) or dequantize + cuBLAS (f32 X above 32 tokens: the exact run's)
            if (M > 32 && !exact && xt == DType::F32) continue;
            const bool q8 = !exact && (M <= 3 || (xt == DType::F32 && M <= 32));
            const std::vector<float> y = run(exact ? deq : pw, x, M, o);
            const std::vector<double>& r = q8 ? ref.q8 : ref.exact;
            std::vector<double> want(r.size());
            double top = 0;
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const double v = std::min<double>(o.hi, std::max<double>(o.lo, r[m * N + n] + bias[n]));
                want[m * N + n] = v;
                top = std::max(top, std::fabs(v));
              }
            const bool any16 = xt != DType::F32 || yt != DType::F32;
            const double tol = !any16 ? 1e-5 : (xt == DType::BF16 || yt == DType::BF16) ? 1e-2 : 2e-3;
            EXPECT_LE(max_err(y, want) / top, tol) << (exact ? deq : pw).kernel_name(M);
          }
        }
  }
}

// f16 X on weights at either end of f16's range (Q4_0 scales |d| in [2^-8, 2^-4) times 2^-14: f16
// subnormal weights; times 2^17: |w| up to 2^16, past f16's 65504): the dequantizing kernel forms
// 2^e w in f16 with e from the tensor's bound, so neither precision nor range is lost.
TEST(CudaGgmlNative, F16WeightsAtTheEndsOfTheRange) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[0];  // Q4_0: 18-byte blocks, f16 scale first
  const int64_t N = 70, K = 1024, M = 48;
  for (const int shift : {-14, 17}) {
    SCOPED_TRACE("scales x 2^" + std::to_string(shift));
    std::vector<uint8_t> blocks = random_blocks(tc, N, K, 23);
    for (size_t b = 0; b + 18 <= blocks.size(); b += 18) {
      uint16_t h;
      std::memcpy(&h, &blocks[b], 2);
      h = f32_to_f16(std::ldexp(f16_to_f32(h), shift));
      std::memcpy(&blocks[b], &h, 2);
    }
    const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
    const PreparedWeight pw = prepare(w, cuda_opts("cuda_ggml_hmma"));
    const std::vector<float> x = rounded(random_x(M, K, 24), DType::F16);
    const Refs ref = reference(w, blocks, tc.type, x, M);
    RunOpts o;
    o.xt = DType::F16;
    EXPECT_LE(max_err(run(pw, x, M, o), ref.exact) / ref.max_exact, 2e-3);
  }
}

// Captures `calls` linear calls (each chained on the one before: PDL on sm_90) of M rows of xt
// activations into a CUDA graph after an eager call, then replays it three times on new inputs
// with y poisoned; checks each against float64 (q8 activations for f32 X, the 16-bit tolerance
// for f16 X).
void check_graph_replay(const PreparedWeight& pw, const QuantizedWeight& w, const std::vector<uint8_t>& blocks,
                        GgmlType type, int64_t M, DType xt, int calls) {
  SCOPED_TRACE("graph M=" + std::to_string(M) + " x " + dtype_name(xt));
  const int64_t N = pw.N(), K = pw.K();
  DeviceBuffer dx(size_t(M * K) * 4), dy(size_t(M * N) * 4), ws(linear_workspace_size(pw, M) + 16);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ExecContext ctx = test::on_stream(s, ws);
  TensorView xv(dx.data(), xt, {M, K}, Device::CUDA), yv(dy.data(), DType::F32, {M, N}, Device::CUDA);
  const std::vector<uint8_t> x0 = to_bytes(random_x(M, K, 1), xt);
  dx.copy_from_host(x0.data(), x0.size());
  linear(xv, pw, yv, Epilogue::none(), ctx);  // eager first (module loading), then capture
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int c = 0; c < calls; ++c) linear(xv, pw, yv, Epilogue::none(), ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint32_t rep = 0; rep < 3; ++rep) {
    const std::vector<float> x = rounded(random_x(M, K, 100 + rep), xt);
    const std::vector<uint8_t> xb = to_bytes(x, xt);
    dx.copy_from_host(xb.data(), xb.size());
    std::vector<float> poison(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
    dy.copy_from_host(poison.data(), poison.size() * 4);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> y(size_t(M * N));
    dy.copy_to_host(y.data(), y.size() * 4);
    const Refs ref = reference(w, blocks, type, x, M);
    if (xt == DType::F32)
      EXPECT_LE(max_err(y, ref.q8) / ref.max_q8, 1e-5) << "replay " << rep;
    else
      EXPECT_LE(max_err(y, ref.exact) / ref.max_exact, 2e-3) << "replay " << rep;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// The few-token kernel at its edges: rows of one to three chunk groups (warps of a CTA with no
// group, lanes past the row's last chunk), odd N, 1..8 tokens, both 16-bit
// X types; and rows long enough for K splits (the finalize pass after it), eager and replayed from
// a CUDA graph on new inputs.
TEST(CudaGgmlNative, FewTokenKernelEdgesAndReplay) {
  SKIP_WITHOUT_GPU();
  struct Case {
    size_t type;
    int64_t N, K;
  };
  for (const Case c : {Case{0, 77, 32}, Case{0, 77, 64}, Case{0, 33, 416}, Case{8, 45, 256},
                       Case{10, 19, 512}, Case{4, 77, 160}}) {  // Q4_0, Q4_K, Q6_K, Q8_0
    const TypeCase& tc = all_types()[c.type];
    const std::vector<uint8_t> blocks = random_blocks(tc, c.N, c.K, 31 + uint32_t(c.K));
    const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), c.N, c.K, "test");
    const PreparedWeight pw = prepare(w, cuda_opts("cuda_ggml_stream"));
    for (const DType xt : {DType::F16, DType::BF16})
      for (const int64_t M : {1, 2, 5, 8}) {
        SCOPED_TRACE(std::string(formats::ggml_type_name(uint32_t(tc.type))) + " N=" + std::to_string(c.N) +
                     " K=" + std::to_string(c.K) + " M=" + std::to_string(M) + " x " + dtype_name(xt));
        const std::vector<float> x = rounded(random_x(M, c.K, 40 + uint32_t(M)), xt);
        const Refs ref = reference(w, blocks, tc.type, x, M);
        RunOpts o;
        o.xt = xt;
        o.ldx_pad = 8;
        EXPECT_LE(max_err(run(pw, x, M, o), ref.exact) / ref.max_exact, xt == DType::BF16 ? 1e-2 : 2e-3);
      }
  }
  // K = 8192 over 40 rows: 3 row tiles, so the plan splits K; graph replay on new inputs
  const TypeCase& tc = all_types()[8];  // Q4_K
  const int64_t N = 40, K = 8192;
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 92);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  const PreparedWeight pw = prepare(w, cuda_opts("cuda_ggml_stream"));
  for (const int64_t M : {2, 7}) {
    ASSERT_EQ(pw.kernel_name(M, DType::F16), "cuda_ggml_stream_Q4_K");
    ASSERT_GT(linear_workspace_size(pw, M), size_t(0)) << "expected a K split";
    check_graph_replay(pw, w, blocks, tc.type, M, DType::F16, 2);
  }
}

// 16-bit X whose rows are not 16-byte aligned (ldx = K + 3) cannot feed the dequantizing kernel's
// 16-byte copies: the call falls back to dequantize + cuBLAS, with the same results.
TEST(CudaGgmlNative, UnalignedRowsFallBack) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[8];  // Q4_K
  const int64_t N = 130, K = 512, M = 40;
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 17);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  const PreparedWeight pw = prepare(w, cuda_opts());
  const PreparedWeight forced = prepare(w, cuda_opts("cuda_ggml_hmma"));
  const std::vector<float> x = rounded(random_x(M, K, 18), DType::F16);
  const Refs ref = reference(w, blocks, tc.type, x, M);
  for (const int64_t pad : {int64_t(0), int64_t(3)})
    for (const PreparedWeight* p : {&pw, &forced}) {
      RunOpts o;
      o.xt = DType::F16;
      o.ldx_pad = pad;
      EXPECT_LE(max_err(run(*p, x, M, o), ref.exact) / ref.max_exact, 2e-3) << "ldx pad " << pad;
    }
}

// Dequantize + cuBLAS over several row chunks: 1 MB holds 341 rows of K = 768 in f32, so the chunks
// are 256 rows (whole 128-row groups: 256, 256, 256, 232 of N = 1000), each GEMM writing its own
// column range of Y: f32, and f16 (X's type: cuBLAS writes the strided Y itself) with bias and clamp.
TEST(CudaGgmlNative, DequantChunksCoverEveryRow) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[8];  // Q4_K
  const int64_t N = 1000, K = 768, M = 37;
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 23);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  const PreparedWeight one = prepare(w, cuda_opts("cuda_ggml_dequant_cublas"));
  const PreparedWeight chunked = prepare(w, cuda_opts("cuda_ggml_dequant_cublas", "wo_dequant_chunk_mb=1"));
  const std::vector<float> x = rounded(random_x(M, K, 24), DType::F16);
  const Refs ref = reference(w, blocks, tc.type, x, M);
  EXPECT_LE(max_err(run(chunked, x, M), ref.exact) / ref.max_exact, 1e-5) << "f32";
  RunOpts o;
  o.xt = o.yt = DType::F16;
  o.ldy_pad = 5;
  o.bias.assign(size_t(N), 0.f);
  for (int64_t n = 0; n < N; ++n) o.bias[size_t(n)] = float(n % 7) * 0.25f - 0.75f;
  o.lo = -0.5f * float(ref.max_exact);
  o.hi = 0.5f * float(ref.max_exact);
  std::vector<double> expect(ref.exact.size());
  for (size_t i = 0; i < expect.size(); ++i)
    expect[i] = std::min<double>(o.hi, std::max<double>(o.lo, ref.exact[i] + o.bias[i % size_t(N)]));
  EXPECT_LE(max_err(run(one, x, M, o), expect) / ref.max_exact, 2e-3) << "f16, one chunk";
  EXPECT_LE(max_err(run(chunked, x, M, o), expect) / ref.max_exact, 2e-3) << "f16, four chunks";
}

// A captured M = 1 call (quantizer + PDL GEMV) replays on new inputs.
TEST(CudaGgmlNative, GraphReplaysOnNewInputs) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[8];  // Q4_K
  const int64_t N = 300, K = 1024;
  const std::vector<uint8_t> blocks = random_blocks(tc, N, K, 91);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), N, K, "test");
  const PreparedWeight pw = prepare(w, cuda_opts());
  for (const int64_t M : {1, 9}) check_graph_replay(pw, w, blocks, tc.type, M, DType::F32, 1);
}

TEST(CudaGgmlNative, OptionsChooseTheForm) {
  SKIP_WITHOUT_GPU();
  const TypeCase& tc = all_types()[8];  // Q4_K
  const std::vector<uint8_t> blocks = random_blocks(tc, 40, 512, 7);
  const QuantizedWeight w = formats::ggml_to_canonical(tc.type, blocks.data(), 40, 512, "test");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(1), "cuda_ggml_q8_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(4), "cuda_ggml_q8_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(5), "cuda_ggml_stream_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(8, DType::BF16), "cuda_ggml_stream_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(9), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_stream_max_rows=6")).kernel_name(7), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_stream_max_rows=-1")).kernel_name(5), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_stream")).kernel_name(1), "cuda_ggml_stream_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_stream")).kernel_name(9), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_stream")).kernel_name(2, DType::F32), "cuda_ggml_q8_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(128, DType::BF16), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(129), "cuda_ggml_dequant_cublas");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(5, DType::F32), "cuda_ggml_mma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(32, DType::F32), "cuda_ggml_mma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts()).kernel_name(33, DType::F32), "cuda_ggml_dequant_cublas");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_hmma_max_rows=40")).kernel_name(41), "cuda_ggml_dequant_cublas");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_hmma_max_rows=300")).kernel_name(300), "cuda_ggml_hmma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_hmma")).kernel_name(1), "cuda_ggml_hmma_Q4_K");
  // forced with f32 X, the dequantizing kernel gives way to the plan for f32
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_hmma")).kernel_name(1, DType::F32), "cuda_ggml_q8_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_q8_max_rows=2")).kernel_name(3), "cuda_ggml_stream_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_q8_max_rows=2")).kernel_name(3, DType::F32), "cuda_ggml_mma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("", "cuda_ggml_mma_max_rows=64")).kernel_name(64), "cuda_ggml_mma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_q8")).kernel_name(16), "cuda_ggml_q8_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_mma")).kernel_name(1), "cuda_ggml_mma_Q4_K");
  EXPECT_EQ(prepare(w, cuda_opts("cuda_ggml_dequant_cublas")).kernel_name(1), "cuda_ggml_dequant_cublas");
  // Off, or a forced canonical kernel: the canonical weight-only form.
  const std::string canon = prepare(w, cuda_opts("", "cuda_ggml_native=off")).kernel_name(1);
  EXPECT_EQ(canon.find("cuda_ggml"), std::string::npos) << canon;
  const std::string forced = prepare(w, cuda_opts("wo_dequant_cublas")).kernel_name(1);
  EXPECT_EQ(forced.find("cuda_ggml"), std::string::npos) << forced;
  // An unknown forced kernel of the native family names itself.
  try {
    (void)prepare(w, cuda_opts("cuda_ggml_bogus"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_ggml_bogus"), std::string::npos) << e.what();
  }
  // A workspace smaller than the call needs is an error naming the sizes.
  const PreparedWeight pw = prepare(w, cuda_opts());
  DeviceBuffer dx(4 * 512), dy(4 * 40), ws(64);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = 64;
  try {
    linear(TensorView(dx.data(), DType::F32, {1, 512}, Device::CUDA), pw,
           TensorView(dy.data(), DType::F32, {1, 40}, Device::CUDA),
           Epilogue::none(), ctx);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

}  // namespace
