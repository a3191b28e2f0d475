// Portable native kernels (any CPU) and the run-time choice of a kernel table.
#include <algorithm>

#include "cpu/ggml/panel_decode.hpp"
#include "cpu/kernels.hpp"

namespace mixq::cpu::ggml {

namespace {

void dot_i8_scalar(const I8DotArgs& a) {
  const int64_t nl = a.kc / 4, q4 = a.ldq / 4;
  for (int r = 0; r < a.wrows; ++r) {
    const uint8_t* u = a.u + r * a.ldu;
    const float* s16 = a.s16 + r * (a.ldu / 16);
    const float* o = a.o16 + r * (a.ldu / 16);
    for (int m = 0; m < a.mrows; ++m) {
      const int8_t* q = a.q + m * a.ldq;
      const float* dx = a.dxl + m * q4;
      const int32_t* bi = a.binit + m * q4;
      float acc = 0.f;
      for (int64_t l = 0; l < nl; ++l) {
        int32_t d = bi[l];
        for (int i = 0; i < 4; ++i) d += int32_t(u[4 * l + i]) * int32_t(q[4 * l + i]);
        acc += static_cast<float>(d) * dx[l] * s16[l / 4];
      }
      if (a.has_min) {
        const float* xs = a.xs16 + m * (a.ldq / 16 + 16);
        for (int64_t j = 0; j < a.kc / 16; ++j) acc += o[j] * xs[j];
      }
      a.c[m * a.ldc + r] += acc;
    }
  }
}

void dot_f32_scalar(const F32DotArgs& a) {
  for (int r = 0; r < a.wrows; ++r)
    for (int m = 0; m < a.mrows; ++m) {
      const float* w = a.w + r * a.ldw;
      const float* x = a.x + m * a.ldx;
      float acc = 0.f;
      for (int64_t k = 0; k < a.kc; ++k) acc += w[k] * x[k];
      a.c[m * a.ldc + r] += acc;
    }
}

const NativeKernels kScalar = {"scalar", decode_i8_any, decode_f32_any, decode_f32_t_any,
                               dot_i8_scalar, dot_f32_scalar};

}  // namespace

const NativeKernels& native_scalar_kernels() { return kScalar; }

const NativeKernels& select_native_kernels(const std::string& isa) {
  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                        __builtin_cpu_supports("f16c");
  const bool has_avx512 = has_avx2 && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  const NativeKernels* a2 = has_avx2 ? native_avx2_kernels() : nullptr;
  const NativeKernels* a5 = has_avx512 ? native_avx512_kernels() : nullptr;
  // Empty: follow the canonical backend's pick (it reads MIXQ_CPU_ISA once per process).
  const std::string want = isa.empty() ? std::string(select_kernels().isa) : isa;
  if (want == "scalar") return kScalar;
  if (want == "avx2" && a2) return *a2;
  if (a5) return *a5;
  if (a2) return *a2;
  return kScalar;
}

}  // namespace mixq::cpu::ggml
