// linear(..., QuantizedActivations yq) on the CUDA backend: yq must hold the bytes the public
// quantizer writes for the f32 output of the same call, whether the Hopper block GEMM quantizes
// in its epilogue (FP8-block and INT8-block weights, more than 64 rows, 128-wide tiles) or the
// call stages y in f32 (few rows, weight-only weights): FP8 1x128 and INT8 blocks of 32 to 256,
// x or xq in, bias and clamp, N off the 128-column tiles, M off the 128 / 256-row tiles, padded
// caller strides, a caller workspace and none; eager and captured in a CUDA graph. Skipped
// (visibly) without a Hopper GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/device_checks.hpp"
#include "gpu/device_data.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;

namespace {

using test::device_bf16;

PreparedWeight cuda_weight(const std::string& scheme, ActQuant act, int64_t N, int64_t K,
                           uint32_t seed, const std::string& force_kernel = "") {
  const std::vector<float> wf = mixq::testing::random_floats(size_t(N * K), seed, -0.1f, 0.1f);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = act;
  o.force_kernel = force_kernel;
  return prepare(quantize_weight(TensorView(const_cast<float*>(wf.data()), DType::F32, {N, K}),
                                 parse_scheme(scheme)),
                 o);
}

// Device buffers for a quantized [M][N] output (codes rows ldq bytes apart, meta rows ldm
// elements apart), poisoned.
struct DeviceOut {
  int64_t M, N, block, nb, ldq, ldm;
  DeviceBuffer q, scale, offset, sums;
  DeviceOut(int64_t m, int64_t n, int64_t blk, int64_t pad)
      : M(m), N(n), block(blk), nb((n + blk - 1) / blk), ldq(act_quant_row_pitch(n) + 16 * pad),
        ldm(act_quant_meta_pitch(m) + 4 * pad), q(size_t(m * ldq)), scale(size_t(nb * ldm) * 4),
        offset(scale.size()), sums(scale.size()) {
    for (DeviceBuffer* b : {&q, &scale, &offset, &sums})
      EXPECT_EQ(cudaMemset(b->data(), 0x7B, b->size()), cudaSuccess);
  }
  QuantizedActivations view(ActQuant kind) const {
    const TensorView codes = TensorView::strided(
        q.data(), kind == ActQuant::Fp8Block ? DType::F8E4M3 : DType::I8, {M, N}, {ldq, 1},
        Device::CUDA);
    const auto meta = [&](const DeviceBuffer& b, DType t) {
      return TensorView::strided(b.data(), t, {nb, M}, {ldm, 1}, Device::CUDA);
    };
    if (kind == ActQuant::Fp8Block)
      return QuantizedActivations::fp8_block(codes, meta(scale, DType::F32));
    return QuantizedActivations::int8_block(block, codes, meta(scale, DType::F32),
                                            meta(offset, DType::F32), meta(sums, DType::I32));
  }
  // What a quantizer writes: codes up to the row pitch, meta of rows < M (host copies).
  std::vector<uint8_t> written(ActQuant kind) const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> hq(q.size()), out;
    q.copy_to_host(hq.data(), hq.size());
    for (int64_t m = 0; m < M; ++m)
      out.insert(out.end(), hq.begin() + m * ldq, hq.begin() + m * ldq + act_quant_row_pitch(N));
    for (const DeviceBuffer* b : {&scale, &offset, &sums}) {
      if (kind == ActQuant::Fp8Block && b != &scale) continue;
      std::vector<uint8_t> hb(b->size());
      b->copy_to_host(hb.data(), hb.size());
      for (int64_t k = 0; k < nb; ++k)
        out.insert(out.end(), hb.begin() + k * ldm * 4, hb.begin() + (k * ldm + M) * 4);
    }
    return out;
  }
  // The public quantizer on an f32 device output y [M][N].
  void quantize(const TensorView& y, ActQuant kind) const {
    const QuantizedActivations v = view(kind);
    if (kind == ActQuant::Fp8Block) quantize_activations_fp8_block(y, v.q, v.scale);
    else quantize_activations_int8_block(y, block, v.q, v.scale, v.offset, v.sums);
  }
};

struct Case {
  const char* scheme;
  ActQuant act;
  int64_t M, N, K;
  int64_t act_block = 128;  // INT8 weights: their K block
  const char* force_kernel = "";
};

// For each output kind and block: linear(x -> f32 y) then the quantizer, against linear(x -> yq)
// (caller workspace with garbage, and none) and, for W8A8 / FP8 weights, linear(xq -> yq).
// fused: the call is expected to quantize in the GEMM's epilogue (its kernel name says which).
void expect_quantizer_bytes(const Case& c, uint32_t seed, bool fused) {
  const PreparedWeight pw = cuda_weight(c.scheme, c.act, c.N, c.K, seed, c.force_kernel);
  const DeviceBuffer dx = device_bf16(c.M, c.K, seed + 1, 2.f);
  const TensorView x = dx.view(DType::BF16, {c.M, c.K});
  const DeviceBuffer bias = device_bf16(1, c.N, seed + 2, 0.5f);
  Epilogue ep;
  ep.bias = bias.view(DType::BF16, {c.N});
  ep.clamp_lo = -1.5f;
  ep.clamp_hi = 1.25f;
  DeviceBuffer y(size_t(c.M * c.N) * 4);
  const TensorView yv = y.view(DType::F32, {c.M, c.N});
  linear(x, pw, yv, ep);
  // xq: x quantized for this weight by the public quantizer (W8A8 / FP8 weights)
  const int64_t g = c.act == ActQuant::Int8Block ? c.act_block : 128;
  DeviceOut xq(c.M, c.K, g, 0);
  if (c.act != ActQuant::None) xq.quantize(x, c.act);
  for (ActQuant kind : {ActQuant::Fp8Block, ActQuant::Int8Block})
    for (int64_t block : {32, 64, 128, 256}) {
      if (kind == ActQuant::Fp8Block && block != 128) continue;
      SCOPED_TRACE(std::string(c.scheme) + " M " + std::to_string(c.M) + " N " +
                   std::to_string(c.N) + " K " + std::to_string(c.K) + " out " +
                   act_quant_name(kind) + " block " + std::to_string(block) + " " +
                   pw.kernel_name(c.M));
      const std::string kernels = pw.kernel_name(c.M, DType::BF16, kind, block);
      EXPECT_EQ(kernels.find("staging") == std::string::npos, fused && block <= 128) << kernels;
      const DeviceOut want(c.M, c.N, block, 0);
      want.quantize(yv, kind);
      const std::vector<uint8_t> ref = want.written(kind);
      // no workspace (the weight's scratch, or stream-ordered memory for the f32 staging)
      const DeviceOut a(c.M, c.N, block, 1);
      linear(x, pw, a.view(kind), ep);
      EXPECT_EQ(mixq::testing::first_mismatch(a.written(kind), ref), "") << "x in, no workspace";
      // a caller workspace full of garbage
      DeviceBuffer ws(linear_workspace_size(pw, c.M, kind, block) + 16);
      ASSERT_EQ(cudaMemset(ws.data(), 0x5C, ws.size()), cudaSuccess);
      ExecContext ctx;
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
      const DeviceOut b(c.M, c.N, block, 0);
      linear(x, pw, b.view(kind), ep, ctx);
      EXPECT_EQ(mixq::testing::first_mismatch(b.written(kind), ref), "") << "x in, workspace";
      if (c.act == ActQuant::None) continue;
      const DeviceOut d(c.M, c.N, block, 0);
      linear(xq.view(c.act), pw, d.view(kind), ep, ctx);
      EXPECT_EQ(mixq::testing::first_mismatch(d.written(kind), ref), "") << "xq in";
    }
}

}  // namespace

// The block GEMM's quantizing epilogue: M > 64 on FP8-block and INT8-block weights (128 x 128
// and 256 x 128 tiles, single CTAs), N a multiple of 128 and not.
TEST(CudaQuantizedOutput, EpilogueGivesTheQuantizersBytes) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 500;
  for (const Case& c : {Case{"fp8b128", ActQuant::Fp8Block, 300, 512, 384},
                        Case{"fp8b128", ActQuant::Fp8Block, 129, 200, 520},
                        Case{"fp8b128", ActQuant::Fp8Block, 1100, 1000, 256},
                        Case{"w8g128", ActQuant::Int8Block, 300, 512, 384},
                        Case{"w8g64asym", ActQuant::Int8Block, 257, 100, 200, 64}})
    expect_quantizer_bytes(c, seed++, true);
}

// Every 128-wide tile forced: the 256 x 128 tile's two sub-tiles per warpgroup (two staging
// rounds), CTA pairs (FP8 and INT8), with M ending inside a sub-tile and N off the tiles.
TEST(CudaQuantizedOutput, EpilogueOnEveryTile) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 550;
  for (const char* tile :
       {"sm90_fp8_block_gemm_bm128_bn128_s6", "sm90_fp8_block_gemm_bm128_bn128_s6_c2",
        "sm90_fp8_block_gemm_bm256_bn128_s4", "sm90_fp8_block_gemm_bm256_bn128_s4_c2"})
    for (int64_t M : {100, 300})
      expect_quantizer_bytes({"fp8b128", ActQuant::Fp8Block, M, 200, 384, 128, tile}, seed++, true);
  for (int64_t M : {129, 400})
    expect_quantizer_bytes({"w8g128asym", ActQuant::Int8Block, M, 330, 256, 128,
                            "sm90_i8_128x128_c2"}, seed++, true);
}

// Calls that stage y in f32: the few-token kernels and weight-only weights.
TEST(CudaQuantizedOutput, StagedCallsGiveTheQuantizersBytes) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 600;
  for (const Case& c : {Case{"fp8b128", ActQuant::Fp8Block, 7, 300, 256},
                        Case{"w8g128", ActQuant::Int8Block, 33, 256, 384},
                        Case{"w4g128", ActQuant::None, 5, 200, 256},
                        Case{"w4g128", ActQuant::None, 300, 384, 512}})
    expect_quantizer_bytes(c, seed++, false);
}

// Both forms captured in a graph (the staged one's memory is stream-ordered), replayed: the
// eager bytes every time.
TEST(CudaQuantizedOutput, GraphCaptured) {
  SKIP_WITHOUT_HOPPER();
  for (int64_t M : {7, 300}) {
    const int64_t N = 384, K = 256;
    const PreparedWeight pw = cuda_weight("fp8b128", ActQuant::Fp8Block, N, K, 700);
    SCOPED_TRACE(pw.kernel_name(M));
    const DeviceBuffer dx = device_bf16(M, K, 701);
    const TensorView x = dx.view(DType::BF16, {M, K});
    const DeviceOut eager(M, N, 128, 0), graphed(M, N, 128, 0);
    linear(x, pw, eager.view(ActQuant::Fp8Block));
    const std::vector<uint8_t> want = eager.written(ActQuant::Fp8Block);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ExecContext ctx;
    ctx.stream = s;
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    linear(x, pw, graphed.view(ActQuant::Fp8Block), {}, ctx);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemsetAsync(graphed.q.data(), 0x7B, graphed.q.size(), s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(mixq::testing::first_mismatch(graphed.written(ActQuant::Fp8Block), want), "")
          << "replay " << rep;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

// What the output's stores need is refused by name before any launch.
TEST(CudaQuantizedOutput, RejectsMisalignedOutputs) {
  SKIP_WITHOUT_HOPPER();
  const int64_t M = 300, N = 256, K = 256;
  const PreparedWeight pw = cuda_weight("fp8b128", ActQuant::Fp8Block, N, K, 800);
  const DeviceBuffer dx = device_bf16(M, K, 801);
  const TensorView x = dx.view(DType::BF16, {M, K});
  const DeviceOut out(M, N, 128, 1);
  QuantizedActivations bad = out.view(ActQuant::Fp8Block);
  bad.q = TensorView::strided(static_cast<char*>(out.q.data()) + 1, DType::F8E4M3, {M, N},
                              {out.ldq, 1}, Device::CUDA);
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::InvalidArgument, linear(x, pw, bad), "yq.q",
                         "16-byte aligned");
  bad = out.view(ActQuant::Fp8Block);
  bad.scale.device = Device::CPU;
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::InvalidArgument, linear(x, pw, bad), "yq.scale");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}
