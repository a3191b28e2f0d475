// The AVX2 integer tile on AVX-VNNI (vpdpbusd on ymm: Alder Lake, Sapphire Rapids, Zen 5 and
// later), compiled with -mavxvnni on top of the AVX2 flags and called only where cpuid reports
// AVX-VNNI (cpu_isa.cpp). One instruction does the u8 x s8 products and the 32-bit sum with no
// 16-bit stage, so 8-bit codes need no nibble split (kernels_avx2_int.hpp). The float kernels
// of the avx2vnni table are the plain AVX2 ones (kernels_avx2.cpp).
#include <immintrin.h>

#include "cpu/kernels.hpp"
#include "cpu/kernels_avx2_int.hpp"

namespace mixq::cpu {

namespace {
struct DotVnni {
  static constexpr bool kWide8 = true;
  static __m256i dot(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};
}  // namespace

void int_tile_avx2vnni(const IntTileArgs& a) { int_tile_avx2_t<DotVnni>(a); }

}  // namespace mixq::cpu
