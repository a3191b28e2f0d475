// Panel-chunk decoders shared by every ISA's kernel file (compiled with that file's flags;
// internal linkage for the reason given in block_decode.hpp). The loops read the panel's
// blocks in storage order (block column outer, row inner), i.e. one sequential stream.
#pragma once

#include <cstring>

#include "cpu/ggml/block_decode.hpp"
#include "cpu/ggml/native_kernels.hpp"

namespace mixq::cpu::ggml {
namespace {

template <GgmlType T>
void decode_i8_t(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, uint8_t* u,
                 float* s16, float* o16, int64_t ldu) {
  using Tr = GgmlTraits<T>;
  constexpr int qk = Tr::qk;
  const int rows = w.rows_in_panel(p);
  const uint8_t* base = w.panel(p) + kb0 * rows * Tr::block_bytes;
  const int64_t l16 = ldu / 16;
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int r = 0; r < rows; ++r)
      decode_block<T>(base + (kb * rows + r) * Tr::block_bytes, u + r * ldu + kb * qk,
                      s16 + r * l16 + kb * (qk / 16), o16 + r * l16 + kb * (qk / 16));
  const int64_t kc = nb * qk;
  if (kc < ldu)  // the chunk's tail up to the kPad boundary contributes nothing
    for (int r = 0; r < rows; ++r) {
      std::memset(u + r * ldu + kc, 0, static_cast<size_t>(ldu - kc));
      std::memset(s16 + r * l16 + kc / 16, 0, static_cast<size_t>((ldu - kc) / 16) * 4);
      std::memset(o16 + r * l16 + kc / 16, 0, static_cast<size_t>((ldu - kc) / 16) * 4);
    }
}

// w = s * float(u - bias) + o, multiply then add (never contracted: the kernel files are built
// with -ffp-contract=off), which is ggml's f32 decode bit for bit.
template <GgmlType T>
inline void dequant_block(const uint8_t* blk, float* out) {
  using Tr = GgmlTraits<T>;
  uint8_t u[Tr::qk];
  float s16[Tr::qk / 16], o16[Tr::qk / 16];
  decode_block<T>(blk, u, s16, o16);
  for (int j = 0; j < Tr::qk / 16; ++j)
    for (int i = 0; i < 16; ++i) {
      const float v = s16[j] * static_cast<float>(int(u[16 * j + i]) - Tr::bias);
      out[16 * j + i] = Tr::has_min ? v + o16[j] : v;
    }
}

template <GgmlType T>
void decode_f32_t_rows(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out,
                       int64_t ldw) {
  using Tr = GgmlTraits<T>;
  const int rows = w.rows_in_panel(p);
  const uint8_t* base = w.panel(p) + kb0 * rows * Tr::block_bytes;
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int r = 0; r < rows; ++r)
      dequant_block<T>(base + (kb * rows + r) * Tr::block_bytes, out + r * ldw + kb * Tr::qk);
  const int64_t kc = nb * Tr::qk;
  for (int r = 0; r < rows; ++r)
    std::memset(out + r * ldw + kc, 0, static_cast<size_t>(ldw - kc) * 4);
}

template <GgmlType T>
void decode_f32_transposed(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
  using Tr = GgmlTraits<T>;
  const int rows = w.rows_in_panel(p);
  const uint8_t* base = w.panel(p) + kb0 * rows * Tr::block_bytes;
  float tmp[Tr::qk];
  for (int64_t kb = 0; kb < nb; ++kb) {
    float* o = out + kb * Tr::qk * 16;
    for (int r = 0; r < rows; ++r) {
      dequant_block<T>(base + (kb * rows + r) * Tr::block_bytes, tmp);
      for (int k = 0; k < Tr::qk; ++k) o[k * 16 + r] = tmp[k];
    }
    for (int r = rows; r < 16; ++r)
      for (int k = 0; k < Tr::qk; ++k) o[k * 16 + r] = 0.f;
  }
}

struct DecodeI8Fn {
  const NativeWeight& w; int64_t p, kb0, nb; uint8_t* u; float* s16; float* o16; int64_t ldu;
  template <GgmlType T> void operator()() const { decode_i8_t<T>(w, p, kb0, nb, u, s16, o16, ldu); }
};
struct DecodeF32Fn {
  const NativeWeight& w; int64_t p, kb0, nb; float* out; int64_t ldw;
  template <GgmlType T> void operator()() const { decode_f32_t_rows<T>(w, p, kb0, nb, out, ldw); }
};
struct DecodeF32TFn {
  const NativeWeight& w; int64_t p, kb0, nb; float* out;
  template <GgmlType T> void operator()() const { decode_f32_transposed<T>(w, p, kb0, nb, out); }
};

void decode_i8_any(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, uint8_t* u,
                   float* s16, float* o16, int64_t ldu) {
  dispatch_type(w.type, DecodeI8Fn{w, p, kb0, nb, u, s16, o16, ldu});
}
void decode_f32_any(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out,
                    int64_t ldw) {
  dispatch_type(w.type, DecodeF32Fn{w, p, kb0, nb, out, ldw});
}
void decode_f32_t_any(const NativeWeight& w, int64_t p, int64_t kb0, int64_t nb, float* out) {
  dispatch_type(w.type, DecodeF32TFn{w, p, kb0, nb, out});
}

}  // namespace
}  // namespace mixq::cpu::ggml
