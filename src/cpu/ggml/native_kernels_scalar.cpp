// Scalar native kernels (CPUs without AVX2, and the plain statement of what the SIMD sets do):
// element by element through record_scalar.hpp.
#include "cpu/ggml/native_kernels.hpp"
#include "cpu/ggml/record_scalar.hpp"
#include "cpu/kernels.hpp"

namespace mixq::cpu::ggml {

namespace {

void i8_tile_scalar(const I8TileArgs& a) {
  const NativeWeight& w = *a.w;
  const Format& f = w.fmt;
  const int ns = f.n_sub();
  for (int m = 0; m < a.rows; ++m) {
    float* c = a.c + m * a.ldc;
    const int8_t* q = a.q + m * a.ldq;
    for (int r = 0; r < kPanelRows; ++r) {
      float acc = a.accumulate ? c[r] : 0.f;
      for (int64_t kb = a.kb0; kb < a.kb1; ++kb) {
        const uint8_t* rec = w.panel(a.panel) + kb * w.record_bytes;
        const float d = f16_at(rec + f.off_d() + 2 * r);
        const float dm = f.has_dm() ? f16_at(rec + f.off_dm() + 2 * r) : 0.f;
        float sb = 0.f, mnacc = 0.f;
        for (int jj = 0; jj < ns; ++jj) {
          const int64_t j = kb * ns + jj;
          int32_t isum = a.corr[m * a.ldj + j];
          for (int e = jj * f.sub; e < (jj + 1) * f.sub; ++e)
            isum += record_code(f, rec, r, e) * q[kb * f.qk + e];
          int sc, mn;
          record_int_scale(f, rec, r, jj, &sc, &mn);
          sb += static_cast<float>(isum) * (static_cast<float>(sc) * a.dxs[m * a.ldj + j]);
          if (f.sk == ScaleKind::Affine) mnacc += a.xs[m * a.ldj + j];
          else mnacc += static_cast<float>(mn) * a.xs[m * a.ldj + j];
        }
        acc += sb * d;
        if (f.sk == ScaleKind::Affine) acc += dm * mnacc;
        else if (f.has_min()) acc -= dm * mnacc;
      }
      c[r] = acc;
    }
  }
}

void decode_f32_t_scalar(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
  const Format& f = w.fmt;
  for (int64_t kb = kb0; kb < kb0 + nb; ++kb) {
    const uint8_t* rec = w.panel(p) + kb * w.record_bytes;
    float* o = out + (kb - kb0) * f.qk * kPanelRows;
    for (int r = 0; r < kPanelRows; ++r)
      for (int jj = 0; jj < f.n_sub(); ++jj) {
        float s, off;
        record_exact_scale(f, rec, r, jj, &s, &off);
        for (int e = jj * f.sub; e < (jj + 1) * f.sub; ++e) {
          const float v = s * static_cast<float>(record_code(f, rec, r, e) - f.bias);
          o[e * kPanelRows + r] = f.has_min() ? v + off : v;
        }
      }
  }
}

const NativeKernels kScalar = {"scalar", i8_tile_scalar, nullptr, nullptr, decode_f32_t_scalar,
                                quantize_row_ref};

}  // namespace

const NativeKernels& native_scalar_kernels() { return kScalar; }

const NativeKernels& select_native_kernels(const std::string& isa) {
  // The canonical backend's choice (or the named set) decides; its checks (unknown name, a set
  // this CPU lacks) throw there with the option's name.
  const std::string want = select_kernels(isa).isa;
  if (want == "avx512") return *native_avx512_kernels();
  if (want == "avx2vnni") return *native_avx2vnni_kernels();
  if (want == "avx2") return *native_avx2_kernels();
  return kScalar;
}

}  // namespace mixq::cpu::ggml
