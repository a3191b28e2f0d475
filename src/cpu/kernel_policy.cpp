// Kernel choice and work split for the CPU backend (see kernel_policy.hpp).
#include "cpu/kernel_policy.hpp"

#include <algorithm>

#include "mixq/error.hpp"

namespace mixq::cpu {

namespace {
// Accepts "cpu_f32", "cpu_avx512_f32gemm", "f32gemv", ...: the ISA part is informative only.
std::string strip_kernel_name(std::string s) {
  if (s.rfind("cpu_", 0) == 0) s = s.substr(4);
  for (const char* isa : {"avx512_", "avx2vnni_", "avx2_", "scalar_"})
    if (s.rfind(isa, 0) == 0) s = s.substr(std::char_traits<char>::length(isa));
  return s;
}
}  // namespace

int64_t auto_int8_max_rows(const std::string& isa, bool four_bit_codes) {
  // Measured on a 2-core Sapphire Rapids Xeon, K = 4096, N = 4096 and 14336, w4g128 / w8g128
  // (docs/decisions/cpu-isa-dispatch.md, bench/results/cpu_isa.md):
  // - avx512, avx2vnni: i8dot 1.5-2.9x (avx512) and 2.8-3.7x (avx2vnni) faster than the f32 path
  //   at every M from 1 to 512, both code widths: one 32-bit dot instruction does 4 MACs per
  //   lane against one FMA's 1, which outweighs the per-segment epilogue at any M.
  // - avx2 (vpmaddubsw): 4-bit codes 1.6-2.3x faster at every M; 8-bit codes need the nibble
  //   split (two vpmaddubsw + two vpmaddwd per 4 k), faster only while the GEMV is
  //   memory-bound (M <= 4; 0.5x at M = 8, 0.73-0.84x from M = 16 on).
  // - scalar: i8dot faster up to M = 8 (the GEMV), the f32 GEMM tile 4-6x faster above.
  if (isa == "avx512" || isa == "avx2vnni") return kAnyRows;
  if (isa == "avx2") return four_bit_codes ? kAnyRows : 4;
  return kGemvMaxRows;
}

CpuPath choose_path(ActQuant act, const std::string& force_kernel, bool integer_codes,
                    int64_t M, Tuning::CpuActivations mode, int64_t int8_max_rows) {
  const std::string f = strip_kernel_name(force_kernel);
  switch (act) {
    case ActQuant::Int8Block: return CpuPath::W8A8;
    case ActQuant::Fp8Block: return CpuPath::Fp8;
    case ActQuant::Int8PerTensor: return CpuPath::I8PerTensor;
    case ActQuant::None: break;
  }
  if (f.empty()) {
    switch (mode) {
      case Tuning::CpuActivations::Exact: return CpuPath::F32;
      case Tuning::CpuActivations::Int8: return integer_codes ? CpuPath::I8Dot : CpuPath::F32;
      case Tuning::CpuActivations::Auto: break;
    }
    return integer_codes && M <= int8_max_rows ? CpuPath::I8Dot : CpuPath::F32;
  }
  if (f == "f32" || f == "f32gemv" || f == "f32gemm") return CpuPath::F32;
  if (f == "i8dot") {
    MIXQ_CHECK(integer_codes, ErrorCode::Unsupported,
               "force_kernel 'cpu_i8dot' needs integer weight codes (i4, u4, i8, u8)");
    return CpuPath::I8Dot;
  }
  MIXQ_FAIL(ErrorCode::InvalidArgument, "force_kernel '", force_kernel,
            "' is not a CPU weight-only kernel (cpu_f32, cpu_f32gemv, cpu_f32gemm, cpu_i8dot)");
}

std::string cpu_kernel_name(const char* isa, CpuPath path, int64_t M) {
  const char* kind = "f32gemm";
  switch (path) {
    case CpuPath::F32: kind = M <= kGemvMaxRows ? "f32gemv" : "f32gemm"; break;
    case CpuPath::I8Dot: kind = "i8dot"; break;
    case CpuPath::W8A8: kind = "w8a8"; break;
    case CpuPath::Fp8: kind = "fp8"; break;
    case CpuPath::I8PerTensor: kind = "i8tensor"; break;
  }
  return std::string("cpu_") + isa + "_" + kind;
}

WorkSplit plan_work(int64_t M, int64_t n_panels, int threads) {
  WorkSplit s{};
  const bool gemv = M <= kGemvMaxRows;
  s.rows_per_task = gemv ? std::max<int64_t>(M, 1) : kRowsPerTask;
  s.chunk_k = gemv ? 0 : kGemmChunkK;
  const int64_t m_tasks = (std::max<int64_t>(M, 1) + s.rows_per_task - 1) / s.rows_per_task;
  const int64_t want = 4 * static_cast<int64_t>(std::max(threads, 1));
  const int64_t groups = std::clamp<int64_t>((want + m_tasks - 1) / m_tasks, 1, n_panels);
  s.panels_per_task = (n_panels + groups - 1) / groups;
  return s;
}

}  // namespace mixq::cpu
