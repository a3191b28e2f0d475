// The avx2vnni native kernel set: native_kernels_avx2_body.hpp with AVX-VNNI's vpdpbusd on ymm
// (compiled with -mavxvnni on top of the AVX2 flags by the file name; selected only where cpuid
// reports AVX-VNNI, cpu_isa.cpp). The decode into f32 and the activation quantizer are the avx2
// set's code, compiled again here.
#include "cpu/ggml/native_kernels_avx2_body.hpp"
#include "cpu/ggml/native_prefill_avx2_body.hpp"

namespace mixq::cpu::ggml {

namespace {
const NativeKernels kAvx2Vnni = {"avx2vnni",
                                 i8_tile_avx2_t<true>,
                                 decode_i8_avx2_t<true>,
                                 i8_tile_decoded_avx2_t<true>,
                                 decode_f32_t_avx2_t<true>,
                                 quantize_row_avx2};
}  // namespace

const NativeKernels* native_avx2vnni_kernels() { return &kAvx2Vnni; }

}  // namespace mixq::cpu::ggml
