// linear(..., QuantizedActivations yq) on the host backends (Reference, CPU): the output leaves
// quantized for the next layer, and yq holds exactly what the public quantizer writes for the f32
// output of the same call (FP8 1x128 and INT8 blocks of 32 to 256; weight-only, INT8-block and
// FP8-block weights; x or pre-quantized xq in; bias and clamp; odd N; caller workspaces and none);
// a chain of two layers through yq gives linear(x -> y -> quantize -> linear)'s bits; every bad
// argument is an mixq::Error naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

// Caller buffers for a quantized [M][N] output, poisoned; meta rows padded by `pad`.
struct OutBuffers {
  int64_t M, N, block, nb, ldq, ldm;
  std::vector<uint8_t> q;
  std::vector<float> scale, offset;
  std::vector<int32_t> sums;

  OutBuffers(int64_t m, int64_t n, int64_t blk, int64_t pad = 0)
      : M(m), N(n), block(blk), nb((n + blk - 1) / blk), ldq(act_quant_row_pitch(n) + 16 * pad),
        ldm(act_quant_meta_pitch(m) + 4 * pad), q(size_t(m * ldq), 0xA5),
        scale(size_t(nb * ldm), -7.f), offset(scale), sums(scale.size(), 12345) {}

  QuantizedActivations view(ActQuant kind) {
    const TensorView codes = TensorView::strided(
        q.data(), kind == ActQuant::Fp8Block ? DType::F8E4M3 : DType::I8, {M, N}, {ldq, 1});
    const auto meta = [&](void* p, DType t) {
      return TensorView::strided(p, t, {nb, M}, {ldm, 1});
    };
    if (kind == ActQuant::Fp8Block)
      return QuantizedActivations::fp8_block(codes, meta(scale.data(), DType::F32));
    return QuantizedActivations::int8_block(block, codes, meta(scale.data(), DType::F32),
                                            meta(offset.data(), DType::F32),
                                            meta(sums.data(), DType::I32));
  }
  // Codes up to the row pitch (the quantizer's zero padding included) and meta of rows < M.
  std::vector<uint8_t> written_codes() const {
    std::vector<uint8_t> v;
    for (int64_t m = 0; m < M; ++m)
      v.insert(v.end(), q.begin() + m * ldq, q.begin() + m * ldq + act_quant_row_pitch(N));
    return v;
  }
  template <class T>
  std::vector<T> written(const std::vector<T>& meta) const {
    std::vector<T> v;
    for (int64_t b = 0; b < nb; ++b) v.insert(v.end(), meta.begin() + b * ldm, meta.begin() + b * ldm + M);
    return v;
  }
};

void expect_same_output(OutBuffers& got, OutBuffers& want, ActQuant kind) {
  EXPECT_SAME_ARRAY(got.written_codes(), want.written_codes());
  EXPECT_SAME_ARRAY(got.written(got.scale), want.written(want.scale));
  if (kind == ActQuant::Int8Block) {
    EXPECT_SAME_ARRAY(got.written(got.offset), want.written(want.offset));
    EXPECT_SAME_ARRAY(got.written(got.sums), want.written(want.sums));
  }
}

// The public quantizer on an f32 [M][N] output.
void quantize_into(const HostTensor& y, OutBuffers& out, ActQuant kind) {
  const QuantizedActivations v = out.view(kind);
  if (kind == ActQuant::Fp8Block) quantize_activations_fp8_block(y.view(), v.q, v.scale);
  else quantize_activations_int8_block(y.view(), out.block, v.q, v.scale, v.offset, v.sums);
}

PreparedWeight prepare_scheme(const std::string& scheme, ActQuant act, BackendKind b, int64_t N,
                              int64_t K, uint32_t seed) {
  HostTensor w = random_tensor(DType::F32, {N, K}, seed, -0.7, 1.1);
  PrepareOptions o;
  o.backend = b;
  o.act = act;
  return prepare(quantize_weight(w.view(), parse_scheme(scheme)), o);
}

struct WeightCase {
  const char* scheme;
  ActQuant act;
};
constexpr WeightCase kWeights[] = {{"w4g32", ActQuant::None},
                                   {"w8g64asym", ActQuant::Int8Block},
                                   {"fp8b128", ActQuant::Fp8Block}};

#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::InvalidArgument, stmt, __VA_ARGS__)

}  // namespace

TEST(QuantizedOutput, SameBytesAsTheQuantizerOnTheF32Output) {
  const int64_t K = 192;
  uint32_t seed = 70;
  for (const WeightCase& wc : kWeights)
    for (BackendKind b : {BackendKind::Reference, BackendKind::CPU})
      for (int64_t N : {37, 300}) {
        const PreparedWeight pw = prepare_scheme(wc.scheme, wc.act, b, N, K, seed++);
        const HostTensor bias = random_tensor(DType::BF16, {N}, seed++, -2.0, 2.0);
        Epilogue ep;
        ep.bias = bias.view();
        ep.clamp_lo = -3.f;
        ep.clamp_hi = 2.5f;
        for (int64_t M : {1, 6}) {
          const HostTensor x = random_tensor(DType::BF16, {M, K}, seed++, -1.5, 2.0);
          HostTensor y(DType::F32, {M, N});
          linear(x.view(), pw, y.view(), ep);
          for (ActQuant kind : {ActQuant::Fp8Block, ActQuant::Int8Block})
            for (int64_t block : {32, 64, 128, 256}) {
              if (kind == ActQuant::Fp8Block && block != 128) continue;
              SCOPED_TRACE(std::string(wc.scheme) + " " + backend_name(b) + " N " +
                           std::to_string(N) + " M " + std::to_string(M) + " out " +
                           act_quant_name(kind) + " block " + std::to_string(block));
              OutBuffers want(M, N, block), got(M, N, block, M % 2), got_ws(M, N, block);
              quantize_into(y, want, kind);
              linear(x.view(), pw, got.view(kind), ep);
              expect_same_output(got, want, kind);
              // a caller workspace of linear_workspace_size bytes
              std::vector<uint8_t> ws(linear_workspace_size(pw, M, kind, block));
              ExecContext ctx;
              ctx.workspace = ws.data();
              ctx.workspace_bytes = ws.size();
              linear(x.view(), pw, got_ws.view(kind), ep, ctx);
              expect_same_output(got_ws, want, kind);
            }
        }
      }
}

// Two FP8 layers: x -> [layer 1] -> yq -> [layer 2] -> z equals the unfused chain (f32 y, the
// public quantizer, linear(xq)), and linear(xq -> yq) is the chain's steady-state layer.
TEST(QuantizedOutput, ChainOfQuantizedLayers) {
  const int64_t M = 5, K = 160, H = 200, N = 96;
  for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
    SCOPED_TRACE(backend_name(b));
    const PreparedWeight l1 = prepare_scheme("fp8b128", ActQuant::Fp8Block, b, H, K, 90);
    const PreparedWeight l2 = prepare_scheme("fp8b128", ActQuant::Fp8Block, b, N, H, 91);
    const HostTensor x = random_tensor(DType::F32, {M, K}, 92, -2.0, 2.0);
    // unfused
    HostTensor y(DType::F32, {M, H}), z_want(DType::F32, {M, N}), z_got(DType::F32, {M, N});
    linear(x.view(), l1, y.view());
    OutBuffers yq_want(M, H, 128), yq(M, H, 128);
    quantize_into(y, yq_want, ActQuant::Fp8Block);
    linear(yq_want.view(ActQuant::Fp8Block), l2, z_want.view());
    // quantized output
    linear(x.view(), l1, yq.view(ActQuant::Fp8Block));
    expect_same_output(yq, yq_want, ActQuant::Fp8Block);
    linear(yq.view(ActQuant::Fp8Block), l2, z_got.view());
    EXPECT_SAME_ARRAY(z_got.bytes, z_want.bytes);
    // xq in, yq out: layer 2 quantizing its output too
    OutBuffers zq(M, N, 128), zq_want(M, N, 128);
    linear(yq.view(ActQuant::Fp8Block), l2, zq.view(ActQuant::Fp8Block));
    quantize_into(z_want, zq_want, ActQuant::Fp8Block);
    expect_same_output(zq, zq_want, ActQuant::Fp8Block);
  }
}

TEST(QuantizedOutput, BadArgumentsAreNamed) {
  const int64_t M = 4, N = 40, K = 64;
  const PreparedWeight pw = prepare_scheme("w8g64", ActQuant::Int8Block, BackendKind::CPU, N, K, 5);
  const HostTensor x = random_tensor(DType::F32, {M, K}, 6);
  OutBuffers out(M, N, 32), short_rows(M - 1, N, 32), wide(M, N + 20, 32);
  EXPECT_NO_THROW(linear(x.view(), pw, out.view(ActQuant::Int8Block)));
  QuantizedActivations bad = out.view(ActQuant::Int8Block);
  bad.kind = ActQuant::None;
  EXPECT_ARG_ERROR(linear(x.view(), pw, bad), "yq.kind (weight-only)", "fp8-block or int8-block");
  bad = out.view(ActQuant::Int8Block);
  bad.block = 48;
  EXPECT_ARG_ERROR(linear(x.view(), pw, bad), "yq.block (48)", "32, 64, 128 or 256");
  bad = out.view(ActQuant::Fp8Block);
  bad.block = 64;
  EXPECT_ARG_ERROR(linear(x.view(), pw, bad), "yq.block (64)", "128");
  EXPECT_ARG_ERROR(linear(x.view(), pw, short_rows.view(ActQuant::Int8Block)), "yq.q has 3 rows",
                   "expected 4");
  EXPECT_ARG_ERROR(linear(x.view(), pw, wide.view(ActQuant::Int8Block)), "yq.q", "[4, 60]");
  bad = out.view(ActQuant::Int8Block);
  bad.sums = {};
  EXPECT_ARG_ERROR(linear(x.view(), pw, bad), "yq.sums");
  std::vector<uint8_t> ws(16);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  EXPECT_ARG_ERROR(linear(x.view(), pw, out.view(ActQuant::Int8Block), {}, ctx), "workspace_bytes (16)",
                   "linear_workspace_size");
  EXPECT_ARG_ERROR(linear_workspace_size(pw, M, ActQuant::None, 0), "out (weight-only)");
  EXPECT_ARG_ERROR(linear_workspace_size(pw, M, ActQuant::Int8Block, 48), "out_block (48)");
  EXPECT_ARG_ERROR(linear_workspace_size(pw, M, ActQuant::Fp8Block, 64), "out_block (64)");
  // the host backends stage y in f32 and quantize it after: the name says so
  const std::string name = pw.kernel_name(M, DType::F32, ActQuant::Int8Block, 32);
  EXPECT_EQ(name, pw.kernel_name(M, DType::F32) + " + f32 staging + quantizer");
  // an int8-per-tensor weight requantizes its own output
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.act = ActQuant::Int8PerTensor;
  o.input_quant.scale = 1.f;
  const HostTensor wf = random_tensor(DType::F32, {N, K}, 7);
  const PreparedWeight pt = prepare(quantize_weight_int8_per_channel(wf.view()), o);
  const HostTensor xi = random_tensor(DType::I8, {M, K}, 8, -100, 100);
  EXPECT_ARG_ERROR(linear(xi.view(), pt, out.view(ActQuant::Int8Block)), "int8-per-tensor");
}
