// Console table and JSON output of `mixq bench`.
#include "bench_report.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "mixq/error.hpp"

namespace mixq::bench {

bool BenchRow::ok() const {
  if (unsupported) return true;
  return rel_err <= tol && emu_err <= emu_tol;  // false for NaN
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += fmt("\\u%04x", static_cast<unsigned char>(c));
    else o += c;
  }
  return o + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt("%.6g", v);
}

}  // namespace

namespace {
// The kernel (an instantiation name of any length) is the last column.
constexpr int kSchemeWidth = 12, kCheckWidth = 4;
}

void print_table_header(FILE* out, const BenchReport& r) {
  std::fprintf(out, "mixq bench: backend %s on %s\n", r.backend.c_str(), r.device.c_str());
  std::fprintf(out, "baseline: %s; times are medians (us); GB/s counts weight + activation + "
               "output bytes; err = ||y - ref|| / ||ref|| vs float64 on the dequantized weights "
               "over up to 4 rows of M x 256 columns of N (emul: on the quantized activations "
               "too)%s\n\n", r.baseline.c_str(),
               r.settle_ms > 0 ? ("; each case timed after " + std::to_string(r.settle_ms) +
                                  " ms of its own untimed calls").c_str() : "");
  std::fprintf(out, "%-*s  %-11s  %5s  %10s  %8s  %8s  %9s  %9s  %8s  %8s  %-*s  %s\n", kSchemeWidth,
               "scheme", "KxN", "M", "time(us)", "GB/s", "TFLOP/s", "err", "err(emul)", "x dense",
               "x paired", kCheckWidth, "check", "kernel");
}

void print_table_rows(FILE* out, const std::vector<BenchRow>& rows) {
  int64_t last_k = -1, last_n = -1, last_m = -1;
  for (const BenchRow& b : rows) {
    if (b.K != last_k || b.N != last_n || b.M != last_m) std::fprintf(out, "\n");
    last_k = b.K, last_n = b.N, last_m = b.M;
    const std::string shape = std::to_string(b.K) + "x" + std::to_string(b.N);
    if (b.unsupported) {
      std::fprintf(out, "%-*s  %-11s  %5lld  unsupported: %s\n", kSchemeWidth, b.scheme.c_str(),
                   shape.c_str(), static_cast<long long>(b.M), b.note.c_str());
      continue;
    }
    std::string check = "ok";
    if (!(b.rel_err <= b.tol)) check = "FAIL (err > " + fmt("%.0e", b.tol) + ")";
    else if (!(b.emu_err <= b.emu_tol)) check = "FAIL (emul > " + fmt("%.0e", b.emu_tol) + ")";
    // x paired: against the baseline replayed alternately with this row (same clocks); x dense,
    // the figure the tables use, against the baseline timed on its own
    const std::string paired =
        b.paired_baseline_us > 0 && b.time_us > 0 ? fmt("%7.2fx", b.paired_baseline_us / b.time_us) : "       -";
    std::fprintf(out, "%-*s  %-11s  %5lld  %10.1f  %8.1f  %8.3f  %9.2e  %9.2e  %7.2fx  %8s  %-*s  %s\n",
                 kSchemeWidth, b.scheme.c_str(), shape.c_str(), static_cast<long long>(b.M), b.time_us,
                 b.gb_per_s, b.tflop_per_s, b.rel_err, b.emu_err, b.speedup, paired.c_str(), kCheckWidth,
                 check.c_str(), b.kernel.c_str());
  }
  std::fflush(out);
}

void print_table(FILE* out, const BenchReport& r) {
  print_table_header(out, r);
  print_table_rows(out, r.rows);
}

void write_json(const std::string& path, const BenchReport& r) {
  std::ostringstream o;
  o << "{\n  \"command\": " << json_string(r.command) << ",\n  \"backend\": "
    << json_string(r.backend) << ",\n  \"device\": " << json_string(r.device)
    << ",\n  \"baseline\": " << json_string(r.baseline) << ",\n  \"threads\": " << r.threads
    << ",\n  \"settle_ms\": " << r.settle_ms
    << ",\n  \"error_metric\": \"relative Frobenius error over the sampled outputs vs a float64 "
       "reference on the dequantized weights\",\n  \"results\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const BenchRow& b = r.rows[i];
    o << (i ? ",\n" : "\n") << "    {\"scheme\": " << json_string(b.scheme)
      << ", \"act\": " << json_string(b.act) << ", \"K\": " << b.K << ", \"N\": " << b.N
      << ", \"M\": " << b.M;
    if (b.unsupported) {
      o << ", \"unsupported\": true, \"note\": " << json_string(b.note) << "}";
      continue;
    }
    o << ", \"kernel\": " << json_string(b.kernel) << ", \"time_us\": " << json_number(b.time_us)
      << ", \"min_us\": " << json_number(b.min_us) << ", \"reps\": " << b.reps
      << ", \"weight_bytes\": " << b.weight_bytes << ", \"moved_bytes\": " << b.moved_bytes
      << ", \"gb_per_s\": " << json_number(b.gb_per_s)
      << ", \"tflop_per_s\": " << json_number(b.tflop_per_s)
      << ", \"rel_err\": " << json_number(b.rel_err) << ", \"tol\": " << json_number(b.tol)
      << ", \"emul_err\": " << json_number(b.emu_err)
      << ", \"emul_tol\": " << json_number(b.emu_tol)
      << ", \"speedup_vs_baseline\": " << json_number(b.speedup);
    if (b.solo_baseline_us > 0) o << ", \"baseline_us\": " << json_number(b.solo_baseline_us);
    if (b.paired_baseline_us > 0) o << ", \"paired_baseline_us\": " << json_number(b.paired_baseline_us);
    if (b.read_us > 0)
      o << ", \"plain_read_us\": " << json_number(b.read_us)
        << ", \"plain_read_fraction\": " << json_number(b.read_us / b.time_us);
    o << ", \"reference_sample\": " << json_string(b.sample)
      << ", \"ok\": " << (b.ok() ? "true" : "false") << "}";
  }
  o << "\n  ]\n}\n";
  std::ofstream f(path, std::ios::trunc);
  MIXQ_CHECK(f.good(), ErrorCode::Io, "bench: cannot create '", path, "'");
  f << o.str();
  f.close();
  MIXQ_CHECK(!f.fail(), ErrorCode::Io, "bench: cannot write '", path, "'");
}

}  // namespace mixq::bench
