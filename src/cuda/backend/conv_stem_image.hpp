// The stem kernel's weight images (kernels/conv/conv_stem.hpp), built at prepare by the weight-only
// conv (the dequantized values) and the INT8 conv (the codes): [sigma 0 | 1][f16 | bf16][Co
// rounded up to kStemBN][pitch], column k = kh * lp + sigma + kw * Ci + ci in the K order shifted
// by sigma, zeros in the padding columns and channels. The shifted order (the TMA form's odd
// starts) only where its padded K is within kStemMaxK.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/kernels/conv/conv_stem.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cuda {

struct StemImageShape {
  int pitch = 0;    // elements a row: the largest padded K of the orders built
  int64_t cop = 0;  // rows: Co rounded up to kStemBN
  size_t one() const { return size_t(cop) * size_t(pitch); }  // elements of one image
  // the image a call reads (K order sigma, bf16 or f16 operands) inside the buffer at `base`
  const uint16_t* at(const void* base, int sigma, bool bf16) const {
    return static_cast<const uint16_t*>(base) + size_t(2 * sigma + (bf16 ? 1 : 0)) * one();
  }
};

// value(n, kh, j): the weight of output channel n at filter row kh, column j = kw * Ci + ci, as a
// float (rounded to nearest even once into each operand type).
template <class Value>
std::vector<uint16_t> build_stem_image(int64_t Co, int Ci, int Kh, int Kw, Value&& value,
                                       StemImageShape* shape) {
  const int sigmas = conv_stem_kpad(Ci, Kh, Kw, 1) <= kStemMaxK ? 2 : 1;
  shape->pitch = std::max(conv_stem_kpad(Ci, Kh, Kw, 0), conv_stem_kpad(Ci, Kh, Kw, sigmas - 1));
  shape->cop = (Co + kStemBN - 1) / kStemBN * kStemBN;
  const size_t one = shape->one();
  std::vector<uint16_t> img(size_t(2 * sigmas) * one, 0);
  const int kwc = Kw * Ci;
  for (int sigma = 0; sigma < sigmas; ++sigma) {
    const int lp = conv_stem_lp(Ci, Kw, sigma);
    uint16_t* f16 = img.data() + size_t(2 * sigma) * one;
    uint16_t* bf16 = f16 + one;
    for (int64_t n = 0; n < Co; ++n)
      for (int kh = 0; kh < Kh; ++kh)
        for (int j = 0; j < kwc; ++j) {
          const float w = value(n, kh, j);
          const size_t at = size_t(n * shape->pitch + kh * lp + sigma + j);
          f16[at] = f32_to_f16(w);
          bf16[at] = f32_to_bf16(w);
        }
  }
  return img;
}

}  // namespace mixq::cuda
