// The geometry of one CUDA conv2d call, shared by the weight-only and INT8 implicit GEMMs: the
// input and output sizes from the call's layout, checked against the kernels' 32-bit index
// arithmetic (pixel indices, tap offsets), and copied into either kernel's parameter block.
#pragma once

#include <cstdint>

#include "mixq/error.hpp"
#include "core/prepared.hpp"
#include "mixq/ops.hpp"

namespace mixq::cuda {

struct ConvCallGeometry {
  bool nchw = true;
  int64_t B = 0, H = 0, W = 0, Ho = 0, Wo = 0;
};

inline ConvCallGeometry conv_call_geometry(const TensorView& x, const ConvGeometry& conv,
                                           const Conv2dParams& p) {
  ConvCallGeometry g;
  g.nchw = p.layout == Layout::NCHW;
  g.B = x.shape[0];
  g.H = g.nchw ? x.shape[2] : x.shape[1];
  g.W = g.nchw ? x.shape[3] : x.shape[2];
  conv2d_output_size(g.H, g.W, conv.Kh, conv.Kw, p, &g.Ho, &g.Wo);
  const int64_t B = g.B, H = g.H, W = g.W;
  MIXQ_CHECK_ARG(B * g.Ho * g.Wo < (int64_t(1) << 31) && B * H * W * conv.Ci < (int64_t(1) << 40),
                 "conv2d (cuda): B*Ho*Wo (", B * g.Ho * g.Wo, ") must be < 2^31");
  MIXQ_CHECK_ARG(B < (int64_t(1) << 31) && H < (int64_t(1) << 24) && W < (int64_t(1) << 24) &&
                     g.Ho < (int64_t(1) << 24) && g.Wo < (int64_t(1) << 24) &&
                     p.stride_h < (1 << 20) && p.stride_w < (1 << 20) && p.pad_h < (1 << 20) &&
                     p.pad_w < (1 << 20) && p.dilation_h < (1 << 20) && p.dilation_w < (1 << 20),
                 "conv2d (cuda): sizes (B ", B, ", H ", H, ", W ", W, ") and stride / padding / "
                 "dilation must fit the kernel's 32-bit index arithmetic");
  return g;
}

// Fills the sizes, filter and stride / padding / dilation fields every conv kernel's parameter
// block has under the same names (the sm_80 kernels' and the Hopper im2col path's Im2colConv).
template <class KernelParams>
void set_conv_shape(KernelParams& k, const ConvCallGeometry& g, const ConvGeometry& conv, const Conv2dParams& p) {
  k.B = int(g.B);
  k.Ci = int(conv.Ci);
  k.H = int(g.H);
  k.W = int(g.W);
  k.Ho = int(g.Ho);
  k.Wo = int(g.Wo);
  k.Kh = int(conv.Kh);
  k.Kw = int(conv.Kw);
  k.stride_h = int(p.stride_h);
  k.stride_w = int(p.stride_w);
  k.pad_h = int(p.pad_h);
  k.pad_w = int(p.pad_w);
  k.dil_h = int(p.dilation_h);
  k.dil_w = int(p.dilation_w);
}

// ... and the sm_80 kernels' layout and output channels.
template <class KernelParams>
void set_conv_geometry(KernelParams& k, const ConvCallGeometry& g, const ConvGeometry& conv,
                       int64_t Co, const Conv2dParams& p) {
  set_conv_shape(k, g, conv, p);
  k.nchw = g.nchw;
  k.Co = int(Co);
}

}  // namespace mixq::cuda
