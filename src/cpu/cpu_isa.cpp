// CPU feature detection and the choice of a kernel set (kernels.hpp).
//
// cpuid says what the core implements; xgetbv says whether the OS saves the ymm (and zmm / mask)
// registers across context switches; both must hold before a wider kernel may run. Read from
// cpuid directly rather than through __builtin_cpu_supports, whose feature names differ between
// compilers (clang 14 knows neither "f16c" nor "avxvnni").
#include <cstdlib>
#include <string>

#include "cpu/kernels.hpp"
#include "mixq/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace mixq::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d))  // vendor string in ebx, edx, ecx
    f.intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;        // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xE6) == 0xE6;      // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state) return f;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned b7 = b, c7 = c;
  f.avx2 = b7 & (1u << 5);
  f.fma = fma;
  f.f16c = f16c;
  if (zmm_state) {
    f.avx512f = b7 & (1u << 16);
    f.avx512dq = b7 & (1u << 17);
    f.avx512bw = b7 & (1u << 30);
    f.avx512vl = b7 & (1u << 31);
    f.avx512_vnni = c7 & (1u << 11);
  }
  __cpuid_count(7, 1, a, b, c, d);
  f.avx_vnni = a & (1u << 4);
  return f;
}
#else
CpuFeatures detect() { return CpuFeatures{}; }
#endif

// The features each kernel set needs, as (name, present) pairs.
struct Need {
  const char* name;
  bool CpuFeatures::*have;
};
const Need kAvx2Needs[] = {{"avx2", &CpuFeatures::avx2}, {"fma", &CpuFeatures::fma},
                           {"f16c", &CpuFeatures::f16c}};

const KernelTable* table_of(const std::string& isa) {
  if (isa == "avx512") return avx512_kernels();
  if (isa == "avx2vnni") return avx2vnni_kernels();
  if (isa == "avx2") return avx2_kernels();
  if (isa == "scalar") return &scalar_kernels();
  return nullptr;
}

}  // namespace

std::string missing_features(const std::string& isa, const CpuFeatures& f) {
  std::string miss;
  auto need = [&](const char* n, bool CpuFeatures::*h) {
    if (!(f.*h)) miss += (miss.empty() ? "" : " ") + std::string(n);
  };
  if (isa == "avx2" || isa == "avx2vnni" || isa == "avx512")
    for (const Need& n : kAvx2Needs) need(n.name, n.have);
  if (isa == "avx2vnni") need("avx_vnni", &CpuFeatures::avx_vnni);
  if (isa == "avx512") {
    need("avx512f", &CpuFeatures::avx512f);
    need("avx512bw", &CpuFeatures::avx512bw);
    need("avx512vl", &CpuFeatures::avx512vl);
    need("avx512dq", &CpuFeatures::avx512dq);
    need("avx512_vnni", &CpuFeatures::avx512_vnni);
  }
  return miss;
}

std::string CpuFeatures::list() const {
  std::string s;
  auto add = [&](bool v, const char* n) {
    if (v) s += (s.empty() ? "" : " ") + std::string(n);
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx_vnni, "avx_vnni");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_vnni, "avx512_vnni");
  return s.empty() ? "none" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool cpu_runs(const std::string& isa, std::string* missing) {
  const std::string m = table_of(isa) ? missing_features(isa, cpu_features()) : "unknown kernel set";
  if (missing) *missing = m;
  return m.empty();
}

const KernelTable& best_kernels() {
  for (const char* isa : {"avx512", "avx2vnni", "avx2"})
    if (cpu_runs(isa)) return *table_of(isa);
  return scalar_kernels();
}

const KernelTable& select_kernels(const std::string& isa) {
  static const std::string env = [] {  // read once per process
    const char* e = std::getenv("MIXQ_CPU_ISA");
    return e ? std::string(e) : std::string();
  }();
  const bool from_env = isa.empty();
  const std::string& want = from_env ? env : isa;
  const char* option = from_env ? "MIXQ_CPU_ISA" : "PrepareOptions::cpu_isa";
  if (want.empty() || want == "auto") return best_kernels();
  const KernelTable* t = table_of(want);
  MIXQ_CHECK_ARG(t != nullptr, option, " '", want,
                 "' is not a CPU kernel set (auto, avx512, avx2vnni, avx2, scalar)");
  std::string missing;
  MIXQ_CHECK(cpu_runs(want, &missing), ErrorCode::Unsupported, option, " '", want,
             "': this CPU lacks ", missing, " (it has: ", cpu_features().list(), ")");
  return *t;
}

}  // namespace mixq::cpu
