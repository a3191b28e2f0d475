// CUDA Fp8Block linear (activations quantized per token per 128 on the GPU, fp8b128 weights,
// Hopper wgmma GEMM) against ref::linear_fp8_block, the float64 oracle on the same quantized
// inputs. Skipped (visibly) without a GPU, or on a GPU that is not compute capability 9.0.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu/block_gemm_epilogue.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/host_data.hpp"
#include "gpu/linear_call.hpp"
#include "gpu/per_row_scales.hpp"
#include "gpu/chained_calls.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"
#include "mixq/shard.hpp"

using namespace mixq;

namespace {

using test::randn;
using test::to_bytes;
using test::value;

struct Case {
  int64_t M, N, K;
  DType xt = DType::BF16, yt = DType::BF16;
  bool bias = false;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool caller_workspace = false;
  std::string force;  // kernel name (PrepareOptions::force_kernel), empty: the dispatch
  int64_t rank = 0, world = 0;  // world > 0: the column shard `rank` of `world` of the N x K weight
};

std::string name(const Case& c) {
  return "M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" + std::to_string(c.K) +
         " x=" + dtype_name(c.xt) + " y=" + dtype_name(c.yt) + (c.bias ? " bias" : "") +
         " clamp [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + "]" +
         (c.force.empty() ? "" : " force=" + c.force) +
         (c.world ? " column shard " + std::to_string(c.rank) + " of " + std::to_string(c.world) : "");
}

void run(const Case& c, uint32_t seed) {
  SCOPED_TRACE(name(c));
  std::vector<float> wf = randn(size_t(c.N * c.K), seed, 0.05f);
  // Row blocks with very different magnitudes exercise the per-block weight scales.
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k) wf[size_t(n * c.K + k)] *= float(1 + (n / 128 + k / 128) % 5);
  QuantizedWeight w =
      quantize_weight(TensorView(wf.data(), DType::F32, {c.N, c.K}), parse_scheme("fp8b128"));
  if (c.world) w = shard(w, ShardSpec{c.rank, c.world, ShardAxis::Column});
  const int64_t N = w.N;
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Fp8Block;
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(w, o);
  if (!c.force.empty()) EXPECT_EQ(pw.kernel_name(c.M), c.force);

  const test::LinearCall call(c.M, c.K, N, c.xt, c.yt, c.bias, c.lo, c.hi, seed);
  const std::vector<uint8_t> y = call.run(pw, c.caller_workspace, c.caller_workspace);  // poisoned
  ASSERT_FALSE(y.empty());

  std::vector<double> ref(size_t(c.M * N));
  const Epilogue rep = call.host_epilogue();
  const QuantizedWeight plain = test::with_row_scales(w);  // the reference's whole blocks
  ref::linear_fp8_block(TensorView(const_cast<uint8_t*>(call.xb.data()), c.xt, {c.M, c.K}), plain,
                        TensorView(ref.data(), DType::F64, {c.M, N}), rep);
  double sxy = 0, sxx = 0, syy = 0, sdd = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = value(y, c.yt, i), r = ref[i];
    if (!std::isfinite(g)) {
      ADD_FAILURE() << "output (m " << i / N << ", n " << i % N << ") not written: " << g;
      return;
    }
    sxy += g * r;
    sxx += r * r;
    syy += g * g;
    sdd += (g - r) * (g - r);
  }
  const double cos_err = (sxx + syy) > 0 ? 1 - 2 * sxy / (sxx + syy) : 0;
  const double rel_fro = std::sqrt(sdd / std::max(sxx, 1e-300));
  EXPECT_LE(cos_err, 1e-3);
  EXPECT_LE(rel_fro, 2e-3);
}

}  // namespace

TEST(CudaFp8Block, RowCounts) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 1;
  for (int64_t M : {1, 7, 64, 129, 1000}) run({M, 1000, 1000}, seed++);
  run({2048, 264, 1000}, seed++);  // narrower N keeps the float64 reference quick
}

// Column shards whose split cut a 128-row block (n_phase): the rows left in the cut block and the
// block-aligned rest run as two pieces into their columns of y (the kernel names both), at the
// skinny and the tiled kernels' token counts, with bias and clamp.
TEST(CudaFp8Block, ColumnShardsThatCutARowBlock) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 40;
  for (const int64_t M : {1, 37, 300}) {
    Case c{M, 300, 512, DType::BF16, DType::BF16, true, -3.f, 3.f};
    c.rank = 1;
    c.world = 2;  // rows [150, 300): 106 rows of block 1, then block 2
    run(c, seed++);
    Case d{M, 1000, 640, DType::F16, DType::F32};
    d.rank = 2;
    d.world = 3;  // rows [667, 1000): 101 rows of block 5, then 232 rows from block 6
    run(d, seed++);
  }
  const QuantizedWeight w = shard(quantize_weight(TensorView(randn(300 * 256, 50).data(), DType::F32, {300, 256}),
                                                  parse_scheme("fp8b128")),
                                  ShardSpec{1, 2, ShardAxis::Column});
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Fp8Block;
  const std::string name = prepare(w, o).kernel_name(1);
  EXPECT_NE(name.find(" + "), std::string::npos) << name;
}

TEST(CudaFp8Block, OddShapesBiasClamp) {
  SKIP_WITHOUT_HOPPER();
  run({33, 384, 7168 + 64, DType::BF16, DType::BF16, true}, 11);
  run({129, 1000, 1000, DType::F16, DType::F32, true, -2.f, 3.f}, 12);
  run({5, 131, 77, DType::F32, DType::F16, true, 0.f}, 13);
  run({300, 257, 130, DType::BF16, DType::F32, false, -1e30f, 1e30f, true}, 14);
}

// The block GEMM's tile configurations by kernel name (force_kernel), the 256-row ones last.
constexpr const char* kEveryTile[] = {
    "sm90_fp8_block_gemm_bm128_bn128_s6", "sm90_fp8_block_gemm_bm128_bn128_s6_c2",
    "sm90_fp8_block_gemm_bm128_bn192_s5", "sm90_fp8_block_gemm_bm128_bn192_s5_c2",
    "sm90_fp8_block_gemm_bm256_bn128_s4", "sm90_fp8_block_gemm_bm256_bn128_s4_c2"};

// Every tile configuration forced: 128- and 192-wide tiles (192 spans two weight blocks at every
// other tile), single CTAs and CTA pairs multicasting B (an odd number of M tiles leaves the second
// CTA of the last pair entirely past M), 256-row tiles (M = 1, 129, 300: one or both sub-tiles of
// a warpgroup past M; in pairs, M = 300 leaves the second CTA's second warpgroup past M and M = 1
// the whole second CTA), several persistent waves.
TEST(CudaFp8Block, EveryTileConfiguration) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 40;
  for (const char* k : kEveryTile) {
    Case c{1, 1000, 1000};
    c.force = k;
    for (int64_t M : {1, 129, 300}) {
      c.M = M;
      run(c, seed++);
    }
    Case odd{383, 455, 7168 + 64, DType::F16, DType::F32, true, -3.f, 4.f};
    odd.force = k;
    run(odd, seed++);
    // > 132 tiles (128 x 128: 192): each CTA runs several, its ring wraps across them; the
    // 256-row tile needs twice the columns for as many (8 x 24)
    const bool tall = std::string(k).find("bm256") != std::string::npos;
    Case waves{2000, tall ? 3000 : 1500, 520, DType::BF16, DType::BF16, true};
    waves.force = k;
    run(waves, seed++);
  }
}

// The TMA-store epilogue against the direct stores (tuning w8a8_y_tma=off), byte for byte, with
// every tile configuration forced: M and N off the tile (M = 1 and 65 leave a consumer warpgroup's
// rows, or the pair's second CTA, past M), K off the 128-wide block, bias (f32 / bf16 / f16) and
// relu6, f16 and bf16 outputs. N = 7232 at 192-wide tiles leaves the last tile's third box past N.
// N = 517 in rows of ldy = 520 (a TMA store clipped inside a 16-byte chunk wrote the chunk's pad
// columns: docs/decisions/wo-wgmma-tma-store-epilogue.md), a 517-element pitch and a base 2 bytes past 16-byte alignment take
// the direct stores both times, and must leave the pad columns alone.
TEST(CudaFp8Block, TmaStoreEpilogueMatchesDirectStores) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<test::EpilogueShape> shapes = test::epilogue_shapes(7168 + 64);
  uint32_t seed = 60;
  for (const test::EpilogueShape& c : shapes) {
    const int64_t M = c.y.M, N = c.y.N;
    std::vector<float> wf = randn(size_t(N * c.K), seed++, 0.05f);
    const QuantizedWeight w =
        quantize_weight(TensorView(wf.data(), DType::F32, {N, c.K}), parse_scheme("fp8b128"));
    const std::vector<uint8_t> xb = to_bytes(randn(size_t(M * c.K), seed++), DType::BF16);
    DeviceBuffer dx(xb.size());
    dx.copy_from_host(xb.data(), xb.size());
    for (const char* k : kEveryTile) {
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.act = ActQuant::Fp8Block;
      o.force_kernel = k;
      const PreparedWeight pw = test::expect_epilogues_match(w, o, dx.view(DType::BF16, {M, c.K}), c.y, seed++);
      EXPECT_EQ(pw.kernel_name(M), k);
    }
  }
}

namespace {
// A random N x 256 weight in `scheme` and the options of a CUDA Fp8Block preparation.
QuantizedWeight random_weight(int64_t N, const char* scheme, uint32_t seed) {
  std::vector<float> wf = randn(size_t(N * 256), seed);
  return quantize_weight(TensorView(wf.data(), DType::F32, {N, 256}), parse_scheme(scheme));
}
PrepareOptions fp8_block_options() {
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Fp8Block;
  return o;
}
}  // namespace

TEST(CudaFp8Block, RejectsUnknownKernel) {
  SKIP_WITHOUT_HOPPER();
  PrepareOptions o = fp8_block_options();
  o.force_kernel = "sm90_fp8_block_gemm_bm128_bn256_s4";
  try {
    prepare(random_weight(256, "fp8b128", 5), o);
    ADD_FAILURE() << "an unknown kernel name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm90_fp8_block_gemm_bm128_bn128_s6_c2"), std::string::npos)
        << e.what();
  }
}

TEST(CudaFp8Block, ActivationAndOutputTypes) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 20;
  for (DType xt : {DType::F16, DType::BF16, DType::F32})
    for (DType yt : {DType::F16, DType::BF16, DType::F32}) run({70, 200, 520, xt, yt, true}, seed++);
}

// act = fp8-block takes e4m3 block weights and the 4-bit W4A8 forms (tests/gpu/test_cuda_w4a8.cpp);
// every other weight is refused at prepare.
TEST(CudaFp8Block, RejectsNonFp8Weights) {
  SKIP_WITHOUT_HOPPER();
  for (const char* scheme : {"w8g128", "w4g64", "w4g128asym"})
    EXPECT_THROW(prepare(random_weight(64, scheme, 3), fp8_block_options()), Error) << scheme;
}

// The skinny kernel (M <= 64: the weights as the MMA's wide operand, stream-K over every SM) at
// every token count around its token tiles, then the 128-row tiles from M = 65.
TEST(CudaFp8Block, SkinnyKernelEveryTokenCount) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 100;
  for (int64_t M : {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64}) {
    Case c{M, 1000, 1000};
    c.force = std::string("sm90_fp8_block_skinny_mt") + (M <= 16 ? "16" : M <= 32 ? "32" : "64");
    run(c, seed++);
    PrepareOptions o = {};
    o.backend = BackendKind::CUDA;
    o.act = ActQuant::Fp8Block;
    std::vector<float> wf = randn(size_t(256 * 256), seed);
    const PreparedWeight pw = prepare(
        quantize_weight(TensorView(wf.data(), DType::F32, {256, 256}), parse_scheme("fp8b128")), o);
    EXPECT_EQ(pw.kernel_name(M), c.force) << "the dispatch at M = " << M;
    EXPECT_EQ(pw.kernel_name(65), "sm90_fp8_block_gemm_bm128_bn128_s6");
  }
  // the 128-token tile, forced (the dispatch keeps the 128-row tiles past M = 64)
  for (int64_t M : {3, 65, 100, 128}) {
    Case c{M, 1000, 1000};
    c.force = "sm90_fp8_block_skinny_mt128";
    run(c, seed++);
  }
  run({128, 131 * 128 + 5, 256, DType::BF16, DType::F16, true, -1e30f, 1e30f, false,
       "sm90_fp8_block_skinny_mt128"}, seed++);
  run({77, 200, 14336, DType::F16, DType::BF16, false, -1e30f, 1e30f, true,
       "sm90_fp8_block_skinny_mt128"}, seed++);
}

// Shapes that cut the stream-K ranges every way: a tile in 28 pieces (2 tiles x 112 K blocks on
// 56 CTAs), whole tiles per CTA with the last one past N (131 x 128 + 5 rows), N and K off the
// 128 blocks, every dtype, bias and clamp, a caller workspace (poisoned: the quantizer zeroes the
// tickets), and a
// larger token tile forced for fewer tokens.
TEST(CudaFp8Block, SkinnyKernelOddShapesAndCutTiles) {
  SKIP_WITHOUT_HOPPER();
  run({5, 517, 7168 + 64, DType::F16, DType::F32, true, -2.f, 3.f}, 120);
  run({1, 200, 14336, DType::BF16, DType::BF16}, 121);
  run({16, 131 * 128 + 5, 256, DType::BF16, DType::F16, true}, 122);
  run({33, 131, 77, DType::F32, DType::BF16, true, 0.f}, 123);
  run({7, 1000, 3000, DType::F16, DType::F16, true, -1e30f, 1e30f, true}, 124);
  run({64, 300, 4000, DType::BF16, DType::F32, false, -1e30f, 1e30f, true}, 125);
  Case c{3, 640, 1000};
  c.force = "sm90_fp8_block_skinny_mt64";
  run(c, 126);
  c.M = 20;
  c.force = "sm90_fp8_block_skinny_mt32";
  run(c, 127);
}

TEST(CudaFp8Block, SkinnyKernelRejectsMoreTokensThanItsTile) {
  SKIP_WITHOUT_HOPPER();
  PrepareOptions o = fp8_block_options();
  o.force_kernel = "sm90_fp8_block_skinny_mt16";
  const PreparedWeight pw = prepare(random_weight(256, "fp8b128", 7), o);
  DeviceBuffer dx(17 * 256 * 2), dy(17 * 256 * 2);
  try {
    linear(dx.view(DType::BF16, {17, 256}), pw, dy.view(DType::BF16, {17, 256}));
    ADD_FAILURE() << "M = 17 ran on a kernel of 16-token tiles";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("M = 17"), std::string::npos) << e.what();
  }
}

// Deterministic, graph-capturable, and safe under programmatic dependent launch
// (chained_calls.hpp).
// 4096 x 4096 cuts tiles across CTAs (tickets, partials).
TEST(CudaFp8Block, SkinnyKernelDeterministicChainedAndGraphCaptured) {
  SKIP_WITHOUT_HOPPER();
  const int64_t D = 4096;
  // each prepared with and without dependent launch (w8a8_skinny_pdl)
  const test::PdlWeights wa = test::prepare_with_and_without_pdl(
      quantize_weight(TensorView(randn(size_t(D * D), 31, 0.02f).data(), DType::F32, {D, D}),
                      parse_scheme("fp8b128")),
      fp8_block_options());
  const test::PdlWeights wb = test::prepare_with_and_without_pdl(
      quantize_weight(TensorView(randn(size_t(D * D), 32, 0.02f).data(), DType::F32, {D, D}),
                      parse_scheme("fp8b128")),
      fp8_block_options());
  for (const int64_t M : {int64_t(1), int64_t(16), int64_t(40)})
    test::expect_chained_calls_match(wa, wb, D, M, 33);
}
