// The geometry of a 2-D convolution run as an implicit GEMM over an NHWC image through a TMA
// im2col map (plain C++: shared by the conv backend, the launcher and the Hopper weight-only
// kernel's producer, which reads it from its parameters).
#pragma once

#include <cstdint>

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

// Its columns a tap (Ck, or Ci where Ck is 0).
inline int im2col_tap_columns(const Im2colConv& g) {
  return g.Ck > 0 ? g.Ck : g.Ci;
}

// Whether a GEMM of K columns can read g tap by tap in chunks of `chunk` columns: the columns a
// tap a multiple of the chunk (a chunk never straddles two taps) and less than a chunk past Ci
// (the padding lies past Ci, where the map reads zeros), K = Kh Kw times them.
inline bool im2col_taps_fit(const Im2colConv& g, int chunk, int64_t K) {
  const int ck = im2col_tap_columns(g);
  return ck % chunk == 0 && ck >= g.Ci && ck - g.Ci < chunk && K == int64_t(g.Kh) * g.Kw * ck;
}

}  // namespace mixq::cuda
