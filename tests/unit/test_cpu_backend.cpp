// The optimized CPU backend against the float64 reference kernels (mixq::ref), on random data at
// odd shapes, with poisoned outputs. Tolerances (max |cpu - ref| / max |ref| over the output):
//   weight-only f32 path, f32 output ........ 1e-5 (f32 accumulation vs float64); forced with
//                                               "cpu_f32" (the default for M <= 8 is i8dot)
//   weight-only default, M <= 8 (i8dot) ...... 1e-2 vs float64; 1e-5 vs float64 on the same
//                                               int8-quantized activations
//   f16 / bf16 outputs ....................... one output ulp: 1e-3 / 8e-3 (plus the above)
//   weight-only i8dot (int8 activations) ..... 1e-2 (activation quantization error)
//   W8A8 int8-block .......................... 1e-5 (same quantized X; f32 four-term sums)
//   FP8 block ................................ 1e-5
//   INT8 per-tensor (i8 output) .............. exact (|diff| = 0); f32 output 1e-6
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "cpu/kernel_policy.hpp"
#include "cpu/kernels.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

using namespace mixq;

namespace {

struct Buf {
  DType t;
  std::vector<uint8_t> bytes;
  int64_t r, c;
  Buf(DType dt, int64_t rows, int64_t cols) : t(dt), bytes(dtype_bytes(dt, rows * cols)), r(rows), c(cols) {}
  TensorView view() { return TensorView(bytes.data(), t, {r, c}); }
  void poison() {
    if (t == DType::I8) std::memset(bytes.data(), 0x5A, bytes.size());
    else for (int64_t i = 0; i < r * c; ++i) ref::store_from_double(view(), i / c, i % c, NAN);
  }
};

Buf random_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Buf b(t, rows, cols);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ref::store_from_double(b.view(), i, j, d(g));
  return b;
}

// max |a - b| / max |b|, failing on any non-finite value in a.
double rel_err(Buf& a, Buf& b) {
  double md = 0, mb = 0;
  for (int64_t i = 0; i < a.r; ++i)
    for (int64_t j = 0; j < a.c; ++j) {
      const double va = ref::load_as_double(a.view(), i, j), vb = ref::load_as_double(b.view(), i, j);
      if (!std::isfinite(va)) return INFINITY;
      md = std::max(md, std::fabs(va - vb));
      mb = std::max(mb, std::fabs(vb));
    }
  return mb > 0 ? md / mb : md;
}

QuantizedWeight make_weight(const std::string& scheme, int64_t N, int64_t K, uint32_t seed) {
  Buf w = random_matrix(DType::F32, N, K, seed, -0.7f, 1.1f);
  return quantize_weight(w.view(), parse_scheme(scheme));
}

QuantizedWeight dense_weight(DType t, int64_t N, int64_t K, uint32_t seed) {
  Buf w = random_matrix(t, N, K, seed);
  QuantizedWeight q;
  q.N = N; q.K = K; q.code_type = t; q.block_k = K; q.has_scales = false;
  q.zero_kind = ZeroKind::None;
  q.codes = w.bytes;
  q.validate();
  return q;
}

PrepareOptions cpu_opts(ActQuant act = ActQuant::None, const std::string& force = "") {
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.act = act;
  o.force_kernel = force;
  return o;
}

double run_weight_only(const QuantizedWeight& w, int64_t M, DType xt, DType yt, bool bias_clamp,
                       int threads, const std::string& force = "cpu_f32", const std::string& isa = "") {
  Buf x = random_matrix(xt, M, w.K, 1000 + M);
  Buf y(yt, M, w.N), yr(DType::F32, M, w.N);
  Buf b = random_matrix(DType::F32, 1, w.N, 7);
  Epilogue ep;
  if (bias_clamp) {
    ep.bias = TensorView(b.bytes.data(), DType::F32, {w.N});
    ep.clamp_lo = -0.5f;
    ep.clamp_hi = 2.f;
  }
  y.poison();
  ExecContext ctx;
  ctx.num_threads = threads;
  PrepareOptions o = cpu_opts(ActQuant::None, force);
  o.cpu_isa = isa;
  const PreparedWeight p = prepare(w, o);
  EXPECT_EQ(p.backend(), BackendKind::CPU);
  linear(x.view(), p, y.view(), ep, ctx);
  ref::linear_weight_only(x.view(), w, yr.view(), ep);
  return rel_err(y, yr);
}

const int64_t kMs[] = {1, 2, 3, 7, 17, 64};

}  // namespace

TEST(CpuBackend, WeightOnlyAllSchemesOddShapes) {
  const char* schemes[] = {"w4g32", "w4g128", "w4g32asym", "w4g128zp", "w8g64asym", "w8g128",
                           "w4pc", "w8pc", "w4g64-bf16", "w8g32zp", "fp8b128"};
  int i = 0;
  for (const char* s : schemes) {
    const int64_t N = 37 + 16 * (i % 3), K = 300 + 37 * (i % 4);  // ragged last blocks
    const QuantizedWeight w = make_weight(s, N, K, 11 + i);
    for (int64_t M : kMs)
      EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, M % 2 == 1, 1 + (M % 2)), 1e-5)
          << s << " M=" << M << " N=" << N << " K=" << K;
    ++i;
  }
}

TEST(CpuBackend, WeightOnlyBlock16AndOddBlock) {
  for (const char* s : {"w4g16", "w8g16asym"}) {
    const QuantizedWeight w = make_weight(s, 33, 211, 5);
    for (int64_t M : {1, 9}) EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, true, 2), 1e-5) << s;
  }
  QuantScheme odd = parse_scheme("w4g32asym");
  odd.block_k = 13;  // odd blocks: every block padded separately
  Buf wf = random_matrix(DType::F32, 19, 100, 3);
  const QuantizedWeight w = quantize_weight(wf.view(), odd);
  for (int64_t M : {1, 3, 17}) EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, false, 2), 1e-5);
}

TEST(CpuBackend, WeightOnlyDenseCodes) {
  for (DType t : {DType::F16, DType::BF16, DType::F32}) {
    const QuantizedWeight w = dense_weight(t, 29, 157, 3);
    for (int64_t M : kMs) EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, true, 2), 1e-5);
  }
}

TEST(CpuBackend, WeightOnlyUnsignedCodesAndActOrder) {
  QuantizedWeight w = make_weight("w4g32zp", 40, 200, 9);
  EXPECT_LE(run_weight_only(w, 3, DType::F32, DType::F32, false, 2), 1e-5);
  QuantizedWeight u8 = make_weight("w8g64zp", 21, 150, 4);
  EXPECT_LE(run_weight_only(u8, 5, DType::F32, DType::F32, false, 2), 1e-5);
  // act-order: a random permutation of K
  w.k_perm.resize(static_cast<size_t>(w.K));
  for (int64_t k = 0; k < w.K; ++k) w.k_perm[k] = static_cast<int32_t>(k);
  std::shuffle(w.k_perm.begin(), w.k_perm.end(), std::mt19937(1));
  for (int64_t M : {1, 17}) EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, true, 2), 1e-5);
}

TEST(CpuBackend, WeightOnlyActivationAndOutputDtypes) {
  const QuantizedWeight w = make_weight("w4g32asym", 45, 130, 2);
  const double tol[] = {1e-5, 1.5e-3, 1e-2};
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (DType xt : types)
    for (int oi = 0; oi < 3; ++oi)
      for (int64_t M : {1, 17})
        EXPECT_LE(run_weight_only(w, M, xt, types[oi], true, 2), tol[oi])
            << dtype_name(xt) << " -> " << dtype_name(types[oi]);
}

TEST(CpuBackend, WeightOnlyInt8DotForced) {
  for (const char* s : {"w4g32", "w4g128zp", "w8g64asym", "w4pc"}) {
    const QuantizedWeight w = make_weight(s, 35, 333, 8);
    for (int64_t M : {1, 3, 17})
      EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, false, 2, "cpu_i8dot"), 1e-2) << s;
    EXPECT_NE(prepare(w, cpu_opts(ActQuant::None, "cpu_i8dot")).kernel_name(1).find("i8dot"),
              std::string::npos);
  }
  EXPECT_THROW(prepare(dense_weight(DType::F16, 16, 16, 1), cpu_opts(ActQuant::None, "cpu_i8dot")),
               mixq::Error);
  EXPECT_THROW(prepare(make_weight("w4g32", 16, 64, 1), cpu_opts(ActQuant::None, "nope")), mixq::Error);
}

TEST(CpuBackend, W8A8Block) {
  for (const char* s : {"w8g32", "w8g64asym", "w8pc", "w8g128asym"}) {
    const QuantizedWeight w = make_weight(s, 41, 517, 6);
    for (int64_t M : kMs) {
      Buf x = random_matrix(DType::F32, M, w.K, 50 + M, -0.3f, 1.2f);
      Buf y(DType::F32, M, w.N), yr(DType::F32, M, w.N);
      y.poison();
      ExecContext ctx;
      ctx.num_threads = 2;
      linear(x.view(), prepare(w, cpu_opts(ActQuant::Int8Block)), y.view(), {}, ctx);
      ref::linear_w8a8_block(x.view(), w, w.block_k, yr.view(), {});
      EXPECT_LE(rel_err(y, yr), 1e-5) << s << " M=" << M;
    }
  }
}

TEST(CpuBackend, Fp8Block) {
  for (int64_t N : {130, 37}) {
    const QuantizedWeight w = make_weight("fp8b128", N, 300, 12);
    for (int64_t M : kMs) {
      Buf x = random_matrix(DType::BF16, M, w.K, 70 + M, -2.f, 2.f);
      Buf y(DType::F32, M, w.N), yr(DType::F32, M, w.N);
      y.poison();
      linear(x.view(), prepare(w, cpu_opts(ActQuant::Fp8Block)), y.view(), Epilogue::relu(), {});
      ref::linear_fp8_block(x.view(), w, yr.view(), Epilogue::relu());
      EXPECT_LE(rel_err(y, yr), 1e-5) << "M=" << M;
    }
  }
}

// W4A8 (4-bit weights, FP8 block activations) on the CPU against the reference, with a narrow K
// (one group of K < 128) and K past a group boundary.
TEST(CpuBackend, W4A8) {
  for (const char* scheme : {"w4g128", "w4g128zp"})
    for (int64_t K : {int64_t(300), int64_t(100)}) {
      const QuantizedWeight w = make_weight(scheme, 37, K, 13);
      for (int64_t M : kMs) {
        Buf x = random_matrix(DType::BF16, M, w.K, 80 + M, -2.f, 2.f);
        Buf y(DType::F32, M, w.N), yr(DType::F32, M, w.N);
        y.poison();
        const PreparedWeight pw = prepare(w, cpu_opts(ActQuant::Fp8Block));
        linear(x.view(), pw, y.view(), Epilogue::relu(), {});
        ref::linear_fp8_block(x.view(), w, yr.view(), Epilogue::relu());
        EXPECT_LE(rel_err(y, yr), 1e-5) << scheme << " K=" << K << " M=" << M << " " << pw.kernel_name(M);
      }
    }
}

namespace {
Buf random_i8(int64_t rows, int64_t cols, uint32_t seed) {
  Buf b(DType::I8, rows, cols);
  std::mt19937 g(seed);
  for (auto& v : b.bytes) v = static_cast<uint8_t>(g());
  return b;
}
}  // namespace

TEST(CpuBackend, Int8PerTensorExact) {
  Buf wf = random_matrix(DType::F32, 35, 203, 13);
  const QuantizedWeight w = quantize_weight_int8_per_channel(wf.view());
  PrepareOptions o = cpu_opts(ActQuant::Int8PerTensor);
  o.input_quant = {0.02f, 3};
  o.output_quant = {0.15f, -5};
  const PreparedWeight p = prepare(w, o);
  Buf b = random_matrix(DType::F32, 1, w.N, 3);
  Epilogue ep = Epilogue::relu();
  ep.bias = TensorView(b.bytes.data(), DType::F32, {w.N});
  for (int64_t M : kMs) {
    Buf x = random_i8(M, w.K, 90 + M);
    for (DType yt : {DType::I8, DType::F32}) {
      Buf y(yt, M, w.N), yr(yt, M, w.N);
      y.poison();
      ExecContext ctx;
      ctx.num_threads = 2;
      linear(x.view(), p, y.view(), ep, ctx);
      ref::linear_int8_requant(x.view(), w, o.input_quant, o.output_quant, yr.view(), ep);
      if (yt == DType::I8) EXPECT_EQ(y.bytes, yr.bytes) << "M=" << M;
      else EXPECT_LE(rel_err(y, yr), 1e-6) << "M=" << M;
    }
  }
}

TEST(CpuBackend, Conv2dWeightOnlyBothLayouts) {
  for (ConvKOrder order : {ConvKOrder::KhKwCi, ConvKOrder::CiKhKw})
    for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const int64_t Ci = 6, Co = 19, Kh = 3, Kw = 2, B = 2, H = 9, W = 7;
      ConvWeight cw;
      Buf wf = random_matrix(DType::F32, Co, Ci * Kh * Kw, 21);
      QuantScheme s = parse_scheme("w4g32asym");
      s.block_k = order == ConvKOrder::KhKwCi ? 3 : 12;
      cw.weight = quantize_weight(wf.view(), s);
      cw.Ci = Ci; cw.Kh = Kh; cw.Kw = Kw; cw.order = order;
      Conv2dParams p;
      p.stride_h = 2; p.pad_h = 1; p.pad_w = 2; p.dilation_w = 2; p.layout = layout;
      int64_t Ho, Wo;
      conv2d_output_size(H, W, Kh, Kw, p, &Ho, &Wo);
      const bool nchw = layout == Layout::NCHW;
      Buf x = random_matrix(DType::F32, B, Ci * H * W, 5);
      TensorView xv(x.bytes.data(), DType::F32, nchw ? std::initializer_list<int64_t>{B, Ci, H, W}
                                                     : std::initializer_list<int64_t>{B, H, W, Ci});
      Buf y(DType::F32, B, Co * Ho * Wo), yr(DType::F32, B, Co * Ho * Wo);
      y.poison();
      auto yv = [&](Buf& bb) {
        return TensorView(bb.bytes.data(), DType::F32, nchw ? std::initializer_list<int64_t>{B, Co, Ho, Wo}
                                                          : std::initializer_list<int64_t>{B, Ho, Wo, Co});
      };
      Epilogue ep = Epilogue::relu6();
      ExecContext ctx;
      ctx.num_threads = 2;
      conv2d(xv, prepare(cw, cpu_opts()), yv(y), p, ep, ctx);
      ref::conv2d_weight_only(xv, cw, yv(yr), p, ep);
      EXPECT_LE(rel_err(y, yr), 1e-5) << int(order) << " " << int(layout);
    }
}

TEST(CpuBackend, Conv2dInt8PerTensor) {
  for (Layout layout : {Layout::NCHW, Layout::NHWC}) {
    const int64_t Ci = 5, Co = 20, Kh = 3, Kw = 3, B = 1, H = 8, W = 6;
    Buf wf = random_matrix(DType::F32, Co, Ci * Kh * Kw, 31);
    ConvWeight cw;
    cw.weight = quantize_weight_int8_per_channel(wf.view());
    cw.Ci = Ci; cw.Kh = Kh; cw.Kw = Kw; cw.order = ConvKOrder::CiKhKw;
    PrepareOptions o = cpu_opts(ActQuant::Int8PerTensor);
    o.input_quant = {0.05f, -7};
    o.output_quant = {0.2f, 4};
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    p.layout = layout;
    const bool nchw = layout == Layout::NCHW;
    Buf x = random_i8(B, Ci * H * W, 41);
    TensorView xv(x.bytes.data(), DType::I8, nchw ? std::initializer_list<int64_t>{B, Ci, H, W}
                                                  : std::initializer_list<int64_t>{B, H, W, Ci});
    Buf y(DType::I8, 1, Co * H * W), yr(DType::I8, 1, Co * H * W);
    y.poison();
    auto yv = [&](Buf& bb) {
      return TensorView(bb.bytes.data(), DType::I8, nchw ? std::initializer_list<int64_t>{B, Co, H, W}
                                                       : std::initializer_list<int64_t>{B, H, W, Co});
    };
    conv2d(xv, prepare(cw, o), yv(y), p, {}, {});
    ref::conv2d_int8_requant(xv, cw, o.input_quant, o.output_quant, yv(yr), p, {});
    EXPECT_EQ(y.bytes, yr.bytes);
  }
}

TEST(CpuBackend, ScalarFallbackMatches) {
  const QuantizedWeight w = make_weight("w4g32asym", 21, 100, 4);
  PrepareOptions scalar = cpu_opts();
  scalar.cpu_isa = "scalar";
  EXPECT_NE(prepare(w, scalar).kernel_name(1).find("scalar"), std::string::npos);
  EXPECT_LE(run_weight_only(w, 3, DType::F32, DType::F32, true, 2, "cpu_f32", "scalar"), 1e-5);
  EXPECT_LE(run_weight_only(make_weight("fp8b128", 20, 140, 1), 9, DType::F32, DType::F32, false, 1, "cpu_f32", "scalar"),
            1e-5);
  EXPECT_LE(run_weight_only(w, 3, DType::F32, DType::F32, false, 2, "cpu_i8dot", "scalar"), 1e-2);
}

// The default weight-only path (Tuning::cpu_activations = auto) quantizes X to int8 per segment
// (block <= 256 here) up to the kernel set's measured threshold (auto_int8_max_rows: every M on
// avx512 / avx2vnni, 4-bit codes on avx2; M <= 4 for 8-bit codes on avx2, M <= 8 on scalar):
// within 1e-2 of float64, and within 1e-5 of float64 on the int8-quantized activations (which
// catches a wrong scale / offset / code sum that the loose bound would hide). Above the
// threshold it runs the exact f32 path (1e-5); cpu_activations = exact / int8 pin one path.
TEST(CpuBackend, WeightOnlyDefaultFollowsTheMeasuredThreshold) {
  int i = 0;
  const std::string isa = cpu::select_kernels().isa;
  for (const char* s : {"w4g128", "w4g32asym", "w4g128zp", "w8g64asym", "w8g128", "w4g32zp"}) {
    const int64_t N = 37 + 16 * (i % 3), K = 300 + 37 * (i % 4);  // ragged last blocks
    const QuantizedWeight w = make_weight(s, N, K, 21 + i++);
    const bool four_bit = w.code_type == DType::I4 || w.code_type == DType::U4;
    const int64_t limit = cpu::auto_int8_max_rows(isa, four_bit);
    const PreparedWeight p = prepare(w, cpu_opts());
    for (int64_t M : {1, 2, 5, 8, 9, 17}) {
      if (M > limit) {
        EXPECT_NE(p.kernel_name(M).find(M <= 8 ? "f32gemv" : "f32gemm"), std::string::npos)
            << s << " M=" << M;
        EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, true, 2, ""), 1e-5) << s;
        continue;
      }
      EXPECT_NE(p.kernel_name(M).find("i8dot"), std::string::npos) << s << " M=" << M;
      EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, false, 2, ""), 1e-2) << s << " M=" << M;
      // Emulation: the same activations quantized by the int8-block quantizer (block = the
      // weight's block = the kernel's segment), dequantized, through the float64 reference.
      Buf x = random_matrix(DType::F32, M, w.K, 1000 + M);
      const QuantizedActivationsBuffer q = quantize_activations_int8_block(x.view(), w.block_k);
      Buf xq(DType::F32, M, w.K);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < w.K; ++k) {
          const int64_t b = k / w.block_k;
          ref::store_from_double(xq.view(), m, k,
                                 double(q.int8_code(m, k)) * q.scale_of(m, b) + q.offset_of(m, b));
        }
      Buf y(DType::F32, M, w.N), yr(DType::F32, M, w.N);
      y.poison();
      ExecContext ctx;
      ctx.num_threads = 2;
      linear(x.view(), p, y.view(), {}, ctx);
      ref::linear_weight_only(xq.view(), w, yr.view(), {});
      EXPECT_LE(rel_err(y, yr), 1e-5) << s << " M=" << M << " (vs int8-quantized activations)";
    }
    // The exact path stays selectable for every M, by force_kernel or by the accuracy mode.
    EXPECT_NE(prepare(w, cpu_opts(ActQuant::None, "cpu_f32")).kernel_name(1).find("f32gemv"),
              std::string::npos);
    PrepareOptions exact = cpu_opts(), int8 = cpu_opts();
    exact.tuning.cpu_activations = Tuning::CpuActivations::Exact;
    int8.tuning.cpu_activations = Tuning::CpuActivations::Int8;
    const PreparedWeight pe = prepare(w, exact), pi = prepare(w, int8);
    for (int64_t M : {1, 8, 9, 100}) {
      EXPECT_NE(pe.kernel_name(M).find(M <= 8 ? "f32gemv" : "f32gemm"), std::string::npos) << s;
      EXPECT_NE(pi.kernel_name(M).find("i8dot"), std::string::npos) << s;
    }
    Buf x = random_matrix(DType::F32, 13, w.K, 77);
    Buf ye(DType::F32, 13, w.N), yi(DType::F32, 13, w.N), yr(DType::F32, 13, w.N);
    ye.poison();
    yi.poison();
    linear(x.view(), pe, ye.view(), {}, {});
    linear(x.view(), pi, yi.view(), {}, {});
    ref::linear_weight_only(x.view(), w, yr.view(), {});
    EXPECT_LE(rel_err(ye, yr), 1e-5) << s;
    EXPECT_LE(rel_err(yi, yr), 1e-2) << s;
    EXPECT_GT(rel_err(yi, yr), 1e-6) << s << ": int8 activations should not be exact";
  }
  // Float codes have no integer dots: int8 mode runs them exact; force_kernel beats the mode.
  PrepareOptions int8 = cpu_opts(), forced = cpu_opts(ActQuant::None, "cpu_f32");
  int8.tuning.cpu_activations = Tuning::CpuActivations::Int8;
  forced.tuning.cpu_activations = Tuning::CpuActivations::Int8;
  EXPECT_NE(prepare(make_weight("fp8b128", 20, 128, 1), int8).kernel_name(3).find("f32gemv"),
            std::string::npos);
  EXPECT_NE(prepare(make_weight("w4g32", 20, 128, 1), forced).kernel_name(3).find("f32gemv"),
            std::string::npos);
}

// conv2d runs exact f32 activations whatever cpu_activations says.
TEST(CpuBackend, Conv2dIgnoresTheInt8Mode) {
  ConvWeight cw;
  Buf wf = random_matrix(DType::F32, 8, 3 * 2 * 2, 4);
  cw.weight = quantize_weight(wf.view(), parse_scheme("w4g32asym"));
  cw.Ci = 3; cw.Kh = 2; cw.Kw = 2;
  PrepareOptions o = cpu_opts();
  o.tuning.cpu_activations = Tuning::CpuActivations::Int8;
  Buf x = random_matrix(DType::F32, 1, 3 * 5 * 5, 5);
  TensorView xv(x.bytes.data(), DType::F32, {1, 3, 5, 5});
  Buf y(DType::F32, 1, 8 * 4 * 4), yr(DType::F32, 1, 8 * 4 * 4);
  y.poison();
  TensorView yv(y.bytes.data(), DType::F32, {1, 8, 4, 4}), yrv(yr.bytes.data(), DType::F32, {1, 8, 4, 4});
  conv2d(xv, prepare(cw, o), yv, {}, {}, {});
  ref::conv2d_weight_only(xv, cw, yrv, {}, {});
  EXPECT_LE(rel_err(y, yr), 1e-5);
}

// The packed-once dense baseline: GEMV (M <= 8) and the 12x32 GEMM tiles (M = 9, 13, 30: full
// and partial row tiles), an odd number of panels (the last one alone), reused across calls.
TEST(CpuBackend, DenseGemmF32Prepared) {
  const int64_t N = 45, K = 301;
  Buf w = random_matrix(DType::F32, N, K, 3);
  const cpu::DenseGemmF32 d(w.view().ptr<float>(), N, K, 2);
  EXPECT_EQ(d.N(), N);
  EXPECT_EQ(d.K(), K);
  for (int rep = 0; rep < 2; ++rep)
    for (int64_t M : {1, 3, 8, 9, 13, 30}) {
      Buf x = random_matrix(DType::F32, M, K, 10 + M);
      Buf y(DType::F32, M, N), yr(DType::F32, M, N);
      y.poison();
      d.run(x.view().ptr<float>(), M, y.view().ptr<float>());
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += double(x.view().ptr<float>()[m * K + k]) * w.view().ptr<float>()[n * K + k];
          ref::store_from_double(yr.view(), m, n, acc);
        }
      EXPECT_LE(rel_err(y, yr), 1e-5) << "M=" << M;
    }
  EXPECT_THROW(cpu::DenseGemmF32(nullptr, N, K), mixq::Error);
  EXPECT_THROW(cpu::DenseGemmF32(w.view().ptr<float>(), 0, K), mixq::Error);
}

TEST(CpuBackend, DenseGemmBaseline) {
  const int64_t M = 7, N = 33, K = 71;
  Buf x = random_matrix(DType::F32, M, K, 1), w = random_matrix(DType::F32, N, K, 2);
  Buf y(DType::F32, M, N), yr(DType::F32, M, N);
  cpu::dense_gemm_f32(x.view().ptr<float>(), M, w.view().ptr<float>(), N, K, y.view().ptr<float>(), 2);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(x.view().ptr<float>()[m * K + k]) * w.view().ptr<float>()[n * K + k];
      ref::store_from_double(yr.view(), m, n, acc);
    }
  EXPECT_LE(rel_err(y, yr), 1e-5);
}

TEST(CpuBackend, KernelPolicy) {
  using namespace cpu;
  EXPECT_EQ(choose_path(ActQuant::None, "", true), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, 1), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, kGemvMaxRows), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, kGemvMaxRows + 1), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "", false, 1), CpuPath::F32);  // fp8 / dense codes
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_f32", true, 1), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_i8dot", true, 100), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_avx512_i8dot", true), CpuPath::I8Dot);
  // Accuracy modes and measured thresholds.
  using A = Tuning::CpuActivations;
  EXPECT_EQ(choose_path(ActQuant::None, "", true, 500, A::Auto, kAnyRows), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, 5, A::Auto, 4), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, 1, A::Exact, kAnyRows), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "", true, 1000, A::Int8, 4), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::None, "", false, 1, A::Int8, kAnyRows), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_f32", true, 1, A::Int8, kAnyRows), CpuPath::F32);
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_i8dot", true, 99, A::Exact, 4), CpuPath::I8Dot);
  EXPECT_EQ(choose_path(ActQuant::Int8Block, "", true, 1, A::Exact), CpuPath::W8A8);
  EXPECT_EQ(auto_int8_max_rows("avx512", false), kAnyRows);
  EXPECT_EQ(auto_int8_max_rows("avx2vnni", false), kAnyRows);
  EXPECT_EQ(auto_int8_max_rows("avx2", true), kAnyRows);
  EXPECT_EQ(auto_int8_max_rows("avx2", false), 4);
  EXPECT_EQ(auto_int8_max_rows("scalar", true), kGemvMaxRows);
  EXPECT_EQ(choose_path(ActQuant::None, "cpu_avx2vnni_i8dot", true), CpuPath::I8Dot);
  EXPECT_EQ(cpu_kernel_name("avx2", CpuPath::I8Dot, 64), "cpu_avx2_i8dot");
  EXPECT_EQ(cpu_kernel_name("avx512", CpuPath::F32, 1), "cpu_avx512_f32gemv");
  EXPECT_EQ(cpu_kernel_name("avx512", CpuPath::F32, 9), "cpu_avx512_f32gemm");
  const WorkSplit g = plan_work(1, 256, 2);
  EXPECT_EQ(g.rows_per_task, 1);
  EXPECT_EQ(g.chunk_k, 0);
  EXPECT_EQ(g.panels_per_task, 32);  // 8 tasks for 2 threads
  const WorkSplit l = plan_work(512, 256, 2);
  EXPECT_EQ(l.rows_per_task, kRowsPerTask);
  EXPECT_GT(l.chunk_k, 0);
}

TEST(CpuBackend, WorkspaceTooSmallIsAnError) {
  const QuantizedWeight w = make_weight("w4g32", 16, 64, 1);
  const PreparedWeight p = prepare(w, cpu_opts());
  Buf x = random_matrix(DType::F32, 2, 64, 1);
  Buf y(DType::F32, 2, 16);
  std::vector<uint8_t> ws(16);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  EXPECT_THROW(linear(x.view(), p, y.view(), {}, ctx), mixq::Error);
  ws.resize(linear_workspace_size(p, 2));
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  linear(x.view(), p, y.view(), {}, ctx);
}

// Every e4m3 code (normals, subnormals, both signs) decoded by the float kernels exactly: one-hot
// activation rows pick single weights, so y[m][n] must equal the dequantized weight bit for bit,
// through the GEMV (M <= 8) and the GEMM decode (M > 8). NaN codes (0x7F, 0xFF) make their row NaN.
TEST(CpuBackend, Fp8DecodeAllCodesExactly) {
  const int64_t N = 37, K = 256;
  QuantizedWeight w;
  w.N = N; w.K = K; w.code_type = DType::F8E4M3; w.block_k = 128; w.block_n = 1;
  w.scale_type = DType::F32;
  w.allocate();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      uint8_t c = static_cast<uint8_t>((k + 5 * n) & 0xFF);
      if ((c & 0x7F) == 0x7F) c = static_cast<uint8_t>(c ^ 0x01);  // no NaN here
      w.codes[n * K + k] = c;
    }
  for (int64_t i = 0; i < N * 2; ++i) {
    const float s = (i % 2) ? 0.5f : 1.f;
    std::memcpy(&w.scales[4 * i], &s, 4);
  }
  w.validate();
  for (int64_t M : {1, 8, 9, 30}) {
    Buf x(DType::F32, M, K), y(DType::F32, M, N);
    std::vector<int64_t> col(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      col[m] = (m * 37 + 3) % K;
      for (int64_t k = 0; k < K; ++k) ref::store_from_double(x.view(), m, k, k == col[m] ? 1.0 : 0.0);
    }
    y.poison();
    linear(x.view(), prepare(w, cpu_opts()), y.view(), {}, {});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(y.view().ptr<float>()[m * N + n], w.dequant(n, col[m]))
            << "M=" << M << " n=" << n << " code 0x" << std::hex << int(w.codes[n * K + col[m]]);
  }
  w.codes[3 * K + 10] = 0xFF;  // a NaN code in row 3
  Buf x = random_matrix(DType::F32, 2, K, 4), y(DType::F32, 2, N);
  linear(x.view(), prepare(w, cpu_opts()), y.view(), {}, {});
  EXPECT_TRUE(std::isnan(y.view().ptr<float>()[3]));
  EXPECT_FALSE(std::isnan(y.view().ptr<float>()[4]));
}

// The SIMD int8 activation quantizer against the scalar one (the library arithmetic): random
// values, exact ties (x - of = (j + 0.5) * sc), out-of-range values, infinities and NaN.
TEST(CpuBackend, QuantizeI8SimdMatchesScalar) {
  const cpu::KernelTable* simd = cpu::avx512_kernels();
  if (!simd || std::string(cpu::select_kernels().isa) != "avx512") GTEST_SKIP() << "no AVX-512";
  const float of = 0.25f, sc = 0.5f;
  std::vector<float> x;
  std::mt19937 g(3);
  std::uniform_real_distribution<float> d(-80.f, 80.f);
  for (int i = 0; i < 300; ++i) x.push_back(d(g));
  for (int j = -130; j < 130; ++j) x.push_back(of + (j + 0.5f) * sc);  // ties: half to even
  for (float v : {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 0.f, -0.f}) x.push_back(v);
  for (int64_t n : {int64_t(x.size()), int64_t(13), int64_t(8)}) {
    std::vector<int8_t> a(x.size(), 7), b(x.size(), 7);
    simd->quantize_i8(x.data(), n, of, sc, a.data());
    cpu::scalar_kernels().quantize_i8(x.data(), n, of, sc, b.data());
    EXPECT_EQ(a, b) << "n=" << n;
  }
}

// The float GEMM with several K chunks (K = 1300: 512-column chunks, ragged last block) and
// several 256-row blocks (M = 300), activations packed once per call per (row block, chunk).
TEST(CpuBackend, GemmManyChunksAndRowBlocks) {
  const QuantizedWeight w = make_weight("w4g128", 40, 1300, 31);
  for (int64_t M : {9, 40, 300}) {
    // (No clamp here: max|err| / max|ref| would compare f32 rounding of ~20-sized sums with
    // outputs clamped to 2.)
    EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, false, 2), 1e-5) << "M=" << M;
    EXPECT_LE(run_weight_only(w, M, DType::F32, DType::F32, false, 1), 1e-5) << "M=" << M;
  }
  const QuantizedWeight f = dense_weight(DType::F32, 33, 1100, 5);
  EXPECT_LE(run_weight_only(f, 270, DType::F32, DType::F32, false, 2), 1e-5);
}
