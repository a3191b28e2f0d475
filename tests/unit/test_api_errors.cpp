// Bad input through the public API (mixq::prepare / linear / conv2d on the reference backend):
// every case must throw mixq::Error whose message names the argument and shows the value.
#include <gtest/gtest.h>

#include <numeric>

#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

QuantizedWeight weight(const char* scheme, int64_t N, int64_t K) {
  const HostTensor w = random_tensor(DType::F32, {N, K}, 600);
  return quantize_weight(w.view(), parse_scheme(scheme));
}

PrepareOptions ref_opts(ActQuant act = ActQuant::None) {
  PrepareOptions o;
  o.backend = BackendKind::Reference;
  o.act = act;
  return o;
}

struct LinearFixture : ::testing::Test {
  const int64_t M = 3, N = 6, K = 64;
  QuantizedWeight w = weight("w4g32", N, K);
  PreparedWeight p = prepare(w, ref_opts());
  HostTensor x = random_tensor(DType::F32, {M, K}, 601);
  HostTensor y = HostTensor(DType::F32, {M, N});
};

}  // namespace

TEST_F(LinearFixture, ShapesAndRanks) {
  HostTensor x3(DType::F32, {1, M, K});
  EXPECT_MIXQ_ERROR(linear(x3.view(), p, y.view()), "x:", "rank 2", "[1, 3, 64]");
  EXPECT_MIXQ_ERROR(linear(x.view(), p, HostTensor(DType::F32, {M * N}).view()), "y:", "rank 2", "[18]");
  HostTensor xk(DType::F32, {M, K - 1});
  EXPECT_MIXQ_ERROR(linear(xk.view(), p, y.view()), "x.shape[1] (63)", "K (64)");
  HostTensor yn(DType::F32, {M, N + 1});
  EXPECT_MIXQ_ERROR(linear(x.view(), p, yn.view()), "y is", "[3, 7]", "expected [3, 6]");
  HostTensor ym(DType::F32, {M + 1, N});
  EXPECT_MIXQ_ERROR(linear(x.view(), p, ym.view()), "y is", "[4, 6]", "expected [3, 6]");
}

TEST_F(LinearFixture, DtypesAndPointers) {
  HostTensor xi(DType::I8, {M, K});
  EXPECT_MIXQ_ERROR(linear(xi.view(), p, y.view()), "x:", "f32, f16 or bf16", "i8[3, 64]");
  HostTensor yi(DType::I32, {M, N});
  EXPECT_MIXQ_ERROR(linear(x.view(), p, yi.view()), "y:", "i32[3, 6]");
  TensorView xn = x.view();
  xn.data = nullptr;
  EXPECT_MIXQ_ERROR(linear(xn, p, y.view()), "x:", "null");
  TensorView yn = y.view();
  yn.data = nullptr;
  EXPECT_MIXQ_ERROR(linear(x.view(), p, yn), "y:", "null");
  EXPECT_MIXQ_ERROR(linear(x.view(), PreparedWeight(), y.view()), "PreparedWeight", "empty");
}

TEST_F(LinearFixture, NonContiguousRowsAndDevice) {
  HostTensor big(DType::F32, {M, 2 * K});
  EXPECT_MIXQ_ERROR(linear(TensorView::strided(big.bytes.data(), DType::F32, {M, K}, {2 * K, 2}), p,
                           y.view()),
                    "x:", "innermost dimension must be contiguous", "strides 128, 2");
  EXPECT_MIXQ_ERROR(linear(TensorView::strided(big.bytes.data(), DType::F32, {M, K}, {K - 1, 1}), p,
                           y.view()),
                    "x:", "row stride 63", "row length 64");
  EXPECT_MIXQ_ERROR(linear(x.view(), p, TensorView::strided(y.bytes.data(), DType::F32, {M, N}, {-N, 1})),
                    "y:", "negative stride");
  EXPECT_MIXQ_ERROR(linear(x.view(Device::CUDA), p, y.view()), "x:", "expected a cpu tensor", "cuda");
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(Device::CUDA)), "y:", "expected a cpu tensor", "cuda");
}

TEST_F(LinearFixture, EpilogueBiasAndClamp) {
  Epilogue ep;
  HostTensor b5(DType::F32, {N - 1});
  ep.bias = b5.view();
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), ep), "bias", "length 5", "N (6)");
  HostTensor bi(DType::I8, {N});
  ep.bias = bi.view();
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), ep), "bias", "i8[6]");
  HostTensor b2(DType::F32, {1, N});
  ep.bias = b2.view();
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), ep), "bias", "rank 1", "[1, 6]");
  HostTensor bs(DType::F32, {2 * N});
  ep.bias = TensorView::strided(bs.bytes.data(), DType::F32, {N}, {2});
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), ep), "bias", "contiguous");
  HostTensor bc(DType::F32, {N});
  ep.bias = bc.view(Device::CUDA);
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), ep), "bias", "cuda");

  Epilogue c;
  c.clamp_lo = 2.f;
  c.clamp_hi = 1.f;
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), c), "clamp_lo (2)", "clamp_hi (1)");
  c.clamp_lo = NAN;
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), c), "clamp_lo (nan)", "NaN");
  c.clamp_lo = 0.f;
  c.clamp_hi = NAN;
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), c), "clamp_hi (nan)", "NaN");
}

TEST_F(LinearFixture, WorkspaceAndWeightKind) {
  ExecContext ctx;
  ctx.workspace_bytes = 128;
  EXPECT_MIXQ_ERROR(linear(x.view(), p, y.view(), {}, ctx), "workspace_bytes (128)", "null");
  ConvWeight cw{w, 64, 1, 1, ConvKOrder::KhKwCi};
  const PreparedWeight pc = prepare(cw, ref_opts());
  EXPECT_MIXQ_ERROR(linear(x.view(), pc, y.view()), "linear", "convolution weight");
  HostTensor x4(DType::F32, {1, K, 1, 1}), y4(DType::F32, {1, N, 1, 1});
  EXPECT_MIXQ_ERROR(conv2d(x4.view(), p, y4.view(), {}), "conv2d", "linear weight");
}

// ------------------------------------------------------------------ invalid weights at prepare

TEST(ApiErrors, PrepareValidatesTheWeight) {
  const QuantizedWeight good = weight("w4g32zp", 4, 96);
  auto expect_prepare_error = [&](const std::function<void(QuantizedWeight&)>& f,
                                  std::initializer_list<std::string> parts) {
    QuantizedWeight w = good;
    f(w);
    try {
      prepare(w, ref_opts());
      ADD_FAILURE() << "prepare accepted a broken weight (expected " << *parts.begin() << ")";
    } catch (const Error& e) {
      for (const auto& s : parts)
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what() << " lacks " << s;
    }
  };
  expect_prepare_error([](QuantizedWeight& w) { w.codes.resize(10); }, {"codes hold 10 bytes"});
  expect_prepare_error([](QuantizedWeight& w) { w.scales.push_back(0); }, {"scales hold 25 bytes"});
  expect_prepare_error([](QuantizedWeight& w) { w.zeros.resize(8); }, {"zero points hold 8 bytes"});
  expect_prepare_error([](QuantizedWeight& w) { w.block_k = 0; }, {"block_k (0)"});
  expect_prepare_error([](QuantizedWeight& w) { w.block_k = 97; }, {"block_k (97)", "K=96"});
  expect_prepare_error([](QuantizedWeight& w) {
    const int32_t z = 40;
    std::memcpy(w.zeros.data(), &z, 4);
  }, {"zero point entry 0", "(40)"});
  expect_prepare_error([](QuantizedWeight& w) {
    w.k_perm.resize(96);
    std::iota(w.k_perm.begin(), w.k_perm.end(), 0);
    w.k_perm[95] = 0;
  }, {"k_perm is not a permutation", "entry 95 = 0"});
  expect_prepare_error([](QuantizedWeight& w) {
    const uint16_t nan = 0x7E00;
    std::memcpy(w.scales.data() + 2, &nan, 2);
  }, {"scale entry 1", "nan"});
}

TEST(ApiErrors, IncompatibleActivationModes) {
  const QuantizedWeight w4 = weight("w4g128", 4, 256);
  // fp8 activations take 4-bit weights (W4A8) in groups of 128, symmetric or zero-point, only
  EXPECT_NO_THROW(prepare(w4, ref_opts(ActQuant::Fp8Block)));
  EXPECT_NO_THROW(prepare(weight("w4g128zp", 4, 256), ref_opts(ActQuant::Fp8Block)));
  EXPECT_MIXQ_ERROR(prepare(weight("w4g64", 4, 256), ref_opts(ActQuant::Fp8Block)), "act=fp8-block", "W4A8",
                    "i4 [4 x 256]");
  EXPECT_MIXQ_ERROR(prepare(weight("w4g128asym", 4, 256), ref_opts(ActQuant::Fp8Block)), "act=fp8-block");
  EXPECT_MIXQ_ERROR(prepare(weight("w8g128", 4, 256), ref_opts(ActQuant::Fp8Block)), "act=fp8-block", "i8");
  EXPECT_MIXQ_ERROR(prepare(w4, ref_opts(ActQuant::Int8Block)), "act=int8-block", "i4");
  EXPECT_MIXQ_ERROR(prepare(w4, ref_opts(ActQuant::Int8PerTensor)), "act=int8-per-tensor", "i4");
  const QuantizedWeight w8 = weight("w8g64", 4, 256);
  PrepareOptions o = ref_opts(ActQuant::Int8Block);
  o.act_block = 128;
  EXPECT_MIXQ_ERROR(prepare(w8, o), "act_block (128)", "block_k (64)");
  EXPECT_MIXQ_ERROR(prepare(weight("w8g64zp", 4, 256), ref_opts(ActQuant::Int8Block)), "u8");
  EXPECT_MIXQ_ERROR(prepare(w8, ref_opts(ActQuant::Int8PerTensor)), "block_k = K", "g64");
  const QuantizedWeight pc = quantize_weight_int8_per_channel(random_tensor(DType::F32, {4, 32}, 1).view());
  o = ref_opts(ActQuant::Int8PerTensor);
  o.input_quant.scale = 0.f;
  EXPECT_MIXQ_ERROR(prepare(pc, o), "input scale (0)");
  o.input_quant.scale = 1.f;
  o.output_quant.zero = 200;
  EXPECT_MIXQ_ERROR(prepare(pc, o), "zero points", "200");
  // fp8 with K < 128: quantize_weight clamps block_k to K; the mode accepts it.
  const QuantizedWeight f = weight("fp8b128", 4, 100);
  EXPECT_NO_THROW(prepare(f, ref_opts(ActQuant::Fp8Block)));
  // int8-per-tensor takes i8 activations and i8/f32 outputs only.
  const PreparedWeight pp = prepare(pc, ref_opts(ActQuant::Int8PerTensor));
  HostTensor xf(DType::F32, {2, 32}), xi(DType::I8, {2, 32}), yh(DType::F16, {2, 4});
  EXPECT_MIXQ_ERROR(linear(xf.view(), pp, HostTensor(DType::I8, {2, 4}).view()), "x:", "i8", "f32[2, 32]");
  EXPECT_MIXQ_ERROR(linear(xi.view(), pp, yh.view()), "y:", "f16[2, 4]");
  EXPECT_MIXQ_ERROR(parse_backend("tpu"), "'tpu'", "auto, ref, cpu, cuda");
}

// ------------------------------------------------------------------ conv2d

TEST(ApiErrors, Conv2dArguments) {
  const QuantizedWeight w = weight("w4g4", 5, 8 * 9);
  ConvWeight cw{w, 8, 3, 3, ConvKOrder::KhKwCi};
  const PreparedWeight p = prepare(cw, ref_opts());
  HostTensor x(DType::F32, {2, 8, 6, 6}), y(DType::F32, {2, 5, 4, 4});
  Conv2dParams ok;
  conv2d(random_tensor(DType::F32, {2, 8, 6, 6}, 2).view(), p, y.view(), ok);
  HostTensor xc(DType::F32, {2, 7, 6, 6});
  EXPECT_MIXQ_ERROR(conv2d(xc.view(), p, y.view(), ok), "input channels (7", "weight Ci (8)");
  HostTensor yb(DType::F32, {2, 5, 4, 3});
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, yb.view(), ok), "y is", "[2, 5, 4, 3]", "expected [2, 5, 4, 4]");
  Conv2dParams nhwc = ok;
  nhwc.layout = Layout::NHWC;
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), nhwc), "input channels (6", "NHWC");
  HostTensor x3(DType::F32, {8, 6, 6});
  EXPECT_MIXQ_ERROR(conv2d(x3.view(), p, y.view(), ok), "x:", "rank 4");
  Conv2dParams bad = ok;
  bad.stride_h = 0;
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), bad), "stride (0, 1)");
  bad = ok;
  bad.dilation_w = -1;
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), bad), "dilation (1, -1)");
  bad = ok;
  bad.pad_h = -2;
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), bad), "padding (-2, 0)");
  bad = ok;
  bad.dilation_h = 4;
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), bad), "6x6", "dilated kernel 9x3");
  EXPECT_MIXQ_ERROR(conv2d(TensorView::strided(x.bytes.data(), DType::F32, {2, 8, 6, 3}, {288, 36, 6, 2}),
                           p, y.view(), ok),
                    "x (f32[2, 8, 6, 3]", "strides 288, 36, 6, 2", "must be contiguous");
  EXPECT_MIXQ_ERROR(conv2d(x.view(Device::CUDA), p, y.view(), ok), "x:", "cuda");
  Epilogue ep;
  HostTensor b(DType::F32, {4});
  ep.bias = b.view();
  EXPECT_MIXQ_ERROR(conv2d(x.view(), p, y.view(), ok, ep), "bias", "length 4", "N (5)");

  // Conv weight geometry.
  ConvWeight badk{w, 8, 3, 2, ConvKOrder::KhKwCi};
  EXPECT_MIXQ_ERROR(prepare(badk, ref_opts()), "weight K (72)", "Ci*Kh*Kw (8*3*2 = 48)");
  ConvWeight badblk{weight("w4g16", 5, 72), 8, 3, 3, ConvKOrder::KhKwCi};
  EXPECT_MIXQ_ERROR(prepare(badblk, ref_opts()), "block_k (16)", "divide Ci (8)");
  ConvWeight badblk2{weight("w4g4", 5, 72), 8, 3, 3, ConvKOrder::CiKhKw};
  EXPECT_MIXQ_ERROR(prepare(badblk2, ref_opts()), "block_k (4)", "multiple of Kh*Kw (9)");
  ConvWeight zero{w, 0, 3, 3, ConvKOrder::KhKwCi};
  EXPECT_MIXQ_ERROR(prepare(zero, ref_opts()), "Ci (0)");
}
