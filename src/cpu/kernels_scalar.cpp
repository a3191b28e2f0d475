// Portable kernels: the semantics of kernels.hpp written plainly. Used on CPUs without AVX2 and
// as the executable specification the SIMD kernels are tested against.
#include <cmath>
#include <cstring>

#include "cpu/kernels.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cpu {

namespace {

void float_tile_scalar(const FloatTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs();
  for (int m = 0; m < a.rows; ++m) {
    float* c = a.c + m * a.ldc;
    for (int r = 0; r < kLanes; ++r) {
      float tot = a.accumulate ? c[r] : 0.f;
      for (int64_t s = a.seg0; s < a.seg1; ++s) {
        const Segment& sg = w.segs[s];
        float acc = 0.f;
        for (int32_t i = 0; i < sg.len; ++i)
          acc += a.x[m * a.ldx + sg.kp0 + i] * w.code_value(a.panel, r, sg.kp0 + i);
        const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes + r);
        tot += acc * w.scale[si];
        if (w.has_offset) tot += w.offset[si] * a.xsum[m * a.ldxs + s];
      }
      c[r] = tot;
    }
  }
}

void decode_panel_scalar(const PackedWeight& w, int64_t panel, int64_t seg0, int64_t seg1,
                         float* out) {
  const int64_t ns = w.n_segs(), base = w.segs[seg0].kp0;
  for (int64_t s = seg0; s < seg1; ++s) {
    const Segment& sg = w.segs[s];
    const size_t si = static_cast<size_t>((panel * ns + s) * kLanes);
    for (int32_t i = 0; i < sg.len; ++i)
      for (int r = 0; r < kLanes; ++r) {
        const float o = w.has_offset ? w.offset[si + r] : 0.f;
        out[(sg.kp0 + i - base) * kLanes + r] =
            w.code_value(panel, r, sg.kp0 + i) * w.scale[si + r] + o;
      }
  }
}

void gemm_tile_scalar(const GemmTileArgs& a) {
  const int np = a.w1 ? 2 : 1;
  for (int m = 0; m < a.rows; ++m)
    for (int p = 0; p < np; ++p) {
      const float* w = p ? a.w1 : a.w0;
      for (int r = 0; r < kLanes; ++r) {
        float acc = 0.f;
        for (int64_t k = 0; k < a.kc; ++k) acc += a.a[k * a.rows + m] * w[k * kLanes + r];
        float& c = a.c[m * a.ldc + p * kLanes + r];
        c = a.accumulate ? c + acc : acc;
      }
    }
}

void quantize_i8_scalar(const float* x, int64_t n, float of, float sc, int8_t* q) {
  const float inv = 1.0f / sc;
  for (int64_t i = 0; i < n; ++i) q[i] = int8_act_code(x[i], of, inv);
}

void int_tile_scalar(const IntTileArgs& a) {
  const PackedWeight& w = *a.w;
  const int64_t ns = w.n_segs();
  const bool biased_x = w.kind == CodeKind::Int8;  // x bytes hold qx + 128
  for (int m = 0; m < a.rows; ++m) {
    for (int r = 0; r < kLanes; ++r) {
      float ftot = 0.f;
      int32_t itot = 0;
      if (a.accumulate) {
        if (a.int_mode) itot = static_cast<int32_t*>(a.c)[m * a.ldc + r];
        else ftot = static_cast<float*>(a.c)[m * a.ldc + r];
      }
      for (int64_t s = a.seg0; s < a.seg1; ++s) {
        const Segment& sg = w.segs[s];
        int32_t d = 0;
        for (int32_t i = 0; i < sg.len; ++i) {
          const uint8_t xb = a.x[m * a.ldx + sg.kp0 + i];
          const int32_t qx = biased_x ? int32_t(xb) - 128 : int32_t(int8_t(xb));
          d += qx * w.code_int(a.panel, r, sg.kp0 + i);
        }
        if (a.int_mode) {
          itot += d;
          continue;
        }
        const size_t si = static_cast<size_t>((a.panel * ns + s) * kLanes + r);
        const ActSegment& as = a.xs[m * a.ldxs + s];
        const float sw = w.scale[si], ow = w.has_offset ? w.offset[si] : 0.f;
        ftot += float(d) * sw * as.sx;
        ftot += sw * float(w.qsum[si]) * as.ox;
        ftot += ow * as.ow_coef;
      }
      if (a.int_mode) static_cast<int32_t*>(a.c)[m * a.ldc + r] = itot;
      else static_cast<float*>(a.c)[m * a.ldc + r] = ftot;
    }
  }
}

}  // namespace

const KernelTable& scalar_kernels() {
  static const KernelTable t{"scalar", float_tile_scalar, int_tile_scalar, decode_panel_scalar, gemm_tile_scalar, quantize_i8_scalar};
  return t;
}

}  // namespace mixq::cpu
