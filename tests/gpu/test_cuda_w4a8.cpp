// CUDA W4A8 linear (4-bit weights in per-row groups of 128 times e4m3 activations quantized per
// token per 128 on the GPU; the Hopper wgmma kernel's e4m3 instances) against
// ref::linear_fp8_block, the float64 oracle on the same quantized inputs. Skipped (visibly)
// without a compute capability 9.0 GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda/backend/moe_wo_view.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/launch/act_quant.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/host_data.hpp"
#include "gpu/linear_call.hpp"
#include "gpu/test_tuning.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "unit/test_util.hpp"

using namespace mixq;

namespace {

using test::randn;
using test::to_bytes;
using test::value;

struct Case {
  int64_t M, N, K;
  std::string scheme = "w4g128";  // or w4g128zp
  DType xt = DType::BF16, yt = DType::BF16;
  bool bias = false;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool caller_workspace = false;
  std::string tuning;  // Tuning keys ("wo_token_tile=64")
  int same_zero = -1;  // w4g128zp: every group's zero point set to this (0 ... 15); 16: none (w = s u)
};

std::string name(const Case& c) {
  return c.scheme + " M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" + std::to_string(c.K) +
         " x=" + dtype_name(c.xt) + " y=" + dtype_name(c.yt) + (c.bias ? " bias" : "") + " clamp [" +
         std::to_string(c.lo) + ", " + std::to_string(c.hi) + "]" + (c.caller_workspace ? " caller workspace" : "") +
         (c.tuning.empty() ? "" : " " + c.tuning) +
         (c.same_zero < 0 ? "" : c.same_zero == 16 ? " unsigned codes" : " zero points all " + std::to_string(c.same_zero));
}

// same_zero (w4g128zp only): every group's zero point replaced by it, the form whose zero point the
// activation factors carry (16: the zero points dropped, unsigned codes w = s u, a shared zero of 0).
QuantizedWeight make_weight(int64_t N, int64_t K, const std::string& scheme, uint32_t seed, int same_zero = -1) {
  std::vector<float> wf = randn(size_t(N * K), seed, 0.05f);
  // groups with very different magnitudes and a shifted mean (the zero points matter)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      wf[size_t(n * K + k)] = wf[size_t(n * K + k)] * float(1 + (n + k / 128) % 5) + 0.01f * float(n % 3);
  QuantizedWeight w = quantize_weight(TensorView(wf.data(), DType::F32, {N, K}), parse_scheme(scheme));
  if (same_zero >= 0) {
    EXPECT_EQ(w.zero_kind, ZeroKind::ZeroPoint) << scheme;
    if (same_zero == 16) {
      w.zero_kind = ZeroKind::None;
      w.zeros.clear();
    } else {
      const int32_t z = same_zero;
      for (size_t i = 0; i + 4 <= w.zeros.size(); i += 4) std::memcpy(&w.zeros[i], &z, 4);
    }
  }
  return w;
}

PrepareOptions w4a8_options(const std::string& tuning = "") {
  PrepareOptions o = test::with_tuning({}, tuning);
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Fp8Block;
  return o;
}

void run(const Case& c, uint32_t seed) {
  SCOPED_TRACE(name(c));
  const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, seed, c.same_zero);
  const PreparedWeight pw = prepare(w, w4a8_options(c.tuning));
  const std::string kname = pw.kernel_name(c.M);
  EXPECT_NE(kname.find("sm90_wo_ws<e4m3,u4f8"), std::string::npos) << kname;
  const int64_t N = c.N;

  const test::LinearCall call(c.M, c.K, N, c.xt, c.yt, c.bias, c.lo, c.hi, seed);
  const std::vector<uint8_t> y = call.run(pw, c.caller_workspace, true);  // garbage tickets and codes
  ASSERT_FALSE(y.empty());

  std::vector<double> ref(size_t(c.M * N));
  const Epilogue rep = call.host_epilogue();
  ref::linear_fp8_block(TensorView(const_cast<uint8_t*>(call.xb.data()), c.xt, {c.M, c.K}), w,
                        TensorView(ref.data(), DType::F64, {c.M, N}), rep);
  // The same e4m3 activations and integer weights on both sides: only the summation (the FP8
  // MMA keeps ~14 bits within a 128-wide block, its sums are folded in f32) and the output
  // rounding differ. Each output is held to its row's RMS: a sum that cancels keeps the rounding
  // of its terms.
  const double out_eps = c.yt == DType::BF16 ? 8e-3 : 2e-3;
  double sdd = 0, sxx = 0;
  int64_t worst = -1;
  double worst_err = 0;
  for (int64_t m = 0; m < c.M; ++m) {
    double rms = 0;
    for (int64_t n = 0; n < N; ++n) rms += ref[size_t(m * N + n)] * ref[size_t(m * N + n)];
    rms = std::sqrt(rms / double(N));
    for (int64_t n = 0; n < N; ++n) {
      const size_t i = size_t(m * N + n);
      const double g = value(y, c.yt, i), r = ref[i];
      if (!std::isfinite(g)) {
        ADD_FAILURE() << "output (m " << m << ", n " << n << ") not written: " << g;
        return;
      }
      sdd += (g - r) * (g - r);
      sxx += r * r;
      const double err = std::fabs(g - r) / (std::fabs(r) + rms + 1e-30);
      if (err > worst_err) worst_err = err, worst = int64_t(i);
    }
  }
  EXPECT_LE(std::sqrt(sdd / std::max(sxx, 1e-300)), out_eps) << kname;
  EXPECT_LE(worst_err, 2 * out_eps) << "worst at m " << worst / N << ", n " << worst % N << " " << kname;
}

// The call c on w prepared with tuning a and with tuning b: the same bytes (garbage workspaces).
void expect_same_bytes(const QuantizedWeight& w, const Case& c, const std::string& a, const std::string& b,
                       uint32_t seed) {
  const PreparedWeight pa = prepare(w, w4a8_options(a)), pb = prepare(w, w4a8_options(b));
  const test::LinearCall call(c.M, c.K, c.N, c.xt, c.yt, c.bias, c.lo, c.hi, seed);
  const std::vector<uint8_t> ya = call.run(pa, false, true), yb = call.run(pb, false, true);
  ASSERT_FALSE(ya.empty());
  EXPECT_EQ(mixq::testing::first_mismatch(ya, yb), "") << "[" << a << "] against [" << b << "], "
                                                       << pa.kernel_name(c.M);
}

}  // namespace

// Token counts across the three token tiles (16, 64, 128), one and several waves, both weight forms.
TEST(CudaW4A8, MatchesTheReference) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 1;
  for (const char* scheme : {"w4g128", "w4g128zp"})
    for (int64_t M : {1, 7, 16, 17, 64, 65, 300, 1000}) {
      Case c{M, 1000, 1024, scheme};
      run(c, seed++);
    }
}

// Zero points that every group shares (0, 5, 8 and none) go into the activation factors; the fold
// adds them as they are and gives the bytes of the per-row fold (Tuning::wo_a8_shared_zero off) on
// every token tile, and the reference's values. Symmetric codes (w4g128) share zero point 8.
TEST(CudaW4A8, SharedZeroPointGivesThePerRowFoldsBytes) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 400;
  struct Form {
    const char* scheme;
    int same_zero;
    int shared;  // the zero point the weight's groups share (-1: they differ)
  };
  for (const Form f : {Form{"w4g128", -1, 8}, Form{"w4g128zp", 5, 5}, Form{"w4g128zp", 8, 8},
                       Form{"w4g128zp", 16, 0}, Form{"w4g128zp", -1, -1}})
    for (int64_t M : {1, 40, 300}) {
      Case c{M, 520, 1152 + 64, f.scheme, DType::BF16, DType::F32, true};
      c.same_zero = f.same_zero;
      run(c, seed);  // against the reference
      SCOPED_TRACE(name(c));
      const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, seed, c.same_zero);
      const PreparedWeight pw = prepare(w, w4a8_options());
      const cuda::WoExpertView view = cuda::weight_only_expert_view(pw.impl());
      EXPECT_EQ(view.w.L.a8_zero, f.shared);
      Tuning off;
      off.wo_a8_shared_zero = Toggle::Off;  // the per-row form below
      EXPECT_EQ(cuda::w4a8_factor_zero(view.w.L, off), -1);
      expect_same_bytes(w, c, "", "wo_a8_shared_zero=off", seed++);
    }
}

// N off the 128-row tiles, K off the 128-wide groups (a partial last group, a single narrow one),
// every activation and output type, bias and clamp, caller workspaces full of garbage.
TEST(CudaW4A8, OddShapesTypesAndEpilogues) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 100;
  run({5, 37, 200, "w4g128zp", DType::F16, DType::F32, true, -2.f, 3.f}, seed++);
  run({130, 131, 1000, "w4g128", DType::F32, DType::F16, true}, seed++);
  run({33, 1000, 100, "w4g128", DType::BF16, DType::BF16, false, 0.f, 6.f, true}, seed++);
  run({300, 257, 7168 + 64, "w4g128zp", DType::BF16, DType::F32, true, -1e30f, 1e30f, true}, seed++);
  run({2000, 520, 640, "w4g128", DType::F16, DType::BF16, false}, seed++);  // > 132 tiles: the ring wraps
}

// Every token tile forced at counts below, at and past it (stream-K pieces and whole tiles).
TEST(CudaW4A8, EveryTokenTile) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 200;
  for (const char* t : {"wo_token_tile=16", "wo_token_tile=64", "wo_token_tile=128"})
    for (int64_t M : {1, 37, 300}) {
      Case c{M, 700, 2048 + 128, "w4g128zp", DType::BF16, DType::BF16, true};
      c.tuning = t;
      run(c, seed++);
    }
}

// linear(QuantizedActivations) from the public quantizer gives linear(x)'s bytes; repeated calls
// (the stream-K tickets left at zero) and graph replays too.
TEST(CudaW4A8, QuantizedActivationsAndGraphsSameBits) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 300;
  for (int64_t M : {1, 40, 300}) {
    const int64_t N = 600, K = 1280;
    SCOPED_TRACE("M " + std::to_string(M));
    const PreparedWeight pw = prepare(make_weight(N, K, "w4g128", seed++), w4a8_options());
    const std::vector<uint8_t> xb = to_bytes(randn(size_t(M * K), seed++), DType::BF16);
    DeviceBuffer dx(xb.size());
    dx.copy_from_host(xb.data(), xb.size());
    const TensorView x = dx.view(DType::BF16, {M, K});
    const size_t yb = size_t(M * N) * 2;
    DeviceBuffer y1(yb), y2(yb);
    ASSERT_EQ(cudaMemset(y1.data(), 0xFF, yb), cudaSuccess);
    linear(x, pw, y1.view(DType::BF16, {M, N}));
    std::vector<uint8_t> want(yb), got(yb);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    y1.copy_to_host(want.data(), yb);

    const int64_t ldq = act_quant_row_pitch(K), ldm = act_quant_meta_pitch(M), nb = (K + 127) / 128;
    DeviceBuffer q(size_t(M * ldq)), sc(size_t(nb * ldm) * 4);
    const QuantizedActivations xq = QuantizedActivations::fp8_block(
        TensorView::strided(q.data(), DType::F8E4M3, {M, K}, {ldq, 1}, Device::CUDA),
        TensorView::strided(sc.data(), DType::F32, {nb, M}, {ldm, 1}, Device::CUDA));
    quantize_activations_fp8_block(x, xq.q, xq.scale, ExecContext{});
    for (int rep = 0; rep < 2; ++rep) {
      ASSERT_EQ(cudaMemset(y2.data(), 0xFF, yb), cudaSuccess);
      linear(xq, pw, y2.view(DType::BF16, {M, N}));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      y2.copy_to_host(got.data(), yb);
      EXPECT_EQ(mixq::testing::first_mismatch(got, want), "") << "linear(xq), call " << rep;
    }

    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ExecContext ctx;
    ctx.stream = s;
    cudaGraph_t g;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    linear(x, pw, y2.view(DType::BF16, {M, N}), Epilogue{}, ctx);
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t ge;
    ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemsetAsync(y2.data(), 0xFF, yb, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      y2.copy_to_host(got.data(), yb);
      EXPECT_EQ(mixq::testing::first_mismatch(got, want), "") << "graph replay " << rep;
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }
}

// The W4A8 block factors (512 s, -zero s sum(a)) of the quantizer and of the factors-only kernel (for
// codes quantized elsewhere) against the host: the same codes as the FP8 block quantizer, the
// scale's product exact, the code sum exact (integers of 2^-9), whatever the lanes' split (pieces
// 1 and 2) and K past the last block.
TEST(CudaW4A8, ActivationFactorsMatchHost) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 900;
  const int zeros[3] = {1, 8, 0};  // the factors' zero: rows keep theirs, or a shared one
  for (int64_t K : {128, 200, 1000, 4096 + 7})
    for (int pieces : {1, 2}) {
      const int64_t M = 37, nb = (K + 127) / 128;
      SCOPED_TRACE("K " + std::to_string(K) + " pieces " + std::to_string(pieces) + " zero " +
                   std::to_string(zeros[(pieces + K) % 3]));
      std::vector<float> xf = randn(size_t(M * K), seed++);
      for (size_t i = 0; i < xf.size(); i += 97) xf[i] *= 300.f;  // outliers: other scales, saturated sums
      const std::vector<uint8_t> xb = to_bytes(xf, DType::BF16);
      DeviceBuffer dx(xb.size());
      dx.copy_from_host(xb.data(), xb.size());
      const int64_t ldq = cuda::act_row_pitch(K), ldm = cuda::act_meta_pitch(M);
      DeviceBuffer q1(size_t(M * ldq)), q2(size_t(M * ldq)), sc(size_t(nb * ldm) * 4), f1(size_t(nb * ldm) * 8),
          f2(size_t(nb * ldm) * 8);
      ASSERT_EQ(cudaMemset(f1.data(), 0xFF, f1.size()), cudaSuccess);
      ASSERT_EQ(cudaMemset(f2.data(), 0xFF, f2.size()), cudaSuccess);
      cuda::ActQuantTuning tune;
      tune.pieces = pieces;
      const float zero = float(zeros[(pieces + K) % 3]);
      cuda::launch_quantize_fp8_w4a8(dx.data(), 1, K, M, K, static_cast<uint8_t*>(q1.data()), ldq,
                                     static_cast<float*>(f1.data()), ldm, zero, nullptr, tune);
      cuda::launch_quantize_fp8_1x128(dx.data(), 1, K, M, K, static_cast<uint8_t*>(q2.data()), ldq,
                                      static_cast<float*>(sc.data()), ldm, nullptr);
      cuda::launch_w4a8_factors(static_cast<const uint8_t*>(q2.data()), ldq, static_cast<const float*>(sc.data()),
                                ldm, M, K, static_cast<float*>(f2.data()), ldm, zero, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> c1(q1.size()), c2(q2.size());
      q1.copy_to_host(c1.data(), c1.size());
      q2.copy_to_host(c2.data(), c2.size());
      std::vector<float> s(size_t(nb * ldm)), g1(size_t(2 * nb * ldm)), g2(g1.size());
      sc.copy_to_host(s.data(), s.size() * 4);
      f1.copy_to_host(g1.data(), g1.size() * 4);
      f2.copy_to_host(g2.data(), g2.size() * 4);
      for (int64_t m = 0; m < M; ++m) {
        ASSERT_EQ(std::memcmp(&c1[size_t(m * ldq)], &c2[size_t(m * ldq)], size_t(K)), 0) << "codes of row " << m;
        for (int64_t kb = 0; kb < nb; ++kb) {
          double sum = 0;  // exact: e4m3 values are multiples of 2^-9
          for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k) sum += e4m3_to_f32(c2[size_t(m * ldq + k)]);
          const float sa = s[size_t(kb * ldm + m)];
          const float want_a = 512.f * sa, want_d = zero * -(sa * float(sum));
          const size_t i = size_t(2 * (kb * ldm + m));
          EXPECT_EQ(g1[i], want_a) << "row " << m << " block " << kb;
          EXPECT_EQ(g1[i + 1], want_d) << "row " << m << " block " << kb << " sum " << sum;
          EXPECT_EQ(g2[i], want_a) << "factors kernel, row " << m << " block " << kb;
          EXPECT_EQ(g2[i + 1], want_d) << "factors kernel, row " << m << " block " << kb;
        }
      }
    }
}

// What the kernel cannot take is refused at prepare, naming the weight.
TEST(CudaW4A8, RefusesOtherWeights) {
  SKIP_WITHOUT_HOPPER();
  for (const char* scheme : {"w4g64", "w4g128asym", "w8g128"}) {
    SCOPED_TRACE(scheme);
    const QuantizedWeight w = make_weight(256, 512, scheme, 7);
    EXPECT_THROW(prepare(w, w4a8_options()), Error);
  }
  // the factors' zero is 1 or a 4-bit zero point, named when it is not
  DeviceBuffer x(64 * 128 * 2), q(64 * 128), f(64 * 8);
  for (float zero : {-1.f, 2.5f, 16.f}) {
    try {
      cuda::launch_quantize_fp8_w4a8(x.data(), 1, 128, 64, 128, static_cast<uint8_t*>(q.data()), 128,
                                     static_cast<float*>(f.data()), 64, zero, nullptr);
      ADD_FAILURE() << "zero " << zero << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("zero ("), std::string::npos) << e.what();
    }
  }
}
