// The geometry of a 2-D convolution run as an implicit GEMM over an NHWC image through a TMA
// im2col map (plain C++: shared by the conv backend, the launcher and the Hopper weight-only
// kernel's producer, which reads it from its parameters).
#pragma once

namespace mixq::cuda {

struct Im2colConv {
  int B, H, W, Ci;  // the input image: B images of H x W pixels, Ci channels (innermost)
  int Ho, Wo;       // the output size; GEMM row m = (image, ho, wo) in that order
  int Kh, Kw;       // the filter; GEMM column k = (r Kw + s) Ck + ci (the KhKwCi order)
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  // Columns per tap along the GEMM's K: Ci, or (the weight-only kernel) Ci rounded up to its
  // 64-wide chunk where the weight's taps were padded to it: the map then reads the channels
  // past Ci as zeros, so a chunk still never straddles two taps. 0 means Ci.
  int Ck = 0;
};

}  // namespace mixq::cuda
