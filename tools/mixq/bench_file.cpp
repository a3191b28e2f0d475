// mixq bench FILE: every 2-D weight of a checkpoint, grouped by (shape, type), timed at each M on
// the chosen backend next to that backend's dense baseline (the same drivers as `mixq bench`),
// checked against a float64 reference, and summed into one decode step of the whole model.
#include "bench_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "bench_data.hpp"
#include "bench_driver.hpp"
#include "bench_options.hpp"
#include "bench_report.hpp"
#include "mixq/cpu.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::bench {

bool is_embedding_name(const std::string& name) {
  static const char* const kParts[] = {"token_embd",      "embed_tokens",        "tok_embeddings",
                                       "word_embeddings", "position_embeddings", "embed_positions"};
  for (const char* p : kParts)
    if (name.find(p) != std::string::npos) return true;
  // GPT-2 style "transformer.wte.weight" / "wpe": as a whole dotted component only.
  for (const char* p : {"wte", "wpe"}) {
    const std::string s = p;
    for (size_t at = name.find(s); at != std::string::npos; at = name.find(s, at + 1)) {
      const bool starts = at == 0 || name[at - 1] == '.';
      const bool ends = at + s.size() == name.size() || name[at + s.size()] == '.';
      if (starts && ends) return true;
    }
  }
  return false;
}

FileWeights group_file_weights(const formats::CheckpointInfo& info,
                               const formats::NamePattern* only, const formats::NamePattern* skip) {
  FileWeights out;
  std::map<std::tuple<std::string, int64_t, int64_t>, size_t> index;
  for (const formats::TensorEntry& t : info.tensors) {
    std::string why;
    if (t.shape.size() != 2) why = std::to_string(t.shape.size()) + "-D, not a matrix";
    else if (is_embedding_name(t.name)) why = "embedding (a row lookup, not a matrix product)";
    else if (!t.is_weight) why = "type " + t.type + " is not a weight mixq loads";
    else if (only && !only->search(t.name)) why = "not selected by --only";
    else if (skip && skip->search(t.name)) why = "excluded by --skip";
    if (!why.empty()) {
      out.skipped.push_back({t.name, why});
      continue;
    }
    const auto key = std::make_tuple(t.type, t.shape[0], t.shape[1]);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.groups.size()).first;
      WeightGroup g;
      g.type = t.type;
      g.N = t.shape[0], g.K = t.shape[1];
      g.file_bytes = t.bytes;
      out.groups.push_back(std::move(g));
    }
    out.groups[it->second].names.push_back(t.name);
  }
  return out;
}

}  // namespace mixq::bench

namespace mixq::cli {

using namespace mixq::bench;

const char kBenchFileHelp[] =
    "mixq bench FILE [options]: the 2-D weights of a real checkpoint instead of synthetic layers.\n"
    "FILE is a GGUF file or a safetensors checkpoint (mixq layout, GPTQ, AWQ, FP8 block, plain\n"
    "F32/F16/BF16 matrices; a single file, a *.safetensors.index.json or the directory holding it).\n"
    "Weights of identical (shape, type) form one group, timed once per M (on its first tensor)\n"
    "next to the backend's dense baseline for that shape and checked like the synthetic rows; the\n"
    "decode step is the sum over groups of count x time: every linear layer of the model once, in\n"
    "ms and tokens/s (= M / step time). Tensors that are not 2-D, token / position embeddings and\n"
    "types mixq cannot load are skipped and listed (a model whose output layer reuses the token\n"
    "embedding has no separate output matrix: its logits product is not in the sum). Default M: 1.\n"
    "Options as above, except\n"
    "--shapes, --schemes and --quick; and:\n"
    "  --only REGEX         time only the weights whose name matches (searched anywhere in it)\n"
    "  --skip REGEX         leave out the weights whose name matches\n";

namespace {

int copies_for_cache(int64_t bytes, int64_t cache) {
  if (bytes <= 0) return 1;
  const int64_t want = (3 * cache + bytes - 1) / bytes;  // a working set of ~3x the cache
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(8, want)));
}

void set_rates(BenchRow& r, int64_t act_bytes) {
  const double s = r.time_us * 1e-6;
  r.moved_bytes = r.weight_bytes + r.M * r.K * act_bytes + r.M * r.N * 4;
  r.gb_per_s = s > 0 ? r.moved_bytes / s * 1e-9 : 0;
  r.tflop_per_s = s > 0 ? 2.0 * r.M * r.N * r.K / s * 1e-12 : 0;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned char>(c));
      o += b;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string json_num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

struct GroupResult {
  WeightGroup group;
  int64_t canonical_bytes = 0;  // bytes of mixq's canonical form of the weight
  std::vector<BenchRow> rows;   // one per M, in --m order
};

struct StepSum {
  int64_t M = 0;
  double mixq_us = 0, dense_us = 0;
  int missing = 0;  // groups without a mixq time (unsupported)
};

struct FileReport {
  std::string command, file, format, backend, device, baseline, isa;
  int threads = 0;
  int settle_ms = 0;  // untimed replays of each case before its timed ones (CUDA)
  std::vector<SkippedTensor> skipped;
  std::vector<GroupResult> groups;
  std::vector<StepSum> steps;
};

// The type column is as wide as the longest type name (mixq-layout types describe the geometry).
int type_width(const FileWeights& fw) {
  size_t w = 4;
  for (const WeightGroup& g : fw.groups) w = std::max(w, g.type.size());
  return static_cast<int>(w);
}

void print_header(const FileReport& r, const FileWeights& fw) {
  size_t n_tensors = 0;
  for (const WeightGroup& g : fw.groups) n_tensors += g.names.size();
  std::printf("mixq bench %s (%s): %zu weight tensor(s) in %zu group(s)\n", r.file.c_str(),
              r.format.c_str(), n_tensors, fw.groups.size());
  std::printf("backend %s on %s%s\n", r.backend.c_str(), r.device.c_str(),
              r.isa.empty() ? "" : (", kernels " + r.isa).c_str());
  std::printf("baseline: %s; times are medians (us) of the group's first tensor; bytes: one tensor "
              "as stored in the file; GB/s: (those bytes + activations + outputs) / time%s\n",
              r.baseline.c_str(),
              r.settle_ms > 0 ? ("; each case timed after " + std::to_string(r.settle_ms) +
                                 " ms of its own untimed calls").c_str() : "");
  // Skipped tensors, summarised by reason (a model has hundreds of 1-D norms).
  std::map<std::string, std::vector<std::string>> by_reason;
  for (const SkippedTensor& s : r.skipped) by_reason[s.reason].push_back(s.name);
  for (const auto& [why, names] : by_reason) {
    std::string list;
    for (size_t i = 0; i < names.size() && i < 3; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 3) list += ", ...";
    std::printf("skipped %zu: %s (%s)\n", names.size(), why.c_str(), list.c_str());
  }
  std::printf("\n%-*s  %-12s  %5s  %5s  %10s  %10s  %7s  %12s  %7s  %9s  %-4s  %s\n", type_width(fw), "type", "KxN",
              "count", "M", "mixq(us)", "dense(us)", "x dense", "bytes", "GB/s", "err", "check",
              "kernel");
}

void print_group(const GroupResult& g, int width) {
  const std::string shape = std::to_string(g.group.K) + "x" + std::to_string(g.group.N);
  for (const BenchRow& b : g.rows) {
    if (b.unsupported) {
      std::printf("%-*s  %-12s  %5zu  %5lld  unsupported: %s\n", width, g.group.type.c_str(), shape.c_str(),
                  g.group.names.size(), static_cast<long long>(b.M), b.note.c_str());
      continue;
    }
    const char* check = b.ok() ? "ok" : "FAIL";
    std::printf("%-*s  %-12s  %5zu  %5lld  %10.1f  %10.1f  %6.2fx  %12lld  %7.1f  %9.2e  %-4s  %s\n",
                width, g.group.type.c_str(), shape.c_str(), g.group.names.size(),
                static_cast<long long>(b.M), b.time_us, b.solo_baseline_us, b.speedup,
                static_cast<long long>(b.weight_bytes), b.gb_per_s, b.rel_err,
                check, b.kernel.c_str());
  }
  std::fflush(stdout);
}

void print_steps(const FileReport& r) {
  std::printf("\ndecode step (every timed weight once: sum of count x time)\n");
  std::printf("%5s  %10s  %10s  %7s  %12s  %12s\n", "M", "mixq(ms)", "dense(ms)", "x dense",
              "mixq tok/s", "dense tok/s");
  for (const StepSum& s : r.steps) {
    const double mq = s.mixq_us * 1e-3, de = s.dense_us * 1e-3;
    std::printf("%5lld  %10.3f  %10.3f  %6.2fx  %12.1f  %12.1f%s\n", static_cast<long long>(s.M), mq,
                de, mq > 0 ? de / mq : 0.0, mq > 0 ? s.M * 1e3 / mq : 0.0,
                de > 0 ? s.M * 1e3 / de : 0.0,
                s.missing ? ("  (incomplete: " + std::to_string(s.missing) + " group(s) unsupported)").c_str()
                          : "");
  }
  std::fflush(stdout);
}

void write_file_json(const std::string& path, const FileReport& r) {
  std::ostringstream o;
  o << "{\n  \"command\": " << json_str(r.command) << ",\n  \"file\": " << json_str(r.file)
    << ",\n  \"format\": " << json_str(r.format) << ",\n  \"backend\": " << json_str(r.backend)
    << ",\n  \"device\": " << json_str(r.device) << ",\n  \"baseline\": " << json_str(r.baseline)
    << ",\n  \"threads\": " << r.threads << ",\n  \"settle_ms\": " << r.settle_ms;
  if (!r.isa.empty()) o << ",\n  \"cpu_isa\": " << json_str(r.isa);
  o << ",\n  \"bytes\": \"one tensor as stored in the file\",\n  \"skipped\": [";
  for (size_t i = 0; i < r.skipped.size(); ++i)
    o << (i ? ", " : "") << "{\"name\": " << json_str(r.skipped[i].name)
      << ", \"reason\": " << json_str(r.skipped[i].reason) << "}";
  o << "],\n  \"groups\": [";
  for (size_t gi = 0; gi < r.groups.size(); ++gi) {
    const GroupResult& g = r.groups[gi];
    o << (gi ? "," : "") << "\n    {\"type\": " << json_str(g.group.type) << ", \"K\": " << g.group.K
      << ", \"N\": " << g.group.N << ", \"count\": " << g.group.names.size()
      << ", \"file_bytes\": " << g.group.file_bytes << ", \"canonical_bytes\": " << g.canonical_bytes
      << ",\n     \"tensors\": [";
    for (size_t i = 0; i < g.group.names.size(); ++i) o << (i ? ", " : "") << json_str(g.group.names[i]);
    o << "],\n     \"results\": [";
    for (size_t i = 0; i < g.rows.size(); ++i) {
      const BenchRow& b = g.rows[i];
      o << (i ? "," : "") << "\n       {\"M\": " << b.M;
      if (b.unsupported) {
        o << ", \"unsupported\": true, \"note\": " << json_str(b.note) << "}";
        continue;
      }
      o << ", \"kernel\": " << json_str(b.kernel) << ", \"time_us\": " << json_num(b.time_us)
        << ", \"min_us\": " << json_num(b.min_us) << ", \"reps\": " << b.reps
        << ", \"dense_us\": " << json_num(b.solo_baseline_us)
        << ", \"speedup_vs_dense\": " << json_num(b.speedup)
        << ", \"gb_per_s\": " << json_num(b.gb_per_s) << ", \"tflop_per_s\": " << json_num(b.tflop_per_s);
      if (b.read_us > 0)
        o << ", \"plain_read_us\": " << json_num(b.read_us)
          << ", \"plain_read_fraction\": " << json_num(b.read_us / b.time_us);
      o << ", \"rel_err\": " << json_num(b.rel_err) << ", \"tol\": " << json_num(b.tol)
        << ", \"emul_err\": " << json_num(b.emu_err) << ", \"emul_tol\": " << json_num(b.emu_tol)
        << ", \"reference_sample\": " << json_str(b.sample)
        << ", \"ok\": " << (b.ok() ? "true" : "false") << "}";
    }
    o << "]}";
  }
  o << "\n  ],\n  \"decode_step\": [";
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const StepSum& s = r.steps[i];
    o << (i ? "," : "") << "\n    {\"M\": " << s.M << ", \"mixq_ms\": " << json_num(s.mixq_us * 1e-3)
      << ", \"dense_ms\": " << json_num(s.dense_us * 1e-3)
      << ", \"mixq_tokens_per_s\": " << json_num(s.mixq_us > 0 ? s.M * 1e6 / s.mixq_us : 0)
      << ", \"dense_tokens_per_s\": " << json_num(s.dense_us > 0 ? s.M * 1e6 / s.dense_us : 0)
      << ", \"unsupported_groups\": " << s.missing << "}";
  }
  o << "\n  ]\n}\n";
  std::ofstream f(path, std::ios::trunc);
  MIXQ_CHECK(f.good(), ErrorCode::Io, "bench: cannot create '", path, "'");
  f << o.str();
  f.close();
  MIXQ_CHECK(!f.fail(), ErrorCode::Io, "bench: cannot write '", path, "'");
}

}  // namespace

int run_bench_file(const Args& a, const std::string& command_line) {
  a.expect_positionals(1, 1, "at most one FILE");
  for (const char* opt : {"--shapes", "--schemes", "--quick"})
    if (a.has(opt))
      usage_fail("bench", std::string(opt) + " cannot be used with FILE (the file's weights are timed)");
  const std::string file = a.positionals()[0];
  std::unique_ptr<formats::NamePattern> only, skip;
  if (a.has("--only")) only = std::make_unique<formats::NamePattern>(compile_pattern("bench", "--only", a.get("--only")));
  if (a.has("--skip")) skip = std::make_unique<formats::NamePattern>(compile_pattern("bench", "--skip", a.get("--skip")));
  const std::vector<int64_t> ms = parse_int_list("bench", "--m", a.get("--m", "1"), 1, 1 << 20);
  TimingPolicy policy;
  policy.reps = static_cast<int>(a.get_int("--reps", 20, 1, 100000));
  policy.warmup = static_cast<int>(a.get_int("--warmup", 1, 0, 100000));
  policy.min_reps = 2;
  policy.budget_s = 0.2;
  policy.slow_call_s = 0.2;
  const uint64_t seed = static_cast<uint64_t>(a.get_int("--seed", 1, 0, int64_t(1) << 62));
  const double tol_scale = parse_tol_scale(a);
  const DriverConfig cfg = parse_driver_config(a);
  const std::string backend = a.get("--backend", "auto");
  if (backend != "auto" && backend != "cpu" && backend != "ref" && backend != "cuda")
    usage_fail("bench", "--backend must be auto, cpu, cuda or ref, got '" + backend + "'");

  // Inputs before outputs: the file must be readable, and --json must be none of its files.
  const formats::CheckpointInfo info = formats::inspect_checkpoint(file);
  if (a.has("--json")) check_outputs("bench", {{"--json", a.get("--json")}}, formats::checkpoint_files(file));
  FileReport report;
  report.command = command_line;
  report.file = file;
  report.format = info.format;
  FileWeights fw = group_file_weights(info, only.get(), skip.get());
  report.skipped = fw.skipped;
  MIXQ_CHECK(!fw.groups.empty(), ErrorCode::InvalidArgument, "bench: ", file, " (", info.format,
             "): no 2-D weight to time among its ", info.tensors.size(), " tensor(s)",
             fw.skipped.empty() ? std::string() : " (first skipped: " + fw.skipped[0].name + ": " + fw.skipped[0].reason + ")");

  std::unique_ptr<BenchDriver> driver;
  if (backend == "cuda" || (backend == "auto" && cuda_available())) {
    driver = make_cuda_bench_driver(cfg);
    MIXQ_CHECK(driver || backend == "auto", ErrorCode::Unsupported,
               "bench: the CUDA backend is not available (built without CUDA, or no usable GPU)");
  }
  if (!driver) driver = make_cpu_bench_driver(cfg, backend == "ref" ? BackendKind::Reference : BackendKind::CPU);
  report.backend = driver->backend();
  report.device = driver->device();
  report.baseline = driver->baseline_name();
  report.threads = driver->threads();
  policy.settle_s = parse_settle_s(a, driver->backend(), 200);
  report.settle_ms = static_cast<int>(policy.settle_s * 1e3 + 0.5);
  if (report.backend == "cpu") report.isa = cpu::isa_name();
  const DType act_dtype = driver->activation_dtype();
  const int64_t act_bytes = dtype_bits(act_dtype) / 8;
  const int64_t cache = driver->cache_bytes();
  int64_t max_m = 1;
  for (int64_t m : ms) max_m = std::max(max_m, m);
  print_header(report, fw);

  // Activations per K (N(0, 1), in the driver's dtype) and dense baseline times per (N, K, M),
  // shared by every group of that shape whatever its type.
  std::map<int64_t, std::vector<float>> acts;
  auto activations = [&](int64_t K) -> const std::vector<float>& {
    auto it = acts.find(K);
    if (it != acts.end()) return it->second;
    std::vector<float> x(static_cast<size_t>(max_m * K));
    fill_random_normal(x.data(), max_m * K, 1.0f, seed * 1000 + static_cast<uint64_t>(K));
    round_to_dtype(x.data(), max_m * K, act_dtype);
    return acts.emplace(K, std::move(x)).first->second;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<BenchRow>> dense_rows;
  int dense_failed = 0;
  auto dense_for = [&](int64_t N, int64_t K) -> const std::vector<BenchRow>& {
    auto it = dense_rows.find({N, K});
    if (it != dense_rows.end()) return it->second;
    const std::vector<float>& x = activations(K);
    std::vector<float> w(static_cast<size_t>(N * K)), y(static_cast<size_t>(max_m * N));
    fill_random_normal(w.data(), N * K, 0.02f, seed * 1000 + static_cast<uint64_t>(N * 7 + K));
    std::vector<BenchRow> rows;
    for (int64_t M : ms) {
      std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
      const TimedRun t = driver->run_dense(w.data(), copies_for_cache(N * K * 4, cache),
                                           HostProblem{M, N, K, x.data(), y.data()}, policy);
      BenchRow r;
      r.K = K, r.N = N, r.M = M;
      r.kernel = t.kernel;
      r.time_us = t.median_us, r.min_us = t.min_us, r.reps = t.reps;
      const OutputSample s = choose_sample(M, N);
      const auto ref = reference_on_sample(
          sampled_activations(x.data(), K, s, ActQuant::None, 0), K, s,
          sampled_weight_rows(K, s, [&](int64_t n, float* buf) { std::memcpy(buf, w.data() + n * K, K * sizeof(float)); }));
      r.rel_err = r.emu_err = relative_error(y.data(), N, s, ref);
      r.tol = r.emu_tol = tol_scale * error_tolerance(ActQuant::None, act_dtype);
      if (!r.ok()) {
        ++dense_failed;
        std::printf("dense %lldx%lld M=%lld: FAIL (err %.2e > %.0e), %s\n", static_cast<long long>(K),
                    static_cast<long long>(N), static_cast<long long>(M), r.rel_err, r.tol, r.kernel.c_str());
      }
      rows.push_back(r);
    }
    driver->release();
    return dense_rows.emplace(std::make_pair(N, K), std::move(rows)).first->second;
  };

  for (WeightGroup& g : fw.groups) {
    const int64_t N = g.N, K = g.K;
    const std::vector<BenchRow>& dense = dense_for(N, K);
    const std::vector<float>& x = activations(K);
    const QuantizedWeight w = formats::load_weight(file, g.names[0]);
    MIXQ_CHECK(w.N == N && w.K == K, ErrorCode::Format, "bench: ", file, ": tensor \"", g.names[0],
               "\" loads as [", w.N, ", ", w.K, "], listed as [", N, ", ", K, "]");
    GroupResult gr;
    gr.group = g;
    gr.canonical_bytes = w.storage_bytes();
    const std::vector<float> wrows = sampled_weight_rows(K, choose_sample(1, N), [&](int64_t n, float* buf) {
      dequantize_rows(w, n, n + 1, buf, /*original_order=*/true);
    });
    std::vector<float> y(static_cast<size_t>(max_m * N));
    bool unsupported = false;
    std::string why;
    for (size_t mi = 0; mi < ms.size(); ++mi) {
      const int64_t M = ms[mi];
      BenchRow r;
      r.scheme = g.type;
      r.act = act_quant_name(ActQuant::None);
      r.K = K, r.N = N, r.M = M;
      if (!unsupported) {
        std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
        try {
          const TimedRun t = driver->run_quantized(w, ActQuant::None, copies_for_cache(w.storage_bytes(), cache),
                                                   HostProblem{M, N, K, x.data(), y.data()}, policy);
          r.kernel = t.kernel;
          r.time_us = t.median_us, r.min_us = t.min_us, r.reps = t.reps;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::Unsupported) throw;
          unsupported = true;
          why = one_line(e.what());
        }
      }
      if (unsupported) {
        r.unsupported = true;
        r.note = why;
        gr.rows.push_back(r);
        continue;
      }
      r.weight_bytes = g.file_bytes;
      if (M == 1) r.read_us = driver->plain_read_us(r.weight_bytes);
      set_rates(r, act_bytes);
      // The same checks as the synthetic rows: vs float64 on the dequantized weight, and for the
      // CPU int8-dot kernel (activations quantized per weight segment) vs its exact emulation.
      const OutputSample s = choose_sample(M, N);
      r.rel_err = r.emu_err = relative_error(
          y.data(), N, s, reference_on_sample(sampled_activations(x.data(), K, s, ActQuant::None, 0), K, s, wrows));
      const bool i8dot = r.kernel.find("i8dot") != std::string::npos;
      // cpu_*_i8dot<TYPE>: the native GGUF kernels, with ggml's q8_0 activations (symmetric per
      // 32) instead of mixq's per-segment scale + offset; their exact emulation is checked in
      // test_cpu_ggml_native, so here they are held to the int8 tolerance against float64 only.
      // cuda_ggml_q8_<TYPE> / cuda_ggml_mma_<TYPE>: the CUDA native GGUF kernels, the same q8
      // activations (their emulation is checked in test_cuda_ggml_native). cuda_ggml_hmma_<TYPE>
      // and cuda_ggml_stream_<TYPE> keep X as it is and round the weights to its type: the 16-bit
      // tolerance.
      const bool cuda_q8 = r.kernel.rfind("cuda_ggml_q8", 0) == 0 || r.kernel.rfind("cuda_ggml_mma", 0) == 0;
      const bool native_q8 = cuda_q8 || (i8dot && r.kernel.find('<') != std::string::npos);
      if (i8dot && !native_q8)
        r.emu_err = relative_error(
            y.data(), N, s, reference_on_sample(sampled_activations_i8dot(x.data(), K, s, w.block_k), K, s, wrows));
      // ggml's q8 activations (per 32, symmetric, no offset) are held to the 2e-2 of the native
      // kernels' tests against float64; mixq's own int8 segments (scale + offset) to 1e-2.
      r.tol = tol_scale * (native_q8 ? std::max(2e-2, i8dot_error_tolerance(act_dtype))
                           : i8dot   ? i8dot_error_tolerance(act_dtype)
                                     : error_tolerance(ActQuant::None, act_dtype));
      r.emu_tol = tol_scale * (native_q8 ? std::max(2e-2, i8dot_error_tolerance(act_dtype))
                               : i8dot ? i8dot_emulated_error_tolerance(act_dtype)
                                       : emulated_error_tolerance(ActQuant::None, act_dtype));
      r.solo_baseline_us = dense[mi].time_us;
      r.speedup = r.time_us > 0 ? dense[mi].time_us / r.time_us : 0;
      r.sample = s.describe(M, N);
      gr.rows.push_back(r);
    }
    driver->release();
    print_group(gr, type_width(fw));
    report.groups.push_back(std::move(gr));
  }

  for (size_t mi = 0; mi < ms.size(); ++mi) {
    StepSum s;
    s.M = ms[mi];
    for (const GroupResult& g : report.groups) {
      const double count = static_cast<double>(g.group.names.size());
      s.dense_us += count * dense_rows.at({g.group.N, g.group.K})[mi].time_us;
      if (g.rows[mi].unsupported) ++s.missing;
      else s.mixq_us += count * g.rows[mi].time_us;
    }
    report.steps.push_back(s);
  }
  print_steps(report);
  if (a.has("--json")) {
    formats::OutputFile json(a.get("--json"));
    write_file_json(json.temp_path(), report);
    json.commit();
  }
  int failed = dense_failed;
  for (const GroupResult& g : report.groups)
    for (const BenchRow& r : g.rows) failed += r.ok() ? 0 : 1;
  if (failed) {
    std::fprintf(stderr, "mixq bench: %d result(s) exceed their error tolerance (marked FAIL)\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace mixq::cli
