// The avx2 native kernel set: native_kernels_avx2_body.hpp with vpmaddubsw + vpmaddwd (any AVX2
// CPU; compiled with -mavx2 -mfma -mf16c by the file name).
#include "cpu/ggml/native_kernels_avx2_body.hpp"
#include "cpu/ggml/native_prefill_avx2_body.hpp"

namespace mixq::cpu::ggml {

namespace {
const NativeKernels kAvx2 = {"avx2",
                             i8_tile_avx2_t<false>,
                             decode_i8_avx2_t<false>,
                             i8_tile_decoded_avx2_t<false>,
                             decode_f32_t_avx2_t<false>,
                             quantize_row_avx2};
}  // namespace

const NativeKernels* native_avx2_kernels() { return &kAvx2; }

}  // namespace mixq::cpu::ggml
