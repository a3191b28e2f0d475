// Kernel choice and work split for the CPU backend (see kernel_policy.hpp).
#include "cpu/kernel_policy.hpp"

#include <algorithm>

#include "mixq/error.hpp"

namespace mixq::cpu {

namespace {
// Accepts "cpu_f32", "cpu_avx512_f32gemm", "f32gemv", ...: the ISA part is informative only.
std::string strip_kernel_name(std::string s) {
  if (s.rfind("cpu_", 0) == 0) s = s.substr(4);
  for (const char* isa : {"avx512_", "avx2_", "scalar_"})
    if (s.rfind(isa, 0) == 0) s = s.substr(std::char_traits<char>::length(isa));
  return s;
}
}  // namespace

CpuPath choose_path(ActQuant act, const std::string& force_kernel, bool integer_codes,
                    int64_t M) {
  const std::string f = strip_kernel_name(force_kernel);
  switch (act) {
    case ActQuant::Int8Block: return CpuPath::W8A8;
    case ActQuant::Fp8Block: return CpuPath::Fp8;
    case ActQuant::Int8PerTensor: return CpuPath::I8PerTensor;
    case ActQuant::None: break;
  }
  if (f.empty()) return integer_codes && M <= kGemvMaxRows ? CpuPath::I8Dot : CpuPath::F32;
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
