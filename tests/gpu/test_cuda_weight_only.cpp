// CUDA weight-only linear against the float64 reference on the dequantized weights.
// Skipped (visibly) when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/dispatch/force_kernel.hpp"
#include "cuda/dispatch/stream_k_plan.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/kernels/wo/sm90_wo_ws_k_split.cuh"
#include "cuda/runtime/device_context.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/test_tuning.hpp"
#include "gpu/wo_test_inputs.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "mixq/shard.hpp"

using namespace mixq;
using test::HostMat;
using test::make_acts;
using test::make_weight;

namespace {

double tolerance(DType x, DType y) {
  if (x == DType::BF16 || y == DType::BF16) return 8e-3;
  if (x == DType::F16 || y == DType::F16) return 1e-3;
  return 1e-4;  // f32 activations: bf16 hi/lo split, ~2^-16 relative
}

struct Case {
  int64_t M, N, K;
  std::string scheme;
  DType xt = DType::F16, yt = DType::F16;
  std::string force;  // "", "sm80_wo_stream", "wo_dequant_cublas", "sm90_wo_ws"
  bool act_order = false;
  bool bias = false;
  Epilogue clamp = {};
  std::string tuning;  // the kernels' knobs ("key=value,...", test_tuning.hpp) over the default
};

// Runs one case on weight w (c.scheme's, or one the test built); returns the relative Frobenius
// error on a sample of rows.
// ctx: the call's execution context (a caller's workspace), else the default.
double run_case(const Case& c, const QuantizedWeight& w, uint32_t seed,
                std::vector<uint8_t>* out = nullptr, const ExecContext& ctx = {}) {
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(w, test::with_tuning(o, c.tuning));
  HostMat x = make_acts(c.M, c.K, c.xt, seed + 1);
  const size_t yb = size_t(c.M * c.N) * (dtype_bits(c.yt) / 8);
  DeviceBuffer dx(x.bytes.size()), dy(yb);
  dx.copy_from_host(x.bytes.data(), x.bytes.size());
  // Poison: 0xFF bytes are NaN in every float type; every element must be overwritten.
  MIXQ_CHECK(cudaMemset(dy.data(), 0xFF, yb) == cudaSuccess, ErrorCode::Cuda, "memset");
  std::vector<float> bias_h;
  DeviceBuffer dbias;
  Epilogue ep = c.clamp;
  if (c.bias) {
    bias_h = test::randn(size_t(c.N), seed + 3);
    dbias = DeviceBuffer(bias_h.size() * 4);
    dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
    ep.bias = dbias.view(DType::F32, {c.N});
  }
  linear(dx.view(c.xt, {c.M, c.K}), pw, dy.view(c.yt, {c.M, c.N}), ep, ctx);
  MIXQ_CHECK(cudaDeviceSynchronize() == cudaSuccess, ErrorCode::Cuda, "sync");
  std::vector<uint8_t> y(yb);
  dy.copy_to_host(y.data(), yb);
  if (out) *out = y;
  for (size_t i = 0; i < size_t(c.M * c.N); ++i) {
    const double v = test::value(y, c.yt, i);
    if (!std::isfinite(v)) {
      ADD_FAILURE() << "output element " << i << " (m " << i / c.N << ", n " << i % c.N
                    << ") not written or not finite: " << v;
      return 1.0;
    }
  }
  // float64 reference on a sample of rows (all of them when M is small)
  std::vector<int64_t> rows;
  for (int64_t m = 0; m < c.M; m += std::max<int64_t>(1, c.M / 6)) rows.push_back(m);
  if (rows.back() != c.M - 1) rows.push_back(c.M - 1);
  const int64_t R = int64_t(rows.size());
  HostMat xs = x.subset(rows);
  std::vector<double> ref(size_t(R * c.N));
  Epilogue rep = c.clamp;
  if (c.bias) rep.bias = TensorView(bias_h.data(), DType::F32, {c.N});
  ref::linear_weight_only(xs.view(), w, TensorView(ref.data(), DType::F64, {R, c.N}), rep);
  double num = 0, den = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t n = 0; n < c.N; ++n) {
      const double a = test::value(y, c.yt, size_t(rows[r] * c.N + n)),
                   b = ref[size_t(r * c.N + n)];
      num += (a - b) * (a - b);
      den += b * b;
    }
  return std::sqrt(num / std::max(den, 1e-300));
}

double run_case(const Case& c, uint32_t seed) {
  return run_case(c, make_weight(c.N, c.K, c.scheme, seed, c.act_order), seed);
}

std::string name(const Case& c) {
  return c.scheme + " M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" +
         std::to_string(c.K) + " x=" + dtype_name(c.xt) + " y=" + dtype_name(c.yt) +
         " force=" + (c.force.empty() ? "auto" : c.force) + (c.act_order ? " act-order" : "") +
         (c.bias ? " bias" : "") + (c.tuning.empty() ? "" : " tuning " + c.tuning);
}

void expect_ok(const Case& c, uint32_t seed) {
  const double err = run_case(c, seed);
  EXPECT_LE(err, tolerance(c.xt, c.yt)) << name(c);
}

// c on a weight prepared with the knobs `tuning` (test_tuning.hpp).
void expect_ok(Case c, uint32_t seed, const std::string& tuning) {
  c.tuning = tuning;
  expect_ok(c, seed);
}

// The plan a call with M rows of x (and outputs of x's type that TMA can store) runs on w prepared
// with o, for what kernel_name() does not show (it names the instantiation only): e.g. whether
// the wgmma kernel cuts tiles into stream-K pieces. The planner is asked with the prepared
// weight's inputs rebuilt from w; the plan must name the instantiation the prepared weight reports
// (up to the pair path, which depends on the scale values).
cuda::WoPlan wo_plan_of(const PreparedWeight& pw, const QuantizedWeight& q, const PrepareOptions& o,
                        int64_t M, DType x) {
  cuda::WoWeight w;
  cuda::WoLayout& L = w.L;
  L.N = q.N;
  L.K = q.K;
  L.Np = cuda::round_up(q.N, cuda::kTileRows);
  L.Kp = cuda::round_up(q.K, cuda::kChunkK);
  L.bits = int(dtype_bits(q.code_type));
  L.e4m3 = q.code_type == DType::F8E4M3;
  w.group_shift = 30;  // one group per row
  if (q.block_k < q.K)
    for (w.group_shift = 0; (int64_t(1) << w.group_shift) < q.block_k;) ++w.group_shift;
  L.group = int64_t(1) << w.group_shift;
  L.groups = (L.Kp + L.group - 1) / L.group;
  w.int_zero = q.zero_kind != ZeroKind::Offset;
  w.bf16_zero_pairs = true;
  w.gather = !q.k_perm.empty();
  cuda::WoCall c;
  c.M = M;
  c.x_type = c.y_type = x == DType::F16 ? 0 : x == DType::BF16 ? 1 : 2;
  c.y_tma = x != DType::F32;
  const cuda::WoPlan p = cuda::plan_weight_only(c, w, cuda::DeviceContext::get(o.device).caps(), o.tuning,
                                                cuda::forced_kernel(o, {"sm80_wo", "sm90_wo", "wo_"}));
  const std::string a = p.id.name(), b = pw.kernel_name(M, x);
  EXPECT_EQ(a.substr(0, a.find(",pairs=")), b.substr(0, b.find(",pairs=")))
      << "the rebuilt plan is not the prepared weight's";
  return p;
}

}  // namespace

TEST(CudaWeightOnly, EveryMOnBothKernels) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (int64_t M : {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 127, 128, 255, 256, 1000, 4096})
    for (const char* force : {"sm80_wo_stream", "wo_dequant_cublas"}) {
      if (std::string(force) == "sm80_wo_stream" && M > 256) continue;  // re-streams W per 64 rows
      expect_ok({M, 200, 520, "w4g128", DType::F16, DType::F16, force}, seed++);
    }
}

TEST(CudaWeightOnly, SchemesAndBlockSizes) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (const char* s : {"w4g32", "w4g64", "w4g128", "w4g256", "w4pc", "w4g128asym", "w4g32zp",
                        "w4g128zp", "w8g128", "w8g32asym", "w8pc", "w8g64zp", "w4g128-bf16",
                        "w4g64-f32"})
    for (const char* force : {"sm80_wo_stream", "wo_dequant_cublas"})
      for (int64_t M : {1, 5, 40}) expect_ok({M, 136, 1000, s, DType::F16, DType::F16, force}, seed++);
}

TEST(CudaWeightOnly, ActivationAndOutputTypes) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (DType xt : {DType::F16, DType::BF16, DType::F32})
    for (DType yt : {DType::F16, DType::BF16, DType::F32})
      for (const char* force : {"sm80_wo_stream", "wo_dequant_cublas"})
        for (int64_t M : {1, 9, 33})
          for (const char* s : {"w4g128", "w8g128"})
            expect_ok({M, 72, 777, s, xt, yt, force}, seed++);
}

TEST(CudaWeightOnly, OddShapesActOrderBiasClamp) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  // tensor-parallel shapes: K = 7392 (not a multiple of 128), N = 10944 (not of 256)
  expect_ok({3, 10944, 7392, "w4g128", DType::F16, DType::F16, ""}, seed++);
  expect_ok({17, 10944, 7392, "w4g32", DType::BF16, DType::BF16, ""}, seed++);
  expect_ok({300, 1000, 7392, "w8g128", DType::F16, DType::F32, ""}, seed++);
  // K a multiple of the group but not of 64: the dequantize kernel's 16-wide steps in the K
  // padding would index one group past the row (the index is clamped; the values are zeros)
  expect_ok({40, 136, 7392, "w4g32", DType::F16, DType::F16, "wo_dequant_cublas"}, seed++);
  expect_ok({40, 24, 96, "w8g32asym", DType::BF16, DType::F32, "wo_dequant_cublas"}, seed++);
  // per-channel scales with splits longer than the streaming kernel's 256-K fold: each fold must
  // apply the offset term to its own stretch of K (an earlier version had every fold add the whole
  // split's activation sum: wrong once a split held two folds, e.g. 12 splits of 384 K here)
  expect_ok({1, 10944, 4096, "w4pc", DType::F16, DType::F16, "sm80_wo_stream"}, seed++);
  expect_ok({2, 10944, 4096, "w8pc", DType::BF16, DType::BF16, "sm80_wo_stream"}, seed++);
  for (const char* force : {"sm80_wo_stream", "wo_dequant_cublas"}) {
    expect_ok({7, 33, 129, "w4g32", DType::F16, DType::F16, force, true}, seed++);
    expect_ok({70, 264, 4100, "w4g128zp", DType::F16, DType::F16, force, true, true}, seed++);
    expect_ok({2, 17, 31, "w8pc", DType::BF16, DType::F32, force, false, true, Epilogue::relu()}, seed++);
    expect_ok({20, 100, 300, "w4g64asym", DType::F16, DType::F16, force, false, true, Epilogue::relu6()}, seed++);
  }
}

// Tensor-parallel shards whose split cut a group (k_phase) or whose act-order blocks are listed
// (k_block_starts), and FP8 column shards that cut a 128-row block (n_phase): every kernel family
// (the wgmma kernel reads the leading columns left of X through TMA's zero fill), every
// activation type, against the float64 reference of the shard itself.
struct ShardSplit {
  const char* scheme;
  bool act_order;
  int64_t N, K, world;
  ShardAxis axis;
};

void check_cut_group_shards(const std::vector<ShardSplit>& splits, const std::vector<int64_t>& ms,
                            uint32_t seed) {
  std::vector<std::string> forces = {"", "sm80_wo_stream", "wo_dequant_cublas"};
  if (test::hopper()) forces.push_back("sm90_wo_ws");
  for (const ShardSplit& sp : splits) {
    const QuantizedWeight w = make_weight(sp.N, sp.K, sp.scheme, seed++, sp.act_order);
    for (int64_t r = 0; r < sp.world; ++r) {
      const QuantizedWeight s = shard(w, {r, sp.world, sp.axis});
      for (const std::string& f : forces)
        for (int64_t M : ms)
          for (DType t : {DType::F16, DType::BF16}) {
            if (f == "sm90_wo_ws" && M == 1) continue;  // the streaming kernel's M
            Case c{M, s.N, s.K, sp.scheme, t, t, f, sp.act_order, true};
            SCOPED_TRACE(std::string(sp.scheme) + (sp.act_order ? " act-order" : "") + " rank " +
                         std::to_string(r) + "/" + std::to_string(sp.world) + " k_phase " +
                         std::to_string(s.k_phase) + " n_phase " + std::to_string(s.n_phase) +
                         " listed " + std::to_string(s.k_block_starts.size()));
            EXPECT_LE(run_case(c, s, seed++), tolerance(t, t)) << name(c);
          }
      if (r == 1) {  // f32 activations (the streaming kernel's split path)
        Case c{5, s.N, s.K, sp.scheme, DType::F32, DType::F32, "sm80_wo_stream", sp.act_order};
        EXPECT_LE(run_case(c, s, seed++), tolerance(DType::F32, DType::F32)) << name(c);
      }
    }
  }
}

TEST(CudaWeightOnly, ShardsThatCutGroups) {
  SKIP_WITHOUT_GPU();
  const std::vector<ShardSplit> splits = {
      {"w4g128", false, 200, 1000, 3, ShardAxis::Row},   // phases 77, 26 (not multiples of 8)
      {"w4g128zp", false, 136, 7392, 4, ShardAxis::Row},  // Qwen-72B down at TP 4: phases 96, 64, 32
      {"w8g128", false, 72, 1000, 7, ShardAxis::Row},
      {"w4g64asym", false, 40, 1000, 3, ShardAxis::Row},
      {"w4g128", true, 96, 1000, 3, ShardAxis::Row},     // act-order: listed blocks, gathered holes
      {"fp8b128", false, 300, 1000, 3, ShardAxis::Row},
      {"fp8b128", false, 300, 512, 3, ShardAxis::Column},  // n_phase 100, 72
  };
  check_cut_group_shards(splits, {1, 9, 300}, 900);
}

// The sanitizer's subset of the above: a phase that is not a multiple of 8 and act-order holes.
TEST(CudaWeightOnly, ShardPhaseAndHolesSubset) {
  SKIP_WITHOUT_GPU();
  check_cut_group_shards({{"w4g128", false, 200, 1000, 3, ShardAxis::Row},
                          {"w4g128", true, 96, 1000, 3, ShardAxis::Row}},
                         {9, 130}, 950);
}

using test::hopper;

// The sm_90a wgmma kernel (M past the streaming kernel): every M tile size, split-K, schemes,
// activation/output types, odd shapes, act-order, bias and clamp.
TEST(CudaWeightOnly, HopperWgmmaKernel) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "not a Hopper GPU";
  {
    PrepareOptions o;
    o.backend = BackendKind::CUDA;
    const PreparedWeight pw = prepare(make_weight(256, 512, "w4g128", 1), o);
    EXPECT_NE(pw.kernel_name(64).find("sm90_wo_ws<"), std::string::npos)
        << "a Hopper build should serve M = 64 with the wgmma kernel, got " << pw.kernel_name(64);
  }
  uint32_t seed = 500;
  for (int64_t M : {1, 2, 17, 33, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4096})
    expect_ok({M, 200, 520, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  for (const char* s : {"w4g32", "w4g64", "w4g128", "w4g256", "w4pc", "w4g128asym", "w4g32zp",
                        "w4g128zp", "w8g128", "w8g32asym", "w8pc", "w8g64zp", "w4g128-bf16",
                        "w4g64-f32", "w4g16"})
    for (int64_t M : {40, 300}) expect_ok({M, 136, 1000, s, DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  for (DType xt : {DType::F16, DType::BF16})
    for (DType yt : {DType::F16, DType::BF16, DType::F32})
      for (const char* s : {"w4g128", "w8g128", "w4g64asym"})
        expect_ok({100, 72, 776, s, xt, yt, "sm90_wo_ws"}, seed++);
  // split-K over many chunks (8 row tiles of 128 do not fill the GPU), TP shapes
  expect_ok({48, 1000, 7392, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  expect_ok({300, 10944, 7392, "w4g128", DType::BF16, DType::BF16, "sm90_wo_ws"}, seed++);
  expect_ok({70, 264, 4100, "w4g128zp", DType::F16, DType::F16, "sm90_wo_ws", true, true}, seed++);
  // one output tile cut into more stream-K pieces (132 on an H100: one per CTA) than the fixup
  // kernel resolves in its first batch of 128 slots
  expect_ok({16, 64, 69632, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  expect_ok({90, 100, 300, "w4g64asym", DType::F16, DType::F16, "sm90_wo_ws", false, true, Epilogue::relu6()}, seed++);
  expect_ok({200, 17, 31, "w8pc", DType::BF16, DType::F32, "sm90_wo_ws", false, true, Epilogue::relu()}, seed++);
  // K = 777: rows not 16-byte aligned, the call falls back to another kernel and stays right
  expect_ok({50, 72, 777, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  // scale after the MMA (fold: bf16 activations or f32 pairs, one group per 128-K stage, integer
  // zero) next to the per-register path (float offsets, f16 pairs), every token tile up to 64; then
  // again in both CTA shapes of the token tiles 16 and 32 (wo_ctas_per_sm=1, =2), with the fold off
  // (wo_fold=off), and with the fold on the f16x2 path at every size (wo_fold_half=on: folds the
  // small int4 shapes here too)
  for (const char* tuning : {"", "wo_ctas_per_sm=1", "wo_ctas_per_sm=2", "wo_fold=off", "wo_fold_half=on"})
    for (DType xt : {DType::F16, DType::BF16})
      for (const char* s : {"w4g128", "w4pc", "w4g128zp", "w4g256", "w8g128", "w8pc", "w4g128-f32", "w4g128asym"})
        for (int64_t M : {3, 17, 33, 64}) expect_ok({M, 136, 1000, s, xt, xt, "sm90_wo_ws"}, seed++, tuning);
  // the fold on the f16x2 path (int4 weights of 16 MiB and more at mt = 16: the planner's
  // wo_fold_half rule), symmetric and zero-point
  for (const char* s : {"w4g128", "w4g128zp"})
    for (int64_t M : {4, 16}) expect_ok({M, 4096, 8192, s, DType::F16, DType::F16, "sm90_wo_ws"}, seed++);
  // bf16 activations with groups shorter than a chunk (pairs read per k16 step) and zero-point
  // forms, at a medium and a large token tile
  for (const char* s : {"w4g16", "w4g32zp", "w4g64", "w4g128zp"})
    for (int64_t M : {40, 300}) expect_ok({M, 136, 1000, s, DType::BF16, DType::BF16, "sm90_wo_ws"}, seed++);
}

// Token tile 128 with 64-K and with 128-K stages (wo_stage_k=64 / =128, each on a weight prepared
// with it; the plan picks between them by K and the tile count): every code kind and zero form,
// groups shorter and longer than a stage, f16 and bf16, an odd count of 64-K chunks (the last
// 128-K stage holds a chunk past K, which must add nothing), partial token and row tiles, tiles
// cut into stream-K pieces, bias and clamp. The forced depth must be the one the kernel reports.
TEST(CudaWeightOnly, WgmmaTokenTile128BothStageDepths) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "the warp-specialized wgmma kernel needs sm_90a";
  uint32_t seed = 2600;
  for (const char* depth :
       {"wo_token_tile=128,wo_stage_k=64", "wo_token_tile=128,wo_stage_k=128"}) {
    {
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.force_kernel = "sm90_wo_ws";
      const PreparedWeight pw =
          prepare(make_weight(256, 1024, "w4g128", seed), test::with_tuning(o, depth));
      const bool wide = std::string(depth).find("wo_stage_k=128") != std::string::npos;
      EXPECT_EQ(pw.kernel_name(200).find(",k128,") != std::string::npos, wide)
          << depth << ": " << pw.kernel_name(200);
    }
    for (DType xt : {DType::F16, DType::BF16})
      for (const char* s : {"w4g128", "w4g32", "w4g256", "w4pc", "w4g64asym", "w4g128zp", "w8g128",
                            "w8pc", "w8g32asym", "w4g16", "w4g128-f32"})
        for (int64_t M : {100, 129, 300})
          expect_ok({M, 200, 1000, s, xt, xt, "sm90_wo_ws"}, seed++, depth);
    // 9 chunks of 64 (K = 520 -> 576): an odd count; 1 chunk; output types; bias and clamp
    for (int64_t K : {int64_t(520), int64_t(64), int64_t(136)})
      expect_ok({128, 72, K, "w4g64asym", DType::F16, DType::F16, "sm90_wo_ws"}, seed++, depth);
    for (DType yt : {DType::F16, DType::F32})
      expect_ok(
          {257, 136, 776, "w8g128", DType::BF16, yt, "sm90_wo_ws", false, true, Epilogue::relu6()},
          seed++, depth);
    // few row tiles over a long K: tiles cut into stream-K pieces (inline and fixup reductions)
    for (const char* reduce : {",wo_reduce=inline", ",wo_reduce=fixup"})
      expect_ok({128, 1000, 7392, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++,
                std::string(depth) + reduce);
  }
}

// The small token tiles of the warp-specialized wgmma kernel (mt = 16 and 32) in both CTA shapes:
// one CTA per SM (tuning wo_ctas_per_sm=1) and two, each with half the ring and registers (=2),
// each setting a weight prepared with it. Int4 / int8, symmetric, zero-point and float-offset
// forms, groups below a stage, f16 and bf16, and a weight whose tiles are cut into many stream-K
// pieces.
TEST(CudaWeightOnly, WgmmaSmallTilesInBothCtaShapes) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "the warp-specialized wgmma kernel needs sm_90a";
  uint32_t seed = 1900;
  for (const int ctas : {1, 2}) {
    const std::string shape = "wo_ctas_per_sm=" + std::to_string(ctas);
    {
      // the knob reaches the plan
      PrepareOptions o = test::with_tuning({}, shape);
      o.backend = BackendKind::CUDA;
      o.force_kernel = "sm90_wo_ws";
      const PreparedWeight pw = prepare(make_weight(264, 1000, "w4g128", 1), o);
      for (int64_t M : {16, 32})
        EXPECT_NE(pw.kernel_name(M).find(",cta" + std::to_string(ctas) + ","), std::string::npos)
            << shape << ": " << pw.kernel_name(M);
    }
    for (DType xt : {DType::F16, DType::BF16})
      for (const char* s : {"w4g128", "w8g128", "w4g64asym", "w4g32zp"})
        for (int64_t M : {5, 16, 17, 32}) expect_ok({M, 264, 1000, s, xt, xt, "sm90_wo_ws"}, seed++, shape);
    expect_ok({32, 1000, 7392, "w4g128", DType::F16, DType::F16, "sm90_wo_ws"}, seed++, shape);
    expect_ok({24, 10944, 7392, "w4g128", DType::BF16, DType::BF16, "sm90_wo_ws"}, seed++, shape);
  }
}

// bf16 activations x int8 codes without the f32 round trip (bf16x2_u8_minus_128: u - 128 from the
// byte's low 7 bits and its bit 7). With power-of-two scales every dequantized weight (u - zc) s is
// exact in bf16, so the kernels must match the float64 reference to f32 accumulation (a wrong code
// would show as an error of s x): the streaming kernel (MMA on u - 128), the wgmma kernel's bf16
// integer-zero path (fma(u - 128, s, (128 - zc) s)) at every token tile, and the same wgmma kernel
// with that path off (tuning wo_bf16_zero=off: through f32; the same weight prepared a second
// time), whose bits it must equal. Symmetric codes, zero points, per-channel scales and f32 pairs;
// then random scales (w8g64zp: (128 - zc) s not exact in bf16, so the f32 path) against the usual
// bf16 tolerance.
TEST(CudaWeightOnly, Bf16Int8CodesWithoutF32) {
  SKIP_WITHOUT_GPU();
  auto power_of_two_scales = [](QuantizedWeight w) {
    const size_t n = size_t(w.n_scale_entries());
    for (size_t i = 0; i < n; ++i) {
      const float v = std::ldexp(1.f, -6 - int(i % 7));
      if (w.scale_type == DType::F32) std::memcpy(w.scales.data() + 4 * i, &v, 4);
      else {
        const uint16_t h = w.scale_type == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(w.scales.data() + 2 * i, &h, 2);
      }
    }
    w.validate();
    return w;
  };
  uint32_t seed = 1700;
  for (const char* scheme : {"w8g128", "w8g64zp", "w8pc", "w8g128-f32"}) {
    const QuantizedWeight w = power_of_two_scales(make_weight(264, 1000, scheme, seed++));
    for (int64_t M : {1, 5}) {
      const Case c{M, 264, 1000, scheme, DType::BF16, DType::F32, "sm80_wo_stream"};
      EXPECT_LE(run_case(c, w, seed++), 2e-6) << name(c);
    }
    if (!hopper()) continue;
    for (int64_t M : {3, 17, 40, 100, 300, 1000}) {
      Case c{M, 264, 1000, scheme, DType::BF16, DType::F32, "sm90_wo_ws"};
      std::vector<uint8_t> native, f32;
      c.tuning = "wo_bf16_zero=auto";
      EXPECT_LE(run_case(c, w, seed, &native), 2e-6) << name(c);
      c.tuning = "wo_bf16_zero=off";
      EXPECT_LE(run_case(c, w, seed++, &f32), 2e-6) << name(c);
      EXPECT_EQ(native, f32) << name(c) << ": the bf16 int8 path and the f32 path differ";
    }
  }
  for (int64_t M : {3, 40, 300})
    for (const char* force : {"sm80_wo_stream", "sm90_wo_ws"}) {
      if (std::string(force) == "sm90_wo_ws" && !hopper()) continue;
      expect_ok({M, 264, 1000, "w8g64zp", DType::BF16, DType::BF16, force}, seed++);
      expect_ok({M, 264, 1000, "w8g128", DType::BF16, DType::BF16, force}, seed++);
    }
}

// The stream-K pieces of the tiles cut between CTAs, summed inside the wgmma kernel by the CTA
// that owns the tile (its first piece; tuning wo_reduce=inline) against the fixup kernel
// (wo_reduce=fixup; the planner picks per launch), the same weight prepared once with each: both
// sum the slots in CTA order, so the bits must be equal. Tiles cut into 2, 3-5, ~16 and 132
// pieces, whole-tile rounds plus stream-K, every token tile, f16 and bf16, a caller workspace;
// three calls in a row (the owners reset the completion flags for the next). The caller
// workspaces start as garbage: the fixup plan runs on them uncleared (it never reads the flags).
TEST(CudaWeightOnly, StreamKInlineReductionMatchesFixupKernel) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "the warp-specialized wgmma kernel needs sm_90a";
  struct Cut {
    int64_t M, N, K;
    const char* scheme;
    DType x;
    bool caller_ws;
    const char* tuning = "";  // on top of the reduction's key
  };
  const Cut cuts[] = {
      {16, 64, 69632, "w4g128", DType::F16, false},    // one tile, a piece per CTA
      {4, 1000, 7392, "w4g128", DType::F16, false},    // 8 tiles, ~16 pieces each
      {16, 4096, 8192, "w4g128", DType::F16, false},   // 32 tiles, ~4 pieces each
      {64, 10944, 4096, "w8g128", DType::F16, true},   // 86 tiles on 132 CTAs
      {33, 5000, 3000, "w4g128", DType::BF16, false},  // mt 64: 40 tiles
      {300, 2000, 4096, "w4g64asym", DType::F16, false},
      // mt 256, 256 tiles on 132 CTAs: a round of whole tiles + stream-K (the cost model alone
      // runs two rounds of whole tiles here)
      {1000, 8192, 4096, "w4g128", DType::F16, true, "wo_schedule=stream_k"},
  };
  uint32_t seed = 1300;
  for (const Cut& c : cuts) {
    PrepareOptions o;
    o.backend = BackendKind::CUDA;
    o.force_kernel = "sm90_wo_ws";
    const std::string extra = *c.tuning ? std::string(",") + c.tuning : std::string();
    const PrepareOptions o_fixup = test::with_tuning(o, "wo_reduce=fixup" + extra),
                         o_inline = test::with_tuning(o, "wo_reduce=inline" + extra);
    const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, seed++);
    const PreparedWeight fixup = prepare(w, o_fixup), in_kernel = prepare(w, o_inline);
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + " " + c.scheme +
                 " " + fixup.kernel_name(c.M, c.x));
    // the tiles are cut (stream-K pieces), and the knob reaches the plan
    const cuda::WoPlan pf = wo_plan_of(fixup, w, o_fixup, c.M, c.x), pi = wo_plan_of(in_kernel, w, o_inline, c.M, c.x);
    EXPECT_GT(cuda::stream_k_split_pieces(pf.sched), 0);
    EXPECT_TRUE(pf.fixup && !pf.sched.inline_reduce);
    EXPECT_TRUE(!pi.fixup && pi.sched.inline_reduce);
    // only the inline reduction reads the flags: the fixup plan owns none, and a caller's
    // workspace is cleared for the inline reduction alone
    EXPECT_EQ(pf.tickets, 0u);
    EXPECT_FALSE(cuda::wo_plan_reads_tickets(pf));
    EXPECT_TRUE(cuda::wo_plan_reads_tickets(pi));
    EXPECT_EQ(fixup.kernel_name(c.M, c.x), in_kernel.kernel_name(c.M, c.x));
    HostMat x = make_acts(c.M, c.K, c.x, seed++);
    DeviceBuffer dx(x.bytes.size()), dy(size_t(c.M * c.N) * 2);
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    DeviceBuffer ws(std::max({linear_workspace_size(fixup, c.M), linear_workspace_size(in_kernel, c.M), size_t(1)}));
    if (c.caller_ws) ASSERT_EQ(cudaMemset(ws.data(), 0x5A, ws.size()), cudaSuccess);  // garbage flags
    ExecContext ctx;
    if (c.caller_ws) {
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
    }
    auto run = [&](const PreparedWeight& weight) {
      EXPECT_EQ(cudaMemset(dy.data(), 0xFF, dy.size()), cudaSuccess);
      linear(dx.view(c.x, {c.M, c.K}), weight, dy.view(c.x, {c.M, c.N}), {}, ctx);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> out(dy.size());
      dy.copy_to_host(out.data(), out.size());
      return out;
    };
    const std::vector<uint8_t> want = run(fixup);
    size_t nan_bytes = 0;
    for (size_t i = 0; i + 1 < want.size(); i += 2) nan_bytes += want[i] == 0xFF && want[i + 1] == 0xFF;
    EXPECT_EQ(nan_bytes, 0u) << "the fixup run left poisoned outputs";
    for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(run(in_kernel), want) << "inline reduction, call " << rep;
  }
}

// The K split over a thread-block cluster (tuning wo_k_split=2, 4, 8; sm90_wo_ws_k_split.cuh):
// each tile's K in 2, 4 or 8 ranges on the CTAs of a cluster, the pieces summed through
// distributed shared memory by rank 0, which stores the tile. Decode and small batches at token
// tiles 16, 32 and 64 (the instantiations that have it: not the fold at 64), one and two CTAs per
// SM, odd N, K not a multiple of the stage (the last stage half past K), a K of 3 chunks (a forced
// 8 splits 2 ways, one stage each), groups smaller than a stage, offsets and zero points, int8
// codes, the fold, f16 / bf16 / f32 outputs, bias and relu6, a caller's workspace left as garbage
// (the split reads no flags). Against float64, the stream-K plan of the same weight (wo_k_split=1)
// within the same tolerance, every output written, and the same bits on three calls in a row (rank
// order).
TEST(CudaWeightOnly, WgmmaKSplitOverCluster) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "the warp-specialized wgmma kernel needs sm_90a";
  struct Split {
    int64_t M, N, K;
    const char* scheme;
    DType x, y;
    bool bias;
    Epilogue clamp;
    const char* tuning;  // on top of the split's key
  };
  const Split cases[] = {
      {1, 4096, 4096, "w4g128", DType::F16, DType::F16, false, {}, ""},
      {4, 1000, 7392, "w4g128", DType::BF16, DType::BF16, true, {}, ""},
      {16, 264, 1000, "w8g64zp", DType::F16, DType::F32, true, Epilogue::relu6(), ""},
      {13, 517, 3000, "w4g32asym", DType::F16, DType::F16, false, {}, ""},
      {33, 384, 2048, "w4g128", DType::BF16, DType::F32, true, {}, ""},
      {64, 200, 4096, "w8g128", DType::F16, DType::F16, false, Epilogue::relu6(), ""},
      {3, 128, 192, "w4g128", DType::F16, DType::F16, true, {}, ""},
      {16, 2048, 5120, "w4g128", DType::F16, DType::F16, false, {}, "wo_ctas_per_sm=1"},
      {32, 640, 2304, "w4g64", DType::BF16, DType::BF16, false, {}, "wo_ctas_per_sm=2"},
  };
  uint32_t seed = 2600;
  for (const Split& sc : cases) {
    const QuantizedWeight w = make_weight(sc.N, sc.K, sc.scheme, seed++);
    const std::string extra = *sc.tuning ? std::string(",") + sc.tuning : std::string();
    Case base{sc.M, sc.N, sc.K, sc.scheme, sc.x, sc.y, "sm90_wo_ws"};
    base.bias = sc.bias;
    base.clamp = sc.clamp;
    base.tuning = "wo_k_split=1" + extra;
    const double tol = tolerance(sc.x, sc.y);
    EXPECT_LE(run_case(base, w, seed), tol) << name(base);
    const int iterations = [&] {
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.force_kernel = "sm90_wo_ws";
      o = test::with_tuning(o, base.tuning);
      const cuda::WoPlan p = wo_plan_of(prepare(w, o), w, o, sc.M, sc.x);
      EXPECT_EQ(p.sched.k_split, 1) << name(base);
      return p.sched.chunks;
    }();
    for (int split : {2, 4, 8}) {
      Case c = base;
      c.tuning = "wo_k_split=" + std::to_string(split) + extra;
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.force_kernel = "sm90_wo_ws";
      o = test::with_tuning(o, c.tuning);
      const PreparedWeight pw = prepare(w, o);
      const cuda::WoPlan p = wo_plan_of(pw, w, o, sc.M, sc.x);
      int want = split;
      while (want > iterations) want /= 2;
      SCOPED_TRACE(name(c) + " " + pw.kernel_name(sc.M, sc.x));
      if (!cuda::ws_detail::ws_k_split_built(p.id.tile_m, p.id.fold, false)) {  // no split there
        EXPECT_EQ(p.sched.k_split, 1);
        continue;
      }
      EXPECT_EQ(p.sched.k_split, want);
      EXPECT_FALSE(p.fixup || p.sched.inline_reduce);
      EXPECT_EQ(p.tickets, 0u);
      EXPECT_NE(pw.kernel_name(sc.M, sc.x).find(",ksplit" + std::to_string(want) + ">"),
                std::string::npos);
      std::vector<uint8_t> first;
      EXPECT_LE(run_case(c, w, seed, &first), tol);
      // a caller's workspace of garbage, and the same bits on every call
      DeviceBuffer ws(std::max<size_t>(linear_workspace_size(pw, sc.M), 1));
      ASSERT_EQ(cudaMemset(ws.data(), 0x5A, ws.size()), cudaSuccess);
      ExecContext ctx;
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<uint8_t> out;
        run_case(c, w, seed, &out, ctx);
        EXPECT_EQ(out, first) << "call " << rep;
      }
    }
    ++seed;
  }
}

// The wgmma kernel's two epilogues: 16-bit output tiles staged in shared memory (stmatrix) and
// TMA-stored, 128 tokens a round (the default at token tiles of 128 and 256) or 32 (several rounds
// per tile; tuning wo_y_rows=32), against one store per value (wo_y_rows=0), the same weight
// prepared once per setting. The same sums, bias and clamp, so the bits must be equal. M and N cut the last tile (the TMA store clips it),
// f16 and bf16 outputs from either activation type, bias and relu6, whole tiles and stream-K
// owners, every token tile; a row pitch that is not a multiple of 8 elements, or rows that end
// inside a 16-byte chunk (N = 517 in rows of 520: a TMA store would write the chunk's columns past
// N), keep the direct stores and must still be right, the pad columns untouched.
TEST(CudaWeightOnly, WgmmaTmaStoreEpilogueMatchesDirectStores) {
  SKIP_WITHOUT_GPU();
  if (!hopper()) GTEST_SKIP() << "the warp-specialized wgmma kernel needs sm_90a";
  struct Shape {
    int64_t M, N, K;
    const char* scheme;
    DType x, y;
    bool bias;
    int64_t ldy = 0;  // row pitch of Y (0: N)
  };
  const Shape shapes[] = {
      {129, 200, 520, "w4g128", DType::F16, DType::F16, false},
      {300, 1000, 4096, "w4g64asym", DType::F16, DType::BF16, true},
      {1000, 8192, 4096, "w4g128", DType::F16, DType::F16, true},  // mt 256: whole tiles + stream-K
      {257, 328, 1000, "w8g128", DType::BF16, DType::BF16, true},
      {4096, 136, 776, "w4g128zp", DType::BF16, DType::F16, false},
      {64, 264, 4100, "w4g128", DType::F16, DType::F16, true},     // mt 64: staged only when forced (32)
      {300, 100, 300, "w4g128", DType::F16, DType::F16, true},     // ldy = 100: direct stores
      {1000, 517, 1000, "w4g128", DType::F16, DType::F16, true, 520},  // N % 8 != 0: direct stores
  };
  uint32_t seed = 1500;
  for (const Shape& c : shapes) {
    PrepareOptions o;
    o.backend = BackendKind::CUDA;
    o.force_kernel = "sm90_wo_ws";
    const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, seed++);
    // the planner's epilogue (wo_y_rows=-1: staged at token tiles of 128 and 256), direct stores,
    // and staged 32 tokens a round
    const PreparedWeight pw = prepare(w, test::with_tuning(o, "wo_y_rows=-1"));
    const PreparedWeight direct_w = prepare(w, test::with_tuning(o, "wo_y_rows=0"));
    const PreparedWeight rows32_w = prepare(w, test::with_tuning(o, "wo_y_rows=32"));
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + " " + c.scheme +
                 " y=" + dtype_name(c.y) + " " + pw.kernel_name(c.M, c.x));
    HostMat x = make_acts(c.M, c.K, c.x, seed++);
    const int64_t ldy = c.ldy ? c.ldy : c.N;
    DeviceBuffer dx(x.bytes.size()), dy(size_t(c.M * ldy) * 2);
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    std::vector<float> bias_h;
    DeviceBuffer dbias;
    Epilogue ep = Epilogue::relu6();
    if (c.bias) {
      bias_h = test::randn(size_t(c.N), seed++);
      dbias = DeviceBuffer(bias_h.size() * 4);
      dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
      ep.bias = dbias.view(DType::F32, {c.N});
    }
    auto run = [&](const PreparedWeight& weight) {
      EXPECT_EQ(cudaMemset(dy.data(), 0xFF, dy.size()), cudaSuccess);
      linear(dx.view(c.x, {c.M, c.K}), weight, TensorView::strided(dy.data(), c.y, {c.M, c.N}, {ldy, 1}, Device::CUDA), ep);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> out(dy.size());
      dy.copy_to_host(out.data(), out.size());
      return out;
    };
    const std::vector<uint8_t> direct = run(direct_w);
    const std::vector<uint8_t> staged = run(pw);
    size_t poisoned = 0, pad_written = 0;
    for (size_t i = 0; i + 1 < staged.size(); i += 2) {
      const bool nan = staged[i] == 0xFF && staged[i + 1] == 0xFF;
      if (int64_t(i / 2) % ldy < c.N) poisoned += nan;
      else pad_written += !nan;
    }
    EXPECT_EQ(poisoned, 0u) << "the TMA-store epilogue left outputs unwritten";
    EXPECT_EQ(pad_written, 0u) << "outputs written past N, into the row pitch's pad";
    EXPECT_EQ(staged, direct);
    EXPECT_EQ(run(rows32_w), direct) << "staged 32 tokens a round";
    // and both against the float64 reference on a few rows (relu6 after the bias)
    const std::vector<int64_t> rows = {0, c.M / 2, c.M - 1};
    HostMat xs = x.subset(rows);
    std::vector<double> ref(size_t(3 * c.N));
    Epilogue rep = Epilogue::relu6();
    if (c.bias) rep.bias = TensorView(bias_h.data(), DType::F32, {c.N});
    ref::linear_weight_only(xs.view(), w, TensorView(ref.data(), DType::F64, {3, c.N}), rep);
    double num = 0, den = 0;
    for (int r = 0; r < 3; ++r)
      for (int64_t n = 0; n < c.N; ++n) {
        const double a = test::value(staged, c.y, size_t(rows[r] * ldy + n)),
                     b = ref[size_t(r * c.N + n)];
        num += (a - b) * (a - b);
        den += b * b;
      }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), tolerance(c.x, c.y));
  }
}

// The streaming kernel's split-K reduction both ways, forced through the planner's knob: the
// splits of a tile reduced in a thread-block cluster (sm_90 images) or through global partials.
// Shapes where the splits cut groups (per-channel, g256, g16/g32 below a chunk), every token tile,
// f32 activations (two MMAs per tile), act-order, bias and clamp, odd N and K.
TEST(CudaWeightOnly, StreamKernelClusterAndGlobalReduction) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 900;
  for (const bool on : {true, false}) {
    const std::string t = on ? "wo_stream_cluster=on" : "wo_stream_cluster=off";
    SCOPED_TRACE(t);
    {
      // the knob reaches the plan (kernel_name does not show the reduction): the splits of a tile
      // reduce in a cluster where the image can launch one, and then need no global partials
      // (no workspace at all at M = 1, f16 outputs)
      PrepareOptions o = test::with_tuning({}, t);
      o.backend = BackendKind::CUDA;
      o.force_kernel = "sm80_wo_stream";
      const QuantizedWeight w = make_weight(512, 4096, "w4g128", 1);
      const PreparedWeight pw = prepare(w, o);
      const cuda::WoPlan p = wo_plan_of(pw, w, o, 1, DType::F16);
      EXPECT_GT(p.splits, 1) << pw.kernel_name(1);
      EXPECT_EQ(p.cluster, on && hopper()) << pw.kernel_name(1);
      EXPECT_EQ(linear_workspace_size(pw, 1) == 0, on && hopper()) << pw.kernel_name(1);
    }
    expect_ok({1, 4096, 4096, "w4g128", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
    expect_ok({2, 1000, 7392, "w4g32", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
    expect_ok({1, 520, 14336, "w8pc", DType::BF16, DType::F32, "sm80_wo_stream"}, seed++, t);
    expect_ok({1, 10944, 4096, "w4pc", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
    expect_ok({5, 300, 4100, "w4g256asym", DType::F16, DType::F16, "sm80_wo_stream", false, true}, seed++, t);
    expect_ok({17, 200, 3000, "w4g64zp", DType::BF16, DType::BF16, "sm80_wo_stream"}, seed++, t);
    expect_ok({40, 136, 2000, "w8g128", DType::F32, DType::F16, "sm80_wo_stream"}, seed++, t);
    expect_ok({9, 72, 777, "w4g128", DType::F16, DType::F32, "sm80_wo_stream", true, true, Epilogue::relu6()}, seed++, t);
    expect_ok({3, 10944, 7392, "w4g16", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
    // global partials reduced by 4 / 2 blocks of a tile (16-byte loads), and N % 4 != 0 (one
    // block, scalar loads)
    expect_ok({8, 4096, 8192, "w4g128", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
    expect_ok({4, 2048, 4096, "w8g128", DType::BF16, DType::BF16, "sm80_wo_stream"}, seed++, t);
    expect_ok({6, 517, 3000, "w4g128", DType::F16, DType::F16, "sm80_wo_stream"}, seed++, t);
  }
}

TEST(CudaWeightOnly, BadInput) {
  SKIP_WITHOUT_GPU();
  const QuantizedWeight w = make_weight(64, 256, "w4g128", 11);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  const PreparedWeight pw = prepare(w, o);
  std::vector<uint16_t> host(4 * 256);
  DeviceBuffer dx(4 * 256 * 2), dy(4 * 64 * 2);
  auto expect_error = [](auto fn, const char* needle) {
    try {
      fn();
      ADD_FAILURE() << "no error, expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { linear(TensorView(host.data(), DType::F16, {4, 256}), pw, dy.view(DType::F16, {4, 64})); },
               "cuda");
  expect_error([&] { linear(dx.view(DType::F16, {4, 255}), pw, dy.view(DType::F16, {4, 64})); }, "255");
  expect_error([&] { linear(dx.view(DType::I8, {4, 256}), pw, dy.view(DType::F16, {4, 64})); }, "dtype");
  QuantizedWeight odd = make_weight(16, 96, "w4g32", 12);
  odd.block_k = 48;  // not a power of two
  odd.scales.resize(size_t(odd.n_blocks_k() * 16 * 2));
  expect_error([&] { prepare(odd, o); }, "48");
}
