// CUDA INT8 GEMMs against the float64 references:
//  - W8A8 per block: the GEMM alone on host-quantized activations (linear(QuantizedActivations))
//    vs ref::linear_w8a8_block (the four-term formula on the same codes), and end to end (device
//    quantizer + GEMM) vs ref::linear_w8a8_block_dequant (dequantize everything, float64);
//  - per-tensor requantized: vs ref::linear_int8_requant, exact.
// Outputs are poisoned (NaN / 0x7F bytes) before every run and every element is checked for it;
// values are compared on every row up to M = 128 and on sampled rows (tile edges included) above.
// Skipped (visibly) when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/block_gemm_epilogue.hpp"
#include "gpu/chained_calls.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/host_data.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

using namespace mixq;

namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

using test::HostMat;
using test::randn;
using test::random_mat;

std::vector<int64_t> rows_to_check(int64_t M) {
  std::vector<int64_t> r;
  if (M <= 128) {
    for (int64_t m = 0; m < M; ++m) r.push_back(m);
    return r;
  }
  for (int64_t m : {int64_t(0), int64_t(1), int64_t(15), int64_t(16), int64_t(63), int64_t(64),
                    int64_t(127), int64_t(128), int64_t(129), int64_t(255), int64_t(256)})
    if (m < M) r.push_back(m);
  std::mt19937 rng{static_cast<uint32_t>(M)};
  for (int i = 0; i < 16; ++i) r.push_back(int64_t(rng() % uint32_t(M)));
  r.push_back(M - 1);
  return r;
}

// Relative Frobenius error of the checked rows of y (device result, [M][N]) vs ref ([rows][N]
// f64), after verifying that no element of y is still poisoned (NaN).
double rel_error(const std::vector<uint8_t>& y, DType yt, int64_t M, int64_t N,
                 const std::vector<int64_t>& rows, const std::vector<double>& ref) {
  for (int64_t i = 0; i < M * N; ++i) {
    const double v = test::value(y, yt, size_t(i));
    if (!std::isfinite(v)) {
      ADD_FAILURE() << "element (" << i / N << ", " << i % N << ") not written or not finite: " << v;
      return INFINITY;
    }
  }
  double num = 0, den = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t n = 0; n < N; ++n) {
      const double a = test::value(y, yt, size_t(rows[r] * N + n)), b = ref[r * N + n];
      num += (a - b) * (a - b);
      den += b * b;
    }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct BlockCase {
  int64_t M, N, K, g;
  bool offset;
  DType xt = DType::F16, yt = DType::F32;
  bool bias = false;
  bool clamp = false;
  std::string force;
};

std::string name_of(const BlockCase& c) {
  return "M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " g=" + std::to_string(c.g) + (c.offset ? " offset" : " sym") + " x=" +
         dtype_name(c.xt) + " y=" + dtype_name(c.yt) + (c.bias ? " bias" : "") +
         (c.clamp ? " clamp" : "") + (c.force.empty() ? "" : " force=" + c.force);
}

// Output-rounding part of the error budget: the GEMM's f32 result is within ~1e-6 of the exact
// value, the stored 16-bit output adds half an ulp of its type.
double out_tolerance(DType yt) {
  if (yt == DType::F16) return 6e-4;  // 2^-11 relative, rms well below
  if (yt == DType::BF16) return 4e-3; // 2^-8
  return 1e-5;
}

struct BlockResult {
  double gemm_err = INFINITY;  // GEMM on host-quantized X vs the four-term reference
  double e2e_err = INFINITY;   // device quantizer + GEMM vs the dequantized float64 reference
};

BlockResult run_block_case(const BlockCase& c, uint32_t seed) {
  BlockResult res;
  const std::string scheme = "w8g" + std::to_string(c.g) + (c.offset ? "asym" : "");
  std::vector<float> wf = randn(size_t(c.N * c.K), seed, 0.05f);
  if (c.offset)  // a non-zero mean per row so that the offset terms matter
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t k = 0; k < c.K; ++k) wf[size_t(n * c.K + k)] += 0.02f * float(n % 7) - 0.05f;
  const QuantizedWeight w =
      quantize_weight(TensorView(wf.data(), DType::F32, {c.N, c.K}), parse_scheme(scheme));
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8Block;
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(w, o);

  HostMat x = random_mat(c.M, c.K, c.xt, seed + 1);
  for (size_t i = 0; i < size_t(c.K); ++i)  // a shifted row: large activation offsets
    if (c.xt == DType::F32) {
      float f;
      std::memcpy(&f, x.bytes.data() + 4 * i, 4);
      f += 3.f;
      std::memcpy(x.bytes.data() + 4 * i, &f, 4);
    }
  Epilogue ep;
  std::vector<float> bias_h;
  DeviceBuffer dbias;
  if (c.bias) {
    bias_h = randn(size_t(c.N), seed + 3);
    dbias = DeviceBuffer(bias_h.size() * 4);
    dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
    ep.bias = dbias.view(DType::F32, {c.N});
  }
  if (c.clamp) {
    ep.clamp_lo = -0.5f;
    ep.clamp_hi = 0.75f;
  }
  Epilogue ep_host = ep;
  if (c.bias) ep_host.bias = TensorView(bias_h.data(), DType::F32, {c.N});

  const std::vector<int64_t> rows = rows_to_check(c.M);
  HostMat xs = x.subset(rows);
  const int64_t R = int64_t(rows.size());
  std::vector<double> ref4(size_t(R * c.N)), refd(size_t(R * c.N));
  ref::linear_w8a8_block(xs.view(), w, c.g, TensorView(ref4.data(), DType::F64, {R, c.N}), ep_host);
  ref::linear_w8a8_block_dequant(xs.view(), w, c.g, TensorView(refd.data(), DType::F64, {R, c.N}),
                                 ep_host);

  const size_t yb = size_t(c.M * c.N) * (dtype_bits(c.yt) / 8);
  DeviceBuffer dy(yb);
  std::vector<uint8_t> y(yb);

  // 1) GEMM alone on host-quantized activations uploaded in the act_quant.hpp layout.
  {
    const QuantizedActivationsBuffer a = quantize_activations_int8_block(x.view(), c.g);
    const int64_t ldq = a.row_pitch, ldm = a.meta_pitch, nb = a.n_blocks();
    // The host buffer is already in the GEMM layout: its codes go up as they are.
    const std::vector<uint8_t>& q = a.q;
    // Pad rows of the meta get garbage-like values: the GEMM must not use them for valid rows.
    std::vector<float> sx(a.scale), ox(a.offset);
    std::vector<int32_t> sums(a.sums);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t m = c.M; m < ldm; ++m) {
        sx[size_t(b * ldm + m)] = 1e30f;
        ox[size_t(b * ldm + m)] = -1e30f;
        sums[size_t(b * ldm + m)] = 1 << 30;
      }
    DeviceBuffer dq(q.size()), dsx(sx.size() * 4), dox(ox.size() * 4), dsum(sums.size() * 4);
    dq.copy_from_host(q.data(), q.size());
    dsx.copy_from_host(sx.data(), sx.size() * 4);
    dox.copy_from_host(ox.data(), ox.size() * 4);
    dsum.copy_from_host(sums.data(), sums.size() * 4);
    const auto meta = [&](const DeviceBuffer& b, DType t) {
      return TensorView::strided(b.data(), t, {nb, c.M}, {ldm, 1}, Device::CUDA);
    };
    const QuantizedActivations xq = QuantizedActivations::int8_block(
        c.g, TensorView::strided(dq.data(), DType::I8, {c.M, c.K}, {ldq, 1}, Device::CUDA),
        meta(dsx, DType::F32), meta(dox, DType::F32), meta(dsum, DType::I32));
    if (cudaMemset(dy.data(), 0xFF, yb) != cudaSuccess) return res;
    linear(xq, pw, dy.view(c.yt, {c.M, c.N}), ep);
    if (cudaDeviceSynchronize() != cudaSuccess) return res;
    dy.copy_to_host(y.data(), yb);
    res.gemm_err = rel_error(y, c.yt, c.M, c.N, rows, ref4);
  }
  // 2) End to end through mixq::linear (device activation quantizer), caller workspace poisoned
  //    (the quantizer zeroes the skinny kernel's tickets in it).
  {
    DeviceBuffer dx(x.bytes.size());
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    DeviceBuffer ws(linear_workspace_size(pw, c.M));
    if (ws.size() > 0 && cudaMemset(ws.data(), 0x5C, ws.size()) != cudaSuccess) return res;
    ExecContext ctx;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    if (cudaMemset(dy.data(), 0xFF, yb) != cudaSuccess) return res;
    linear(dx.view(c.xt, {c.M, c.K}), pw, dy.view(c.yt, {c.M, c.N}), ep, ctx);
    if (cudaDeviceSynchronize() != cudaSuccess) return res;
    dy.copy_to_host(y.data(), yb);
    res.e2e_err = rel_error(y, c.yt, c.M, c.N, rows, refd);
  }
  return res;
}

// End to end vs the dequantize-everything float64 reference: the codes are identical (the device
// quantizer does the host's math), so the gap is the f32 evaluation of the four-term sum (a few
// f32 roundings per K block, partly cancelling offset terms): documented bound 2e-5 for f32
// output, plus the output rounding for 16-bit outputs.
double e2e_tolerance(DType yt) { return yt == DType::F32 ? 2e-5 : out_tolerance(yt); }

void check_block(const BlockCase& c, uint32_t seed) {
  const BlockResult r = run_block_case(c, seed);
  EXPECT_LE(r.gemm_err, out_tolerance(c.yt)) << name_of(c) << " (GEMM vs four-term reference)";
  EXPECT_LE(r.e2e_err, e2e_tolerance(c.yt)) << name_of(c) << " (end to end vs dequant reference)";
}

TEST(CudaInt8Block, ShapesAndBlocks) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (int64_t g : {64, 128})
    for (bool off : {false, true})
      for (int64_t M : {1, 2, 7, 16, 33, 128, 300, 1000})
        check_block({M, 1000, 1000, g, off, DType::F16, DType::F32}, seed++);
}

TEST(CudaInt8Block, LongKOddN) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (int64_t g : {64, 128})
    for (bool off : {false, true})
      for (int64_t M : {1, 16, 33, 300})
        check_block({M, 257, 4096 + 64, g, off, DType::BF16, DType::F32}, seed++);
}

TEST(CudaInt8Block, DtypesBiasClamp) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  for (DType xt : {DType::F16, DType::BF16, DType::F32})
    for (DType yt : {DType::F16, DType::BF16, DType::F32})
      check_block({37, 203, 520, 64, true, xt, yt, true, true}, seed++);
  check_block({5, 130, 136, 128, false, DType::F32, DType::F32, true, false}, seed++);
  check_block({129, 1000, 1000, 128, false, DType::F16, DType::BF16, false, true}, seed++);
}

TEST(CudaInt8Block, EveryKernel) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 400;
  for (const char* k : {"sm80_i8_16x32", "sm80_i8_64x64", "sm80_i8_128x128"})
    for (int64_t M : {3, 70, 200})
      for (int64_t g : {64, 128})
        check_block({M, 300, 700, g, M == 70, DType::F16, DType::F32, true, false, k}, seed++);
}

// The Hopper wgmma kernels (sm90_w8a8_gemm.cu: single CTAs, CTA pairs multicasting the weight
// tile, 256 x 64 tiles of two m64 sub-tiles per warpgroup), forced by name: every M from one row
// (the pair's second CTA entirely past M) to several persistent waves of 128 x 128 tiles, odd N / K
// (TMA zero fill past N, K and M), both weight modes, every output type, bias and clamp; the single
// CTAs also with K blocks of 64 (two per stage; K = 4160, 520, 7000 give odd block counts, the last
// stage's second block past K). Skipped (visibly) off compute capability 9.0.

TEST(CudaInt8Block, HopperWgmma) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 500;
  for (const std::string k : {"sm90_i8_128x128", "sm90_i8_128x128_c2", "sm90_i8_256x64"})
    for (int64_t g : {64, 128}) {
      if (g == 64 && k != "sm90_i8_128x128") continue;  // K blocks of 64: single CTAs only
      SCOPED_TRACE(k + " g" + std::to_string(g));
      for (bool off : {false, true})
        for (int64_t M : {1, 7, 128, 129, 300, 1000})
          check_block({M, 1000, 1000, g, off, DType::F16, DType::F32, false, false, k}, seed++);
      for (bool off : {false, true}) {
        check_block({33, 257, 4096 + 64, g, off, DType::BF16, DType::F32, false, false, k},
                    seed++);
        check_block({300, 130, 136, g, off, DType::F32, DType::F32, true, false, k}, seed++);
        // > 132 tiles: the persistent loop and the stage ring wrap across tiles
        check_block({2000, 1500, 520, g, off, DType::F16, DType::F32, true, false, k}, seed++);
        // more rank-1 stages (K / 1024) than ring slots, on CTAs that run several tiles (a ring
        // slot held across tiles deadlocked this once: docs/decisions/int8-block-gemm.md)
        check_block({2000, 1500, 7000, g, off, DType::F16, DType::F32, false, false, k}, seed++);
      }
      for (DType xt : {DType::F16, DType::BF16, DType::F32})
        for (DType yt : {DType::F16, DType::BF16, DType::F32})
          check_block({201, 203, 520, g, true, xt, yt, true, true, k}, seed++);
    }
}

// The Hopper kernels' TMA-store epilogue against their direct stores (tuning w8a8_y_tma=off),
// byte for byte (block_gemm_epilogue.hpp), every sm90_i8 kernel forced, both weight modes: M and N
// off the tile (M = 65: on 256 x 64 tiles the second sub-tile holds one row and the second warp
// group's rows lie past M), K off the K block, bias (f32 / bf16 / f16) and relu6, f16 and bf16
// outputs, and three layouts that take the direct stores both times: N = 517 in rows of 520 (a TMA
// store clipped inside a 16-byte chunk writes the whole chunk), a 517-element pitch, a base 2 bytes
// past 16-byte alignment.
TEST(CudaInt8Block, HopperTmaStoreEpilogueMatchesDirectStores) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  const std::vector<test::EpilogueShape> shapes = test::epilogue_shapes(4096 + 64);
  uint32_t seed = 700;
  bool offset = false;
  for (const test::EpilogueShape& c : shapes) {
    const int64_t M = c.y.M, N = c.y.N;
    std::vector<float> wf = randn(size_t(N * c.K), seed++, 0.05f);
    if (offset)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < c.K; ++k) wf[size_t(n * c.K + k)] += 0.02f * float(n % 7) - 0.05f;
    const QuantizedWeight w = quantize_weight(TensorView(wf.data(), DType::F32, {N, c.K}),
                                              parse_scheme(offset ? "w8g128asym" : "w8g128"));
    offset = !offset;
    HostMat x = random_mat(M, c.K, DType::F16, seed++);
    DeviceBuffer dx(x.bytes.size());
    dx.copy_from_host(x.bytes.data(), x.bytes.size());
    for (const char* k : {"sm90_i8_128x128", "sm90_i8_128x128_c2", "sm90_i8_256x64"}) {
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.act = ActQuant::Int8Block;
      o.force_kernel = k;
      const PreparedWeight pw = test::expect_epilogues_match(w, o, dx.view(DType::F16, {M, c.K}), c.y, seed++);
      EXPECT_EQ(pw.kernel_name(M).rfind(std::string(k) + "<g128", 0), 0u) << pw.kernel_name(M);
    }
  }
}

// The few-token Hopper kernel (sm90_i8_skinny_mt*: weights as the wide wgmma operand, stream-K
// over every SM) at every token count around its tiles, both K blocks (g = 64: two blocks per
// 128-K stage) and weight modes, against the four-term reference (GEMM alone) and the dequantized
// reference (end to end, caller workspace: tickets cleared per call).
TEST(CudaInt8Block, HopperSkinnyEveryTokenCount) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 800;
  for (int64_t g : {64, 128})
    for (bool off : {false, true})
      for (int64_t M : {1, 3, 16, 17, 32, 33, 64, 65, 128}) {
        if (g == 64 && M > 64) continue;  // the 128-token tile takes K blocks of 128 only
        const std::string k = std::string("sm90_i8_skinny_mt") +
                              (M <= 16 ? "16" : M <= 32 ? "32" : M <= 64 ? "64" : "128");
        check_block({M, 1000, 1000, g, off, DType::F16, DType::F32}, seed++);  // the dispatch
        check_block({M, 1000, 1000, g, off, DType::BF16, DType::F32, false, false, k}, seed++);
      }
  std::vector<float> wf = randn(256 * 256, 12, 0.05f);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8Block;
  const PreparedWeight pw = prepare(
      quantize_weight(TensorView(wf.data(), DType::F32, {256, 256}), parse_scheme("w8g64")), o);
  EXPECT_EQ(pw.kernel_name(1), "sm90_i8_skinny_mt16<g64>");
  EXPECT_EQ(pw.kernel_name(64), "sm90_i8_skinny_mt64<g64>");
  EXPECT_EQ(pw.kernel_name(65), "sm90_i8_128x128<g64>");  // past the skinny tiles of g = 64
  const PreparedWeight p128 = prepare(
      quantize_weight(TensorView(wf.data(), DType::F32, {256, 256}), parse_scheme("w8g128")), o);
  // M = 65-128, g128: the 128 x 128 kernel up to K = 8192, the 128-token tile beyond
  EXPECT_EQ(p128.kernel_name(100), "sm90_i8_128x128<g128>");
  EXPECT_EQ(p128.kernel_name(129), "sm90_i8_128x128<g128>");
  std::vector<float> wlong = randn(64 * 8320, 13, 0.05f);
  const PreparedWeight plong = prepare(
      quantize_weight(TensorView(wlong.data(), DType::F32, {64, 8320}), parse_scheme("w8g128")),
      o);
  EXPECT_EQ(plong.kernel_name(64), "sm90_i8_skinny_mt64<g128>");
  EXPECT_EQ(plong.kernel_name(65), "sm90_i8_skinny_mt128<g128>");
  EXPECT_EQ(plong.kernel_name(128), "sm90_i8_skinny_mt128<g128>");
  EXPECT_EQ(plong.kernel_name(129), "sm90_i8_128x128<g128>");
  o.force_kernel = "sm90_i8_skinny_mt128";  // K blocks of 64 do not fit the 128-token tile
  EXPECT_THROW(prepare(quantize_weight(TensorView(wf.data(), DType::F32, {256, 256}),
                                       parse_scheme("w8g64")), o),
               Error);
}

// Shapes that cut the stream-K ranges every way (a tile in many pieces; whole tiles per CTA with
// the last past N; K off the block: K = 136 is three g = 64 blocks, the second stage's second one
// past K), every dtype, bias and clamp, a larger token tile forced for fewer tokens.
TEST(CudaInt8Block, HopperSkinnyOddShapes) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 900;
  for (int64_t g : {64, 128})
    for (bool off : {false, true}) {
      check_block({1, 200, 14336, g, off, DType::BF16, DType::F32}, seed++);
      check_block({16, 131 * 128 + 5, 256, g, off, DType::F16, DType::BF16, true, false}, seed++);
      check_block({5, 517, 4096 + 64, g, off, DType::F32, DType::F16, true, true}, seed++);
      check_block({33, 131, 136, g, off, DType::BF16, DType::F32, true, false}, seed++);
      check_block({3, 640, 1000, g, off, DType::F16, DType::F32, false, false,
                   "sm90_i8_skinny_mt64"}, seed++);
      if (g == 128) {
        check_block({100, 131 * 128 + 5, 256, g, off, DType::BF16, DType::F16, true, true}, seed++);
        check_block({77, 200, 14336, g, off, DType::F16, DType::F32}, seed++);
      }
    }
  for (DType xt : {DType::F16, DType::BF16, DType::F32})
    for (DType yt : {DType::F16, DType::BF16, DType::F32})
      check_block({37, 203, 520, 64, true, xt, yt, true, true}, seed++);
}

// Deterministic, graph-capturable, safe under dependent launch (chained_calls.hpp).
TEST(CudaInt8Block, HopperSkinnyChainedAndGraphCaptured) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  const int64_t D = 4096;
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8Block;
  // each prepared with and without dependent launch (w8a8_skinny_pdl)
  const test::PdlWeights wa = test::prepare_with_and_without_pdl(
      quantize_weight(TensorView(randn(size_t(D * D), 41, 0.02f).data(), DType::F32, {D, D}),
                      parse_scheme("w8g128")), o);
  const test::PdlWeights wb = test::prepare_with_and_without_pdl(
      quantize_weight(TensorView(randn(size_t(D * D), 42, 0.02f).data(), DType::F32, {D, D}),
                      parse_scheme("w8g64asym")), o);
  // 1, 16, 40: the skinny kernels; 200: the 128 x 128 kernels (g = 128 and g = 64)
  for (const int64_t M : {int64_t(1), int64_t(16), int64_t(40), int64_t(200)})
    test::expect_chained_calls_match(wa, wb, D, M, 43);
}

// K blocks of 64 on the 128 x 128 kernel at small sizes (the sanitizer subset): odd block counts
// (K = 136: three blocks, the second stage's second past K; K = 4160: 65), M and N off the tile.
TEST(CudaInt8Block, HopperWgmmaG64OddBlocks) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 950;
  for (bool off : {false, true}) {
    check_block({300, 130, 136, 64, off, DType::F16, DType::BF16, true, true}, seed++);
    check_block({129, 257, 4096 + 64, 64, off, DType::BF16, DType::F32, false, false}, seed++);
    check_block({65, 203, 520, 64, off, DType::F32, DType::F16, true, false}, seed++);
  }
}

// The pair and 256 x 64 kernels run K blocks of 128 only: forced on a g = 64 weight they are
// refused (at prepare or at the call), never run.
TEST(CudaInt8Block, HopperPairAndTallRefuseG64) {
  SKIP_WITHOUT_GPU();
  std::vector<float> wf = randn(64 * 256, 11, 0.05f);
  DeviceBuffer dx(200 * 256 * 4), dy(200 * 64 * 4);
  for (const char* k : {"sm90_i8_128x128_c2", "sm90_i8_256x64"}) {
    PrepareOptions o;
    o.backend = BackendKind::CUDA;
    o.act = ActQuant::Int8Block;
    o.force_kernel = k;
    try {
      const PreparedWeight pw = prepare(
          quantize_weight(TensorView(wf.data(), DType::F32, {64, 256}), parse_scheme("w8g64")), o);
      linear(dx.view(DType::F32, {200, 256}), pw, dy.view(DType::F32, {200, 64}));
      ADD_FAILURE() << k << " was accepted for g = 64";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("K block 128"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaInt8Block, DeterministicAndInternalScratch) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 150, N = 500, K = 640;
  std::vector<float> wf = randn(size_t(N * K), 7, 0.05f);
  const QuantizedWeight w = quantize_weight(TensorView(wf.data(), DType::F32, {N, K}),
                                            parse_scheme("w8g128asym"));
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8Block;
  const PreparedWeight pw = prepare(w, o);
  HostMat x = random_mat(M, K, DType::F16, 8);
  DeviceBuffer dx(x.bytes.size()), dy(size_t(M * N) * 4);
  dx.copy_from_host(x.bytes.data(), x.bytes.size());
  std::vector<uint8_t> y1(dy.size()), y2(dy.size());
  for (auto* y : {&y1, &y2}) {
    CUDA_OK(cudaMemset(dy.data(), 0xFF, dy.size()));
    linear(dx.view(DType::F16, {M, K}), pw, dy.view(DType::F32, {M, N}));  // internal scratch
    CUDA_OK(cudaDeviceSynchronize());
    dy.copy_to_host(y->data(), y->size());
  }
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size()));
  EXPECT_NE(pw.kernel_name(1), pw.kernel_name(4096));
}

TEST(CudaInt8Block, BadInputs) {
  SKIP_WITHOUT_GPU();
  std::vector<float> wf = randn(64 * 256, 9, 0.05f);
  const TensorView wv(wf.data(), DType::F32, {64, 256});
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8Block;
  // block mismatch
  o.act_block = 64;
  try {
    prepare(quantize_weight(wv, parse_scheme("w8g128")), o);
    ADD_FAILURE() << "act_block 64 with a g128 weight was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("act_block"), std::string::npos) << e.what();
  }
  o.act_block = 0;
  // an unsupported block size
  try {
    prepare(quantize_weight(wv, parse_scheme("w8g32")), o);
    ADD_FAILURE() << "g32 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
  }
  // int4 weights
  EXPECT_THROW(prepare(quantize_weight(wv, parse_scheme("w4g128")), o), Error);
  // wrong activation / output dtypes, too small a workspace, an unknown kernel name
  const PreparedWeight pw = prepare(quantize_weight(wv, parse_scheme("w8g128")), o);
  DeviceBuffer dx(4 * 256 * 4), dy(4 * 64 * 4);
  EXPECT_THROW(linear(dx.view(DType::I8, {4, 256}), pw, dy.view(DType::F32, {4, 64})), Error);
  EXPECT_THROW(linear(dx.view(DType::F32, {4, 256}), pw, dy.view(DType::I8, {4, 64})), Error);
  EXPECT_THROW(linear(dx.view(DType::F32, {4, 255}), pw, dy.view(DType::F32, {4, 64})), Error);
  ExecContext small;
  small.workspace = dx.data();
  small.workspace_bytes = 16;
  try {
    linear(dx.view(DType::F32, {4, 256}), pw, dy.view(DType::F32, {4, 64}), {}, small);
    ADD_FAILURE() << "a 16-byte workspace was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
  // an unknown kernel name: refused at prepare (sizing the workspace asks for the kernel), with
  // the names that exist
  o.force_kernel = "no_such_kernel";
  try {
    prepare(quantize_weight(wv, parse_scheme("w8g128")), o);
    ADD_FAILURE() << "an unknown kernel name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm80_i8_16x32"), std::string::npos) << e.what();
  }
  // a few-token kernel forced for more tokens than its tile: refused at the call, naming M
  if (test::hopper()) {
    o.force_kernel = "sm90_i8_skinny_mt16";
    const PreparedWeight ps = prepare(quantize_weight(wv, parse_scheme("w8g128")), o);
    DeviceBuffer dx17(17 * 256 * 4), dy17(17 * 64 * 4);
    try {
      linear(dx17.view(DType::F32, {17, 256}), ps, dy17.view(DType::F32, {17, 64}));
      ADD_FAILURE() << "M = 17 ran on a kernel of 16-token tiles";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("M = 17"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------- per-tensor, requantized

struct TensorCase {
  int64_t M, N, K;
  DType yt;
  bool bias = false, clamp = false;
  int64_t ldx_pad = 0;  // x rows with a larger stride
  std::string force;
};

void check_tensor(const TensorCase& c, uint32_t seed) {
  SCOPED_TRACE("M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
               std::to_string(c.K) + " y=" + dtype_name(c.yt) + " ldpad=" +
               std::to_string(c.ldx_pad) + " force=" + c.force);
  std::vector<float> wf = randn(size_t(c.N * c.K), seed, 0.05f);
  const QuantizedWeight w =
      quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {c.N, c.K}));
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8PerTensor;
  o.input_quant = {0.02f, -3};
  // an output scale that spreads the results over the int8 range
  o.output_quant = {0.02f * 0.0004f * std::sqrt(float(c.K)) * 40.f, 5};
  o.force_kernel = c.force;
  const PreparedWeight pw = prepare(w, o);
  const int64_t ldx = c.K + c.ldx_pad;
  std::mt19937 rng(seed + 1);
  std::vector<int8_t> x(size_t(c.M * ldx));
  for (auto& v : x) v = int8_t(int(rng() % 256) - 128);
  Epilogue ep;
  std::vector<float> bias_h;
  DeviceBuffer dbias;
  if (c.bias) {
    bias_h = randn(size_t(c.N), seed + 3, 0.05f);
    dbias = DeviceBuffer(bias_h.size() * 4);
    dbias.copy_from_host(bias_h.data(), bias_h.size() * 4);
    ep.bias = dbias.view(DType::F32, {c.N});
  }
  if (c.clamp) ep.clamp_lo = 0.f;
  Epilogue ep_host = ep;
  if (c.bias) ep_host.bias = TensorView(bias_h.data(), DType::F32, {c.N});
  const TensorView xh = TensorView::strided(x.data(), DType::I8, {c.M, c.K}, {ldx, 1});
  const size_t eb = c.yt == DType::I8 ? 1 : 4;
  std::vector<uint8_t> yref(size_t(c.M * c.N) * eb), y(yref.size());
  ref::linear_int8_requant(xh, w, o.input_quant, o.output_quant,
                           TensorView(yref.data(), c.yt, {c.M, c.N}), ep_host);
  DeviceBuffer dx(x.size()), dy(y.size());
  dx.copy_from_host(x.data(), x.size());
  // Poison: 0x7F bytes are code 127 for i8 (the results are spread so that most are not) and a
  // NaN-free but absurd 3.4e38 for f32; every element is compared exactly below.
  ASSERT_EQ(cudaMemset(dy.data(), 0x7F, y.size()), cudaSuccess);
  linear(TensorView::strided(dx.data(), DType::I8, {c.M, c.K}, {ldx, 1}, Device::CUDA), pw,
         dy.view(c.yt, {c.M, c.N}), ep);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dy.copy_to_host(y.data(), y.size());
  int64_t bad = 0, distinct = 0;
  std::vector<bool> seen(256, false);
  for (int64_t i = 0; i < c.M * c.N; ++i) {
    if (std::memcmp(&y[size_t(i) * eb], &yref[size_t(i) * eb], eb) != 0 && bad++ < 5)
      ADD_FAILURE() << "(" << i / c.N << ", " << i % c.N << "): got "
                    << test::value(y, c.yt, size_t(i)) << ", reference "
                    << test::value(yref, c.yt, size_t(i));
    if (c.yt == DType::I8 && !seen[yref[size_t(i)]]) {
      seen[yref[size_t(i)]] = true;
      ++distinct;
    }
  }
  EXPECT_EQ(bad, 0);
  if (c.yt == DType::I8 && c.M * c.N > 1000) EXPECT_GT(distinct, 50) << "test data too narrow";
}

TEST(CudaInt8Tensor, RequantExact) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 500;
  for (DType yt : {DType::I8, DType::F32})
    for (int64_t M : {1, 7, 33, 300})
      for (int64_t K : {1000, 1024, 4160})
        check_tensor({M, M == 300 ? 1000 : 77, K, yt, M == 7, M == 33}, seed++);
}

TEST(CudaInt8Tensor, StridedAndEveryKernel) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 600;
  check_tensor({20, 130, 512, DType::I8, true, false, 16}, seed++);   // aligned stride: direct
  check_tensor({20, 130, 512, DType::I8, true, false, 3}, seed++);    // odd stride: padded copy
  for (const char* k : {"sm80_i8_16x32", "sm80_i8_64x64", "sm80_i8_128x128"})
    check_tensor({45, 150, 800, DType::I8, true, true, 0, k}, seed++);
}

// The Hopper wgmma kernel in the per-tensor mode (integer totals, the exact epilogue), forced by
// name and chosen (M >= 129): the same bytes as the reference for M from one row to several
// persistent waves of tiles (the ring wraps across a CTA's tiles), N and K off the tile (TMA zero
// fill past M, N and K), K up to 16 stages, a strided and a padded-copy x, int8 and f32 outputs,
// bias and clamp, Z_I != 0. Skipped (visibly) off compute capability 9.0.
TEST(CudaInt8Tensor, HopperWgmma) {
  SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 700;
  for (DType yt : {DType::I8, DType::F32})
    for (int64_t M : {1, 7, 128, 129, 300, 2000})
      check_tensor({M, M == 2000 ? 1500 : 77, M == 300 ? 4160 : 1000, yt, M % 2 == 1, M == 129, 0,
                    "sm90_i8_128x128"}, seed++);
  check_tensor({300, 130, 2048, DType::I8, true, true, 16, "sm90_i8_128x128"}, seed++);  // strided x
  check_tensor({300, 130, 520, DType::I8, true, false, 3, "sm90_i8_128x128"}, seed++);   // padded copy
  // chosen by M
  std::vector<float> wf = randn(200 * 512, 11, 0.05f);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8PerTensor;
  const PreparedWeight pw =
      prepare(quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {200, 512})), o);
  EXPECT_EQ(pw.kernel_name(129), "sm90_i8_128x128<per_tensor>");
  EXPECT_EQ(pw.kernel_name(128).rfind("sm80_i8_", 0), 0u) << pw.kernel_name(128);
  check_tensor({1000, 200, 512, DType::I8, true, true}, seed++);
  // the pair / 256 x 64 kernels stay block mode only
  o.force_kernel = "sm90_i8_256x64";
  try {
    const PreparedWeight forced =
        prepare(quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {200, 512})), o);
    DeviceBuffer dx(300 * 512), dy(300 * 200);
    linear(dx.view(DType::I8, {300, 512}), forced, dy.view(DType::I8, {300, 200}));
    ADD_FAILURE() << "sm90_i8_256x64 was accepted for the per-tensor mode";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("block mode"), std::string::npos) << e.what();
  }
}

TEST(CudaInt8Tensor, BadInputs) {
  SKIP_WITHOUT_GPU();
  std::vector<float> wf = randn(64 * 256, 9, 0.05f);
  const QuantizedWeight w = quantize_weight_int8_per_channel(TensorView(wf.data(), DType::F32, {64, 256}));
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = ActQuant::Int8PerTensor;
  const PreparedWeight pw = prepare(w, o);
  DeviceBuffer dx(4 * 256 * 4), dy(4 * 64 * 4);
  EXPECT_THROW(linear(dx.view(DType::F16, {4, 256}), pw, dy.view(DType::F32, {4, 64})), Error);
  EXPECT_THROW(linear(dx.view(DType::I8, {4, 256}), pw, dy.view(DType::F16, {4, 64})), Error);
  // block-quantized weights are refused for the per-tensor mode
  EXPECT_THROW(prepare(quantize_weight(TensorView(wf.data(), DType::F32, {64, 256}),
                                       parse_scheme("w8g128")), o), Error);
  o.input_quant.scale = 0.f;
  EXPECT_THROW(prepare(w, o), Error);
}

}  // namespace
