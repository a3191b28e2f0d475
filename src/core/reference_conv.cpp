// Exact reference conv2d, straight from the definition (direct loops, float64 / int64).
#include <cmath>
#include <vector>

#include "core/reference_parallel.hpp"
#include "mixq/error.hpp"
#include "mixq/reference.hpp"

namespace mixq::ref {

namespace {

struct ConvShape {
  int64_t B, Ci, H, W, Co, Ho, Wo, Kh, Kw;
  bool nchw;
};

ConvShape conv_shape(const TensorView& x, const ConvWeight& w, const TensorView& y,
                     const Conv2dParams& p) {
  w.validate();
  MIXQ_CHECK_ARG(x.rank == 4 && y.rank == 4 && x.is_contiguous() && y.is_contiguous(),
                 "ref::conv2d: x and y must be contiguous rank-4 tensors, got ", x.describe(),
                 " and ", y.describe());
  ConvShape s{};
  s.nchw = p.layout == Layout::NCHW;
  s.B = x.shape[0];
  s.Ci = s.nchw ? x.shape[1] : x.shape[3];
  s.H = s.nchw ? x.shape[2] : x.shape[1];
  s.W = s.nchw ? x.shape[3] : x.shape[2];
  s.Co = w.weight.N;
  s.Kh = w.Kh;
  s.Kw = w.Kw;
  MIXQ_CHECK_ARG(s.Ci == w.Ci, "ref::conv2d: input channels ", s.Ci, " != weight Ci ", w.Ci);
  conv2d_output_size(s.H, s.W, s.Kh, s.Kw, p, &s.Ho, &s.Wo);
  const int64_t ey[4] = {s.B, s.nchw ? s.Co : s.Ho, s.nchw ? s.Ho : s.Wo, s.nchw ? s.Wo : s.Co};
  for (int i = 0; i < 4; ++i)
    MIXQ_CHECK_ARG(y.shape[i] == ey[i], "ref::conv2d: y is ", y.describe(), ", expected [", ey[0],
                   ", ", ey[1], ", ", ey[2], ", ", ey[3], "]");
  return s;
}

int64_t x_index(const ConvShape& s, int64_t b, int64_t c, int64_t h, int64_t w) {
  return s.nchw ? ((b * s.Ci + c) * s.H + h) * s.W + w : ((b * s.H + h) * s.W + w) * s.Ci + c;
}
int64_t y_index(const ConvShape& s, int64_t b, int64_t c, int64_t h, int64_t w) {
  return s.nchw ? ((b * s.Co + c) * s.Ho + h) * s.Wo + w : ((b * s.Ho + h) * s.Wo + w) * s.Co + c;
}
int64_t k_index(const ConvWeight& w, int64_t ci, int64_t kh, int64_t kw) {
  return w.order == ConvKOrder::KhKwCi ? (kh * w.Kw + kw) * w.Ci + ci : (ci * w.Kh + kh) * w.Kw + kw;
}

// Visits every (output element, contributing input element, weight column) triple, one
// (image, output channel) plane a task, with a task's own accumulator: body(acc, xi, co, k) for
// each product, finish(acc, yi, co) for each output (acc is reset after it).
template <typename Acc, typename Body, typename Finish>
void for_each_output(const ConvShape& s, const ConvWeight& w, const Conv2dParams& p, Body body,
                     Finish finish) {
  for_each_chunk(s.B * s.Co, 1, [&](int64_t plane, int64_t) {
    const int64_t b = plane / s.Co, co = plane % s.Co;
    Acc acc{};
    for (int64_t oh = 0; oh < s.Ho; ++oh)
      for (int64_t ow = 0; ow < s.Wo; ++ow) {
        for (int64_t kh = 0; kh < s.Kh; ++kh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dilation_h;
          if (ih < 0 || ih >= s.H) continue;
          for (int64_t kw = 0; kw < s.Kw; ++kw) {
            const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dilation_w;
            if (iw < 0 || iw >= s.W) continue;
            for (int64_t ci = 0; ci < s.Ci; ++ci)
              body(acc, x_index(s, b, ci, ih, iw), co, k_index(w, ci, kh, kw));
          }
        }
        finish(acc, y_index(s, b, co, oh, ow), co);
        acc = Acc{};
      }
  });
}

double bias_value(const Epilogue& ep, int64_t n) {
  if (ep.bias.empty()) return 0.0;
  TensorView b2 = TensorView::strided(ep.bias.data, ep.bias.dtype, {1, ep.bias.shape[0]},
                                      {0, ep.bias.stride[0]});
  return load_as_double(b2, 0, n);
}

double clamp(const Epilogue& ep, double v) {
  if (v < ep.clamp_lo) v = ep.clamp_lo;
  if (v > ep.clamp_hi) v = ep.clamp_hi;
  return v;
}

// Flat 1 x numel views so the element helpers can address any index.
TensorView flat(const TensorView& t) {
  return TensorView::strided(t.data, t.dtype, {1, t.numel()}, {0, 1}, t.device);
}

}  // namespace

void conv2d_weight_only(const TensorView& x, const ConvWeight& w, const TensorView& y,
                        const Conv2dParams& p, const Epilogue& ep) {
  const ConvShape s = conv_shape(x, w, y, p);
  const std::vector<float> wd = dequantize_to_f32(w.weight);
  const TensorView xf = flat(x), yf = flat(y);
  // x widened once: each input element is read Kh * Kw * Co times, and the per-element dtype
  // switch of load_as_double made the 224x224 stem's reference take seconds
  std::vector<double> xd(size_t(xf.numel()));
  for (int64_t i = 0; i < xf.numel(); ++i) xd[size_t(i)] = load_as_double(xf, 0, i);
  const int64_t K = w.weight.K;
  for_each_output<double>(
      s, w, p,
      [&](double& acc, int64_t xi, int64_t co, int64_t k) {
        acc += xd[size_t(xi)] * double(wd[co * K + k]);
      },
      [&](double& acc, int64_t yi, int64_t co) {
        store_from_double(yf, 0, yi, clamp(ep, acc + bias_value(ep, co)));
      });
}

void conv2d_int8_requant(const TensorView& x, const ConvWeight& w, Int8TensorQuant in,
                         Int8TensorQuant out, const TensorView& y, const Conv2dParams& p,
                         const Epilogue& ep) {
  const ConvShape s = conv_shape(x, w, y, p);
  const QuantizedWeight& q = w.weight;
  MIXQ_CHECK_ARG(x.dtype == DType::I8 && q.code_type == DType::I8 && q.has_scales &&
                     q.block_k == q.K && q.block_n == 1 && q.zero_kind == ZeroKind::None,
                 "ref::conv2d_int8_requant: needs i8 input and i8 symmetric per-channel weights, "
                 "got ", x.describe(), " and ", q.describe());
  const int8_t* xp = x.ptr<const int8_t>();
  const TensorView yf = flat(y);
  // Padding positions hold the real value 0, i.e. the code Z_I: they contribute (Z_I - Z_I) = 0,
  // which is why skipping them below is exact.
  for_each_output<int64_t>(
      s, w, p,
      [&](int64_t& acc, int64_t xi, int64_t co, int64_t k) {
        acc += (int64_t(xp[xi]) - in.zero) * int64_t(q.code_int(co, k));
      },
      [&](int64_t& acc, int64_t yi, int64_t co) {
        const double real = clamp(ep, double(in.scale) * double(q.scale(co, 0)) * double(acc) +
                                          bias_value(ep, co));
        if (y.dtype == DType::I8) {
          double v = std::nearbyint(real / double(out.scale)) + out.zero;
          y.ptr<int8_t>()[yi] = static_cast<int8_t>(std::min(127.0, std::max(-128.0, v)));
        } else {
          store_from_double(yf, 0, yi, real);
        }
      });
}

}  // namespace mixq::ref
