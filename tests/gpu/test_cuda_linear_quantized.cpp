// linear(QuantizedActivations) on the CUDA backend: activations quantized on the device by the
// public quantizers (mixq/act_quant.hpp) into caller buffers, then the GEMM alone, must give the
// bits of linear(x) (the same quantizer into its workspace, then the same GEMM), for INT8 g64 /
// g128 symmetric and offset weights and FP8 block, at token counts served by the few-token
// (stream-K) kernels and by the large ones, with and without a caller workspace, eager and
// graph-captured; misaligned or badly strided buffers are refused by name, before any launch.
// Skipped (visibly) without a GPU; the FP8 cases need compute capability 9.0.
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
using test::hopper;


// A CUDA weight for `act`: INT8 "w8g<g>[asym]" or "fp8b128", N x K.
PreparedWeight cuda_weight(ActQuant act, int64_t g, bool offset, int64_t N, int64_t K,
                           uint32_t seed) {
  std::vector<float> wf = mixq::testing::random_floats(size_t(N * K), seed, -0.1f, 0.1f);
  if (offset)  // a non-zero mean per row so that the offset terms matter
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) wf[size_t(n * K + k)] += 0.02f * float(n % 7) - 0.05f;
  const std::string scheme = act == ActQuant::Fp8Block
                                 ? "fp8b128"
                                 : "w8g" + std::to_string(g) + (offset ? "asym" : "");
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = act;
  return prepare(quantize_weight(TensorView(wf.data(), DType::F32, {N, K}), parse_scheme(scheme)),
                 o);
}

// Caller buffers in the act_quant.hpp layout on the device: codes rows `ldq` bytes apart, meta
// rows `ldm` elements apart (the pitches plus a caller's padding), filled with garbage first.
struct DeviceActs {
  int64_t M, K, block, nb, ldq, ldm;
  DeviceBuffer q, scale, offset, sums;

  DeviceActs(int64_t m, int64_t k, int64_t blk, int64_t q_pad = 0, int64_t m_pad = 0)
      : M(m), K(k), block(blk), nb((k + blk - 1) / blk), ldq(act_quant_row_pitch(k) + q_pad),
        ldm(act_quant_meta_pitch(m) + m_pad), q(size_t(m * ldq) + 64),
        scale(size_t(nb * ldm) * 4 + 64), offset(scale.size()), sums(scale.size()) {
    for (DeviceBuffer* b : {&q, &scale, &offset, &sums})
      EXPECT_EQ(cudaMemset(b->data(), 0x7B, b->size()), cudaSuccess);
  }
  TensorView codes(DType t, size_t shift = 0, int64_t ld = 0) const {
    return TensorView::strided(static_cast<char*>(q.data()) + shift, t, {M, K},
                               {ld ? ld : ldq, 1}, Device::CUDA);
  }
  TensorView meta(const DeviceBuffer& b, DType t, size_t shift = 0, int64_t ld = 0) const {
    return TensorView::strided(static_cast<char*>(b.data()) + shift, t, {nb, M},
                               {ld ? ld : ldm, 1}, Device::CUDA);
  }
  QuantizedActivations int8() const {
    return QuantizedActivations::int8_block(block, codes(DType::I8), meta(scale, DType::F32),
                                            meta(offset, DType::F32), meta(sums, DType::I32));
  }
  QuantizedActivations fp8() const {
    return QuantizedActivations::fp8_block(codes(DType::F8E4M3), meta(scale, DType::F32));
  }
  // Quantizes x [M][K] (device) into these buffers with the public quantizer, on `stream`.
  QuantizedActivations quantize(ActQuant act, const TensorView& x, void* stream) const {
    ExecContext ctx;
    ctx.stream = stream;
    if (act == ActQuant::Fp8Block) {
      const QuantizedActivations xq = fp8();
      quantize_activations_fp8_block(x, xq.q, xq.scale, ctx);
      return xq;
    }
    const QuantizedActivations xq = int8();
    quantize_activations_int8_block(x, block, xq.q, xq.scale, xq.offset, xq.sums, ctx);
    return xq;
  }
};

std::vector<uint8_t> download(const DeviceBuffer& b, size_t bytes) {
  std::vector<uint8_t> h(bytes);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  b.copy_to_host(h.data(), bytes);
  return h;
}

struct Case {
  ActQuant act;
  int64_t g;  // INT8 K block (FP8: 128)
  bool offset;
  int64_t M, N, K;
  bool caller_ws;
  int64_t q_pad = 0, m_pad = 0;  // caller strides past the pitches (multiples of 16 / 4)
};

std::string name(const Case& c, const PreparedWeight& pw) {
  return std::string(act_quant_name(c.act)) + " g" + std::to_string(c.g) +
         (c.offset ? " offset" : "") + " M" + std::to_string(c.M) + " N" + std::to_string(c.N) +
         " K" + std::to_string(c.K) + (c.caller_ws ? " caller workspace" : " own scratch") +
         " pads " + std::to_string(c.q_pad) + "/" + std::to_string(c.m_pad) + " " +
         pw.kernel_name(c.M);
}

// linear(x) and linear(xq) (xq: the public quantizer on the same x) into poisoned bf16 outputs,
// bias and clamp: the same bytes.
void expect_same_bits(const Case& c, uint32_t seed) {
  const PreparedWeight pw = cuda_weight(c.act, c.g, c.offset, c.N, c.K, seed);
  SCOPED_TRACE(name(c, pw));
  const DeviceBuffer dx = device_bf16(c.M, c.K, seed + 1);
  const TensorView x = dx.view(DType::BF16, {c.M, c.K});
  const DeviceBuffer bias = device_bf16(1, c.N, seed + 2, 2.f);
  Epilogue ep;
  ep.bias = bias.view(DType::BF16, {c.N});
  ep.clamp_lo = -1.5f;
  ep.clamp_hi = 1.25f;
  const size_t yb = size_t(c.M * c.N) * 2;
  DeviceBuffer y_x(yb), y_q(yb);
  ASSERT_EQ(cudaMemset(y_x.data(), 0xFF, yb), cudaSuccess);  // NaN
  ASSERT_EQ(cudaMemset(y_q.data(), 0xFF, yb), cudaSuccess);
  DeviceBuffer ws_x(linear_workspace_size(pw, c.M) + 16), ws_q(ws_x.size());
  ExecContext cx, cq;
  if (c.caller_ws) {
    // Garbage in the workspaces: the tickets must be cleared by the call.
    ASSERT_EQ(cudaMemset(ws_x.data(), 0x5C, ws_x.size()), cudaSuccess);
    ASSERT_EQ(cudaMemset(ws_q.data(), 0x5C, ws_q.size()), cudaSuccess);
    cx.workspace = ws_x.data();
    cx.workspace_bytes = ws_x.size();
    cq.workspace = ws_q.data();
    cq.workspace_bytes = ws_q.size();
  }
  linear(x, pw, y_x.view(DType::BF16, {c.M, c.N}), ep, cx);
  const DeviceActs acts(c.M, c.K, c.g, c.q_pad, c.m_pad);
  const QuantizedActivations xq = acts.quantize(c.act, x, nullptr);
  linear(xq, pw, y_q.view(DType::BF16, {c.M, c.N}), ep, cq);
  const std::vector<uint8_t> want = download(y_x, yb), got = download(y_q, yb);
  size_t nan = 0;
  for (size_t i = 0; i < yb; i += 2) nan += want[i] == 0xFF && want[i + 1] == 0xFF;
  EXPECT_EQ(nan, 0u) << "linear(x) left outputs unwritten";
  EXPECT_EQ(mixq::testing::first_mismatch(got, want), "");
  // Twice more on the same buffers: the skinny kernels' tickets were left zero.
  ASSERT_EQ(cudaMemset(y_q.data(), 0xFF, yb), cudaSuccess);
  linear(xq, pw, y_q.view(DType::BF16, {c.M, c.N}), ep, cq);
  linear(xq, pw, y_q.view(DType::BF16, {c.M, c.N}), ep, cq);
  EXPECT_EQ(mixq::testing::first_mismatch(download(y_q, yb), want), "") << "repeated call";
}

#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::InvalidArgument, stmt, __VA_ARGS__)

}  // namespace

// M = 1, 7, 64: the few-token kernels on Hopper (token tiles 16 and 64); 65: the 128-token tile
// (g128) or the sm_80 kernels (g64); 300: the large kernels.
TEST(CudaLinearQuantized, Int8SameBitsAsLinear) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 10;
  for (int64_t g : {64, 128})
    for (bool offset : {false, true})
      for (int64_t M : {1, 7, 64, 65, 300})
        for (bool ws : {false, true}) {
          const int64_t pad = ws && M % 2 ? 1 : 0;  // padded caller strides now and then
          expect_same_bits({ActQuant::Int8Block, g, offset, M, 1000, 520, ws, 16 * pad, 4 * pad},
                           seed++);
        }
}

TEST(CudaLinearQuantized, Fp8SameBitsAsLinear) {
  SKIP_WITHOUT_HOPPER();
  uint32_t seed = 100;
  for (int64_t M : {1, 7, 64, 65, 300})
    for (bool ws : {false, true}) {
      const int64_t pad = ws && M % 2 ? 1 : 0;
      expect_same_bits({ActQuant::Fp8Block, 128, false, M, 1000, 520, ws, 16 * pad, 4 * pad},
                       seed++);
    }
  // Odd shapes: N off the 128-row tiles, K off the 128-column blocks.
  expect_same_bits({ActQuant::Fp8Block, 128, false, 5, 37, 200, true}, seed++);
  expect_same_bits({ActQuant::Fp8Block, 128, false, 130, 37, 200, false, 32, 8}, seed++);
}

TEST(CudaLinearQuantized, Int8OddShapes) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (int64_t g : {64, 128})
    for (int64_t M : {5, 130}) {
      expect_same_bits({ActQuant::Int8Block, g, true, M, 37, 200, M == 5}, seed++);
      expect_same_bits({ActQuant::Int8Block, g, false, M, 37, 200, M != 5, 16, 4}, seed++);
    }
}

// Quantizer and linear(xq) captured in a graph with a caller workspace (tickets cleared inside
// the graph), replayed: the eager bits every time.
TEST(CudaLinearQuantized, GraphCaptured) {
  SKIP_WITHOUT_GPU();
  for (ActQuant act : {ActQuant::Int8Block, ActQuant::Fp8Block}) {
    if (act == ActQuant::Fp8Block && !hopper()) continue;
    const int64_t M = 3, N = 512, K = 512;
    const PreparedWeight pw = cuda_weight(act, 128, false, N, K, 300);
    SCOPED_TRACE(pw.kernel_name(M));
    const DeviceBuffer dx = device_bf16(M, K, 301);
    const TensorView x = dx.view(DType::BF16, {M, K});
    const DeviceActs acts(M, K, 128);
    const size_t yb = size_t(M * N) * 2;
    DeviceBuffer y(yb), ws(linear_workspace_size(pw, M));
    const TensorView yv = y.view(DType::BF16, {M, N});
    linear(acts.quantize(act, x, nullptr), pw, yv);  // eager, own scratch
    const std::vector<uint8_t> want = download(y, yb);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ExecContext ctx;
    ctx.stream = s;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    linear(acts.quantize(act, x, s), pw, yv, {}, ctx);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemsetAsync(y.data(), 0xFF, yb, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(mixq::testing::first_mismatch(download(y, yb), want), "") << "replay " << rep;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

// What the GEMMs' TMA and 16-byte copies cannot take is refused before any launch, naming the
// argument; so are a too small or misaligned workspace and tensors on another device.
TEST(CudaLinearQuantized, RejectsWhatTheGemmCannotRead) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 5, N = 256, K = 200;  // row pitch 208, meta pitch 8
  const PreparedWeight pw = cuda_weight(ActQuant::Int8Block, 128, true, N, K, 400);
  const DeviceActs a(M, K, 128, 16, 8);  // ldq 224, ldm 16
  const DeviceBuffer y(size_t(M * N) * 4);
  const TensorView yv = y.view(DType::F32, {M, N});
  const QuantizedActivations good = a.int8();
  EXPECT_NO_THROW(linear(good, pw, yv));  // (garbage codes: only the call is checked)
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  QuantizedActivations x = good;
  x.q = a.codes(DType::I8, 1);  // the quantizer takes it (scalar path), the GEMM cannot
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.q", "16-byte aligned", "multiple of 16 bytes");
  x.q = a.codes(DType::I8, 0, 216);
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.q", "row stride 216 bytes", "multiple of 16");
  x = good;
  x.scale = a.meta(a.scale, DType::F32, 4);
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.scale", "16-byte aligned");
  x = good;
  x.offset = a.meta(a.offset, DType::F32, 0, 9);
  x.scale = a.meta(a.scale, DType::F32, 0, 9);
  x.sums = a.meta(a.sums, DType::I32, 0, 9);
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.scale", "row stride 9 elements", "multiple of 4");
  x = good;
  x.sums = a.meta(a.sums, DType::I32, 8);
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.sums", "16-byte aligned");

  // Layout errors as on the host.
  x = good;
  x.q = a.codes(DType::I8, 0, 204);
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.q row stride (204)", "208");
  x = good;
  x.q.device = Device::CPU;
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.q:", "expected a cuda tensor");
  x = good;
  x.scale.device_index = 1;
  EXPECT_ARG_ERROR(linear(x, pw, yv), "xq.scale", "not on the weight's device (cuda 0)");
  TensorView y1 = yv;
  y1.device_index = 1;
  EXPECT_ARG_ERROR(linear(good, pw, y1), "y (", "not on the weight's device (cuda 0)");

  // Workspace: misaligned, too small for the few-token kernel's partial sums, or overlapping.
  DeviceBuffer ws(linear_workspace_size(pw, M) + 64);
  ExecContext ctx;
  ctx.workspace = static_cast<char*>(ws.data()) + 8;
  ctx.workspace_bytes = ws.size() - 8;
  EXPECT_ARG_ERROR(linear(good, pw, yv, {}, ctx), "ExecContext::workspace", "16-byte aligned");
  if (hopper()) {
    ctx.workspace = ws.data();
    ctx.workspace_bytes = 16;
    EXPECT_ARG_ERROR(linear(good, pw, yv, {}, ctx), "workspace of 16 bytes", "smaller");
  }
  ctx.workspace = a.q.data();
  ctx.workspace_bytes = a.q.size();
  EXPECT_ARG_ERROR(linear(good, pw, yv, {}, ctx), "xq.q", "overlaps");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing was launched by the refused calls
}
