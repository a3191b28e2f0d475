// linear(QuantizedActivations) (mixq/act_quant.hpp) on the host backends (Reference, CPU): with
// xq written by the public quantizers it gives the bits of linear(x) (INT8 blocks of 32 to 256,
// symmetric and offset weights; FP8 block with f8e4m3 and u8 codes; odd M, N, K; bias and clamp;
// every accepted buffer shape, padded strides, caller workspaces), and every bad argument is an
// mixq::Error of the right code whose message names the argument and its values.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/ops.hpp"
#include "mixq/reference.hpp"
#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

constexpr int64_t kN = 37, kK = 200;  // K: 3 full blocks of 64 and a partial one; 2 of 128

TensorView strided2(void* p, DType t, int64_t r, int64_t c, int64_t ld) {
  return TensorView::strided(p, t, {r, c}, {ld, 1});
}

// Caller buffers in the act_quant.hpp layout for M rows, K blocks of `block` columns. The row
// strides are the pitches plus `pad` (a caller's larger buffer); `full` views the rows as
// [M][row pitch] and the meta as [n_blocks][meta pitch] (the other shapes the quantizers take).
struct QuantBuffers {
  int64_t M, K, block, nb, ldq, ldm;
  bool full;
  std::vector<uint8_t> q;
  std::vector<float> scale, offset;
  std::vector<int32_t> sums;

  QuantBuffers(int64_t m, int64_t k, int64_t blk, int64_t pad = 0, bool full_shapes = false)
      : M(m), K(k), block(blk), nb((k + blk - 1) / blk), ldq(act_quant_row_pitch(k) + pad),
        ldm(act_quant_meta_pitch(m) + pad), full(full_shapes),
        q(size_t(m * ldq + 1), 0xA5), scale(size_t(nb * ldm + 1), -7.f), offset(scale),
        sums(scale.size(), 12345) {}

  TensorView codes(DType t) {
    return strided2(q.data(), t, M, full ? act_quant_row_pitch(K) : K, ldq);
  }
  TensorView meta(void* p, DType t) {
    return strided2(p, t, nb, full ? act_quant_meta_pitch(M) : M, ldm);
  }
  QuantizedActivations int8() {
    return QuantizedActivations::int8_block(block, codes(DType::I8),
                                            meta(scale.data(), DType::F32),
                                            meta(offset.data(), DType::F32),
                                            meta(sums.data(), DType::I32));
  }
  QuantizedActivations fp8(DType code_type = DType::F8E4M3) {
    return QuantizedActivations::fp8_block(codes(code_type), meta(scale.data(), DType::F32));
  }
};

QuantizedWeight make_weight(const std::string& scheme, uint32_t seed, int64_t K = kK) {
  HostTensor w = random_tensor(DType::F32, {kN, K}, seed, -0.7, 1.1);
  return quantize_weight(w.view(), parse_scheme(scheme));
}

PreparedWeight prepare_for(const QuantizedWeight& w, BackendKind b, ActQuant act) {
  PrepareOptions o;
  o.backend = b;
  o.act = act;
  return prepare(w, o);
}

struct Output {
  HostTensor y, bias;
  Epilogue ep;
};

// y [M][N] poisoned, bias (bias_type) and a clamp that cuts some outputs on both sides.
Output make_output(int64_t M, DType yt, DType bias_type, uint32_t seed) {
  Output o{HostTensor(yt, {M, kN}), random_tensor(bias_type, {kN}, seed, -2.0, 2.0), {}};
  o.y.poison();
  o.ep.bias = o.bias.view();
  o.ep.clamp_lo = -3.f;
  o.ep.clamp_hi = 2.5f;
  return o;
}

const char* backend_str(BackendKind b) { return backend_name(b); }

// linear(x) and linear(xq) (xq from the public quantizer) into fresh outputs: the same bits.
void expect_same_bits(const PreparedWeight& pw, const HostTensor& x,
                      const std::function<QuantizedActivations(QuantBuffers&)>& quantize,
                      QuantBuffers& buf, DType yt, DType bias_type, bool caller_ws,
                      const std::string& what) {
  SCOPED_TRACE(what);
  const int64_t M = x.shape[0];
  Output want = make_output(M, yt, bias_type, 5), got = make_output(M, yt, bias_type, 5);
  std::vector<uint8_t> ws(linear_workspace_size(pw, M) + 64);
  ExecContext ctx;
  ctx.num_threads = 2;
  if (caller_ws) {
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
  }
  linear(x.view(), pw, want.y.view(), want.ep, ctx);
  if (M > 0) expect_all_written(want.y, what.c_str());
  const QuantizedActivations xq = quantize(buf);
  linear(xq, pw, got.y.view(), got.ep, ctx);
  EXPECT_SAME_ARRAY(got.y.bytes, want.y.bytes);
}

#define EXPECT_ARG_ERROR(stmt, ...) \
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::InvalidArgument, stmt, __VA_ARGS__)
#define EXPECT_UNSUPPORTED(stmt, ...) \
  EXPECT_MIXQ_ERROR_CODE(ErrorCode::Unsupported, stmt, __VA_ARGS__)

}  // namespace

TEST(LinearQuantized, Int8SameBitsAsLinear) {
  uint32_t seed = 10;
  // (blocks are clamped to K: g256 needs a longer K)
  const std::pair<const char*, int64_t> cases[] = {{"w8g64", kK},   {"w8g64asym", kK},
                                                   {"w8g128", kK},  {"w8g128asym", kK},
                                                   {"w8g32", kK},   {"w8g256asym", 520}};
  for (const auto& [scheme, K] : cases) {
    const QuantizedWeight w = make_weight(scheme, seed++, K);
    for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
      const PreparedWeight pw = prepare_for(w, b, ActQuant::Int8Block);
      for (int64_t M : {1, 5, 13}) {
        const DType xt = M % 2 ? DType::F32 : DType::BF16;
        const HostTensor x = random_tensor(xt, {M, K}, seed++, -1.5, 2.0);
        for (DType yt : {DType::F32, DType::BF16}) {
          const bool pad = yt == DType::BF16, ws = M == 13;
          QuantBuffers buf(M, K, w.block_k, pad ? 3 : 0, pad);
          const auto quantize = [&](QuantBuffers& qb) {
            const QuantizedActivations xq = qb.int8();
            quantize_activations_int8_block(x.view(), w.block_k, xq.q, xq.scale, xq.offset,
                                            xq.sums);
            return xq;
          };
          expect_same_bits(pw, x, quantize, buf, yt, DType::F32, ws,
                           std::string(scheme) + " " + backend_str(b) + " M " +
                               std::to_string(M) + " y " + dtype_name(yt));
        }
      }
    }
  }
}

TEST(LinearQuantized, Fp8SameBitsAsLinear) {
  const QuantizedWeight w = make_weight("fp8b128", 40);
  uint32_t seed = 41;
  for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
    const PreparedWeight pw = prepare_for(w, b, ActQuant::Fp8Block);
    for (int64_t M : {1, 5, 13}) {
      const HostTensor x = random_tensor(M == 5 ? DType::F16 : DType::F32, {M, kK}, seed++,
                                         -3.0, 3.0);
      for (DType code : {DType::F8E4M3, DType::U8}) {
        const bool pad = code == DType::U8;
        QuantBuffers buf(M, kK, 128, pad ? 5 : 0, pad);
        const auto quantize = [&](QuantBuffers& qb) {
          const QuantizedActivations xq = qb.fp8(code);
          quantize_activations_fp8_block(x.view(), xq.q, xq.scale);
          return xq;
        };
        expect_same_bits(pw, x, quantize, buf, pad ? DType::F16 : DType::F32, DType::BF16,
                         M == 13, std::string(backend_str(b)) + " M " + std::to_string(M) +
                                      " codes " + dtype_name(code));
      }
    }
  }
}

// The host quantizers' buffers are storage for the same view type: their view() gives the bits
// of linear(x) too.
TEST(LinearQuantized, HostBufferViewSameBitsAsLinear) {
  uint32_t seed = 45;
  for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
    const QuantizedWeight wi = make_weight("w8g64asym", seed++);
    const QuantizedWeight wf = make_weight("fp8b128", seed++);
    const PreparedWeight pi = prepare_for(wi, b, ActQuant::Int8Block);
    const PreparedWeight pf = prepare_for(wf, b, ActQuant::Fp8Block);
    for (int64_t M : {1, 6, 13}) {
      const HostTensor x = random_tensor(DType::BF16, {M, kK}, seed++, -2.0, 2.5);
      const std::string what = std::string(backend_str(b)) + " M " + std::to_string(M);
      HostTensor want(DType::F32, {M, kN}), got(DType::F32, {M, kN});
      linear(x.view(), pi, want.view());
      const QuantizedActivationsBuffer qi = quantize_activations_int8_block(x.view(), 64);
      got.poison();
      linear(qi.view(), pi, got.view());
      EXPECT_SAME_ARRAY(got.bytes, want.bytes) << "int8 " << what;
      linear(x.view(), pf, want.view());
      const QuantizedActivationsBuffer qf = quantize_activations_fp8_block(x.view());
      got.poison();
      linear(qf.view(), pf, got.view());
      EXPECT_SAME_ARRAY(got.bytes, want.bytes) << "fp8 " << what;
    }
    // 0 rows: a valid view of nothing, as linear(x) on 0 rows is a no-op.
    std::vector<float> none(kK);
    const TensorView x0(none.data(), DType::F32, {0, kK});
    HostTensor y(DType::F32, {1, kN});
    const TensorView y0(y.bytes.data(), DType::F32, {0, kN});
    EXPECT_NO_THROW(linear(quantize_activations_int8_block(x0, 64).view(), pi, y0));
    EXPECT_NO_THROW(linear(quantize_activations_fp8_block(x0).view(), pf, y0));
    EXPECT_NO_THROW(ref::linear_w8a8_block(x0, wi, 64, y0, {}));
    EXPECT_NO_THROW(ref::linear_fp8_block(x0, wf, y0, {}));
  }
}

// The caller's meta is what the product uses (not recomputed from the codes): scaling a row's
// INT8 scales and sums, or its FP8 scales, changes that row alone.
TEST(LinearQuantized, UsesTheCallersMeta) {
  const int64_t M = 3;
  const HostTensor x = random_tensor(DType::F32, {M, kK}, 50);
  for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
    const PreparedWeight pi = prepare_for(make_weight("w8g64asym", 51), b, ActQuant::Int8Block);
    QuantBuffers bi(M, kK, 64);
    QuantizedActivations xq = bi.int8();
    quantize_activations_int8_block(x.view(), 64, xq.q, xq.scale, xq.offset, xq.sums);
    HostTensor y0(DType::F32, {M, kN}), y1(DType::F32, {M, kN});
    linear(xq, pi, y0.view());
    for (int64_t kb = 0; kb < bi.nb; ++kb) bi.sums[size_t(kb * bi.ldm + 1)] += 3;
    linear(xq, pi, y1.view());
    for (int64_t n = 0; n < kN; ++n) {
      EXPECT_EQ(y0.get(n), y1.get(n));
      EXPECT_NE(y0.get(kN + n), y1.get(kN + n)) << backend_name(b) << " n " << n;
      EXPECT_EQ(y0.get(2 * kN + n), y1.get(2 * kN + n));
    }

    const PreparedWeight pf = prepare_for(make_weight("fp8b128", 52), b, ActQuant::Fp8Block);
    QuantBuffers bf(M, kK, 128);
    QuantizedActivations xf = bf.fp8();
    quantize_activations_fp8_block(x.view(), xf.q, xf.scale);
    linear(xf, pf, y0.view());
    for (int64_t kb = 0; kb < bf.nb; ++kb) bf.scale[size_t(kb * bf.ldm + 2)] *= 2.f;
    linear(xf, pf, y1.view());
    for (int64_t n = 0; n < kN; ++n) {
      EXPECT_EQ(y0.get(n), y1.get(n));
      EXPECT_EQ(2 * y0.get(2 * kN + n), y1.get(2 * kN + n)) << backend_name(b) << " n " << n;
    }
  }
}

TEST(LinearQuantized, ZeroRowsIsANoOp) {
  for (BackendKind b : {BackendKind::Reference, BackendKind::CPU}) {
    const PreparedWeight pw = prepare_for(make_weight("w8g64", 60), b, ActQuant::Int8Block);
    QuantBuffers buf(0, kK, 64);
    HostTensor y(DType::F32, {1, kN});  // storage for a [0][N] view
    y.poison();
    EXPECT_NO_THROW(linear(buf.int8(), pw, strided2(y.bytes.data(), DType::F32, 0, kN, kN)));
    EXPECT_TRUE(std::isnan(y.get(0)));
  }
}

// ------------------------------------------------------------------ argument errors

struct LinearQuantizedErrors : ::testing::Test {
  const int64_t M = 5;  // meta pitch 8; K = 200: row pitch 208, 4 blocks of 64, 2 of 128
  PreparedWeight pi = prepare_for(make_weight("w8g64", 70), BackendKind::CPU, ActQuant::Int8Block);
  PreparedWeight pf = prepare_for(make_weight("fp8b128", 71), BackendKind::CPU,
                                  ActQuant::Fp8Block);
  QuantBuffers bi{M, kK, 64}, bf{M, kK, 128};
  HostTensor y = HostTensor(DType::F32, {M, kN});
  QuantizedActivations xi() { return bi.int8(); }
  QuantizedActivations xf() { return bf.fp8(); }
  // A meta view over `p` with `rows` x `cols` and row stride `ld`.
  TensorView meta(void* p, DType t, int64_t rows, int64_t cols, int64_t ld) {
    return strided2(p, t, rows, cols, ld);
  }
};

TEST_F(LinearQuantizedErrors, ValidCallsWork) {
  EXPECT_NO_THROW(linear(xi(), pi, y.view()));
  EXPECT_NO_THROW(linear(xf(), pf, y.view()));
}

TEST_F(LinearQuantizedErrors, KindMustMatchTheWeight) {
  EXPECT_ARG_ERROR(linear(xf(), pi, y.view()), "xq.kind (fp8-block)", "act (int8-block)");
  EXPECT_ARG_ERROR(linear(xi(), pf, y.view()), "xq.kind (int8-block)", "act (fp8-block)");
  QuantizedActivations none = xi();
  none.kind = ActQuant::None;
  EXPECT_ARG_ERROR(linear(none, pi, y.view()), "xq.kind (weight-only)", "int8-block");
  const QuantizedWeight w = make_weight("w8g64", 72);
  EXPECT_ARG_ERROR(linear(xi(), prepare_for(w, BackendKind::CPU, ActQuant::None), y.view()),
                   "act = int8-block or fp8-block", "this one is weight-only");
  const QuantizedWeight wpc = make_weight("w8pc", 73);
  EXPECT_ARG_ERROR(linear(xi(), prepare_for(wpc, BackendKind::Reference,
                                            ActQuant::Int8PerTensor), y.view()),
                   "act = int8-block or fp8-block", "this one is int8-per-tensor");
}

TEST_F(LinearQuantizedErrors, Block) {
  QuantizedActivations x = xi();
  x.block = 128;
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.block (128)", "act_block (64)");
  QuantizedActivations f = xf();
  f.block = 64;
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.block (64)", "must be 128");
  // A valid CPU W8A8 weight whose block no activation quantizer writes.
  const PreparedWeight p512 = prepare_for(
      quantize_weight(random_tensor(DType::F32, {kN, 1024}, 74).view(), parse_scheme("w8g512")),
      BackendKind::CPU, ActQuant::Int8Block);
  QuantBuffers b512(M, 1024, 512);
  EXPECT_UNSUPPORTED(linear(b512.int8(), p512, y.view()), "32, 64, 128 or 256", "512");
}

TEST_F(LinearQuantizedErrors, Fp8TakesNoOffsetOrSums) {
  QuantizedActivations f = xf();
  f.offset = bf.meta(bf.offset.data(), DType::F32);
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.offset", "xq.sums", "must be empty");
}

TEST_F(LinearQuantizedErrors, CodesDtypeShapeStride) {
  QuantizedActivations x = xi();
  x.q = bi.codes(DType::U8);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q must be i8", "u8");
  QuantizedActivations f = xf();
  f.q = bf.codes(DType::I8);
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.q must be f8e4m3 or u8", "i8");
  x.q = strided2(bi.q.data(), DType::I8, M, kK - 1, 208);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q must be [M][K]", "[5][200]", "[5][208]");
  x.q = strided2(bi.q.data(), DType::I8, M, kK, 200);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q row stride (200)", "208");
  x.q = strided2(bi.q.data(), DType::I8, M, kK, 199);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q:", "row stride 199", "row length 200");
  x.q = TensorView::strided(bi.q.data(), DType::I8, {M, kK}, {208, 2});
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q:", "innermost dimension must be contiguous");
  x.q = TensorView(bi.q.data(), DType::I8, {1, M, kK});
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q:", "rank 2");
  x.q = TensorView();
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q:", "null");
}

TEST_F(LinearQuantizedErrors, MetaDtypes) {
  QuantizedActivations x = xi();
  x.scale = bi.meta(bi.sums.data(), DType::I32);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.scale must be f32", "i32");
  x = xi();
  x.offset = bi.meta(bi.sums.data(), DType::I32);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.offset must be f32", "i32");
  x = xi();
  x.sums = bi.meta(bi.offset.data(), DType::F32);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.sums must be i32", "f32");
  QuantizedActivations f = xf();
  f.scale = TensorView();
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.scale:", "null");
}

TEST_F(LinearQuantizedErrors, MetaShapesAndStrides) {
  QuantizedActivations x = xi();
  x.scale = meta(bi.scale.data(), DType::F32, 3, M, 8);  // 3 of the 4 blocks
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.scale must be [n_blocks][M]", "[4][5]", "[4][8]",
                   "[3, 5]");
  x = xi();
  x.sums = meta(bi.sums.data(), DType::I32, 4, M + 1, 8);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.sums must be [n_blocks][M]", "[4, 6]");
  QuantizedActivations f = xf();
  std::vector<float> tight(size_t(2 * M));
  f.scale = meta(tight.data(), DType::F32, 2, M, M);
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.scale row stride (5)",
                   "act_quant_meta_pitch(M) = 8");
  f.scale = meta(tight.data(), DType::F32, 2, M, M - 1);
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.scale:", "row stride 4", "row length 5");
  x = xi();
  std::vector<float> wide(size_t(4 * 12));
  x.offset = meta(wide.data(), DType::F32, 4, M, 12);
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.scale, xq.offset and xq.sums", "one row stride",
                   "8, 12, 8");
}

TEST_F(LinearQuantizedErrors, Devices) {
  QuantizedActivations x = xi();
  x.q.device = Device::CUDA;
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.q:", "expected a cpu tensor", "cuda");
  x = xi();
  x.sums.device = Device::CUDA;
  EXPECT_ARG_ERROR(linear(x, pi, y.view()), "xq.sums", "is not on the weight's device (cpu)");
  QuantizedActivations f = xf();
  f.scale.device = Device::CUDA;
  EXPECT_ARG_ERROR(linear(f, pf, y.view()), "xq.scale", "is not on the weight's device");
  EXPECT_ARG_ERROR(linear(xi(), pi, y.view(Device::CUDA)), "y:", "expected a cpu tensor", "cuda");
  Epilogue ep;
  HostTensor bias(DType::F32, {kN});
  ep.bias = bias.view(Device::CUDA);
  EXPECT_ARG_ERROR(linear(xi(), pi, y.view(), ep), "bias", "cuda");
}

TEST_F(LinearQuantizedErrors, OutputAndEpilogue) {
  HostTensor yn(DType::F32, {M, kN + 1}), ym(DType::F32, {M + 1, kN}), yi(DType::I8, {M, kN});
  EXPECT_ARG_ERROR(linear(xi(), pi, yn.view()), "y is", "[5, 38]", "expected [5, 37]",
                   "M from xq.q");
  EXPECT_ARG_ERROR(linear(xf(), pf, ym.view()), "y is", "[6, 37]", "expected [5, 37]");
  EXPECT_ARG_ERROR(linear(xi(), pi, yi.view()), "y:", "f32, f16 or bf16", "i8");
  Epilogue ep;
  HostTensor b(DType::F32, {kN - 1});
  ep.bias = b.view();
  EXPECT_ARG_ERROR(linear(xi(), pi, y.view(), ep), "bias", "length 36", "N (37)");
  Epilogue c;
  c.clamp_lo = 2.f;
  c.clamp_hi = 1.f;
  EXPECT_ARG_ERROR(linear(xf(), pf, y.view(), c), "clamp_lo (2)", "clamp_hi (1)");
}

TEST_F(LinearQuantizedErrors, WeightAndWorkspace) {
  EXPECT_ARG_ERROR(linear(xi(), PreparedWeight(), y.view()), "PreparedWeight", "empty");
  ConvWeight cw{make_weight("w8g64", 75, 256), 256, 1, 1, ConvKOrder::KhKwCi};
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.act = ActQuant::Int8Block;
  EXPECT_ARG_ERROR(linear(xi(), prepare(cw, o), y.view()), "linear", "convolution weight");
  ExecContext ctx;
  ctx.workspace_bytes = 128;
  EXPECT_ARG_ERROR(linear(xi(), pi, y.view(), {}, ctx), "workspace_bytes (128)", "null");
  // The call's scratch would overwrite the activations or the output.
  std::vector<uint8_t> ws(linear_workspace_size(pi, M) + bi.q.size());
  QuantizedActivations x = xi();
  x.q = strided2(ws.data() + 64, DType::I8, M, kK, 208);
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  EXPECT_ARG_ERROR(linear(x, pi, y.view(), {}, ctx), "xq.q", "overlaps the first",
                   "ExecContext::workspace");
  ctx.workspace = y.bytes.data();
  ctx.workspace_bytes = y.bytes.size();
  EXPECT_ARG_ERROR(linear(xf(), pf, y.view(), {}, ctx), "y (", "overlaps");
  // Past the bytes the call uses, the caller's buffer is theirs.
  const size_t used = linear_workspace_size(pi, M);
  x.q = strided2(ws.data() + used, DType::I8, M, kK, 208);
  quantize_activations_int8_block(random_tensor(DType::F32, {M, kK}, 76).view(), 64, x.q,
                                  x.scale, x.offset, x.sums);
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  EXPECT_NO_THROW(linear(x, pi, y.view(), {}, ctx));
}
