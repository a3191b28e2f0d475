// CUDA weight-only linear with FP8 (e4m3, 128x128 block scales) weights against the float64
// reference on the dequantized weights, on both paths (streaming kernel, dequantize + cuBLAS).
// Skipped (visibly) when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/host_data.hpp"
#include "gpu/test_tuning.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

using namespace mixq;

namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"

// Weights with a per-row magnitude that varies across 128-row blocks (so every block scale
// differs) and a few outliers (so small values use e4m3 subnormals after scaling).
QuantizedWeight make_fp8_weight(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> w(size_t(N * K));
  for (int64_t n = 0; n < N; ++n) {
    const float row_scale = 0.02f * (1.f + float((n / 128) % 5));
    for (int64_t k = 0; k < K; ++k)
      w[size_t(n * K + k)] = nd(rng) * row_scale * ((k * 7 + n) % 331 == 0 ? 40.f : 1.f);
  }
  return quantize_weight(TensorView(w.data(), DType::F32, {N, K}), parse_scheme("fp8b128"));
}

// The same with every block scale rounded to f16 (the kernels then take their f16 pair path).
QuantizedWeight make_fp8_weight_f16_scales(int64_t N, int64_t K, uint32_t seed) {
  QuantizedWeight w = make_fp8_weight(N, K, seed);
  EXPECT_EQ(w.scale_type, DType::F32);
  for (size_t i = 0; i + 4 <= w.scales.size(); i += 4) {
    float f;
    std::memcpy(&f, w.scales.data() + i, 4);
    f = f16_to_f32(f32_to_f16(f));
    std::memcpy(w.scales.data() + i, &f, 4);
  }
  return w;
}

std::vector<uint8_t> make_acts(int64_t M, int64_t K, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t eb = dtype_bits(t) / 8;
  std::vector<uint8_t> b(size_t(M * K) * eb);
  for (size_t i = 0; i < size_t(M * K); ++i) {
    const float f = nd(rng);
    if (t == DType::F32) std::memcpy(b.data() + 4 * i, &f, 4);
    else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

using test::value;

struct Case {
  int64_t M, N, K;
  DType xt;
  std::string force;  // "", "sm80_wo_stream", "wo_dequant_cublas", "sm90_wo_ws"
  bool f16_scales = false;
};

std::string name(const Case& c) {
  return "fp8b128 M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" +
         std::to_string(c.K) + " x=" + dtype_name(c.xt) + " force=" + (c.force.empty() ? "auto" : c.force);
}

// Relative Frobenius error of y (dtype = x dtype) against the float64 reference, every element
// checked to be written (output poisoned first). tuning: the knobs of the kernels (e.g.
// "wo_ctas_per_sm=2"), over the default.
double run_case(const Case& c, uint32_t seed, const std::string& tuning = "") {
  const QuantizedWeight w = c.f16_scales ? make_fp8_weight_f16_scales(c.N, c.K, seed) : make_fp8_weight(c.N, c.K, seed);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.force_kernel = c.force;
  o = test::with_tuning(o, tuning);
  const PreparedWeight pw = prepare(w, o);
  const std::vector<uint8_t> x = make_acts(c.M, c.K, c.xt, seed + 1);
  const size_t yb = size_t(c.M * c.N) * (dtype_bits(c.xt) / 8);
  DeviceBuffer dx(x.size()), dy(yb);
  dx.copy_from_host(x.data(), x.size());
  EXPECT_EQ(cudaMemset(dy.data(), 0xFF, yb), cudaSuccess);
  linear(dx.view(c.xt, {c.M, c.K}), pw, dy.view(c.xt, {c.M, c.N}));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> y(yb);
  dy.copy_to_host(y.data(), yb);
  std::vector<double> ref(size_t(c.M * c.N));
  ref::linear_weight_only(TensorView(const_cast<uint8_t*>(x.data()), c.xt, {c.M, c.K}), w,
                          TensorView(ref.data(), DType::F64, {c.M, c.N}), Epilogue{});
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = value(y, c.xt, i);
    if (!std::isfinite(a)) {
      ADD_FAILURE() << name(c) << ": y[" << i / c.N << ", " << i % c.N << "] not written / not finite";
      return 1.0;
    }
    num += (a - ref[i]) * (a - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

double tolerance(DType t) { return t == DType::BF16 ? 8e-3 : t == DType::F16 ? 1e-3 : 1e-4; }

}  // namespace

TEST(CudaFp8WeightOnly, EveryMBothPathsF16Bf16) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (DType xt : {DType::F16, DType::BF16})
    for (int64_t M : {1, 2, 4, 8, 16, 33, 300})
      for (const char* force : {"", "sm80_wo_stream", "wo_dequant_cublas"}) {
        if (std::string(force) == "sm80_wo_stream" && M > 64) continue;
        const Case c{M, 1000, 1000, xt, force};
        EXPECT_LE(run_case(c, seed++), tolerance(xt)) << name(c);
      }
}

// The warp-specialized Hopper kernel decodes e4m3 (sm90_wo_ws, kernels/wo/sm90_wo_ws.cuh): forced
// at every token tile, f16 and bf16, f32 and f16-exact block scales, odd shapes; then both CTA
// shapes of the token tiles 16 and 32 (tuning wo_ctas_per_sm=1 and =2, each a weight of its own).
TEST(CudaFp8WeightOnly, HopperWgmmaKernel) {
  SKIP_WITHOUT_GPU();
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  const PreparedWeight pw = prepare(make_fp8_weight(256, 512, 3), o);
  if (pw.kernel_name(16).find("sm90_wo_ws<f16,e4m3") == std::string::npos)
    GTEST_SKIP() << "no sm_90a warp-specialized kernel on this device: " << pw.kernel_name(16);
  uint32_t seed = 500;
  for (DType xt : {DType::F16, DType::BF16})
    for (int64_t M : {1, 3, 16, 17, 40, 64, 65, 200, 300})
      for (bool f16s : {false, true}) {
        const Case c{M, 1000, 1000, xt, "sm90_wo_ws", f16s};
        EXPECT_LE(run_case(c, seed++), tolerance(xt)) << name(c) << (f16s ? " f16 scales" : "");
      }
  for (const Case& c : {Case{3, 129, 100, DType::F16, "sm90_wo_ws"}, Case{9, 257, 4100, DType::BF16, "sm90_wo_ws"},
                        Case{2, 16, 64, DType::F16, "sm90_wo_ws", true}, Case{33, 10944, 7392, DType::F16, "sm90_wo_ws"},
                        Case{130, 520, 300, DType::BF16, "sm90_wo_ws", true}})
    EXPECT_LE(run_case(c, seed++), tolerance(c.xt)) << name(c);
  for (const int ctas : {1, 2}) {
    const std::string shape = "wo_ctas_per_sm=" + std::to_string(ctas);
    PrepareOptions os = test::with_tuning(o, shape);
    os.force_kernel = "sm90_wo_ws";
    const PreparedWeight ps = prepare(make_fp8_weight(256, 512, 3), os);
    EXPECT_NE(ps.kernel_name(16).find(",cta" + std::to_string(ctas) + ","), std::string::npos)
        << shape << ": " << ps.kernel_name(16);
    for (DType xt : {DType::F16, DType::BF16})
      for (int64_t M : {1, 3, 16, 17, 32})
        for (bool f16s : {false, true}) {
          const Case c{M, 1000, 1000, xt, "sm90_wo_ws", f16s};
          EXPECT_LE(run_case(c, seed++, shape), tolerance(xt)) << name(c) << " " << shape << (f16s ? " f16 scales" : "");
        }
  }
}

TEST(CudaFp8WeightOnly, F32ActivationsAndOddShapes) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (const char* force : {"sm80_wo_stream", "wo_dequant_cublas"}) {
    for (int64_t M : {1, 5, 17}) {
      const Case c{M, 300, 520, DType::F32, force};
      EXPECT_LE(run_case(c, seed++), tolerance(DType::F32)) << name(c);
    }
    // K < 128 (one block along K), N = 129 (a 1-row last block), K not a multiple of 64
    for (const Case& c : {Case{3, 129, 100, DType::F16, force}, Case{9, 257, 4100, DType::BF16, force},
                          Case{2, 16, 64, DType::F16, force}})
      EXPECT_LE(run_case(c, seed++), tolerance(c.xt)) << name(c);
  }
}

TEST(CudaFp8WeightOnly, KernelNameAndNanCodesRejected) {
  SKIP_WITHOUT_GPU();
  QuantizedWeight w = make_fp8_weight(256, 256, 5);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  const PreparedWeight pw = prepare(w, o);
  EXPECT_NE(pw.kernel_name(1).find("e4m3"), std::string::npos) << pw.kernel_name(1);
  w.codes[size_t(3 * w.row_bytes() + 17)] = 0xFF;  // e4m3 NaN
  try {
    prepare(w, o);
    ADD_FAILURE() << "NaN e4m3 code accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[3, 17]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
}
