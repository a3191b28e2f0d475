// mixq bench: times mixq::linear for every scheme the chosen backend runs, on Llama-3-8B-shaped
// layers, against that backend's dense baseline measured in the same run, and checks every
// result against a float64 reference (exit 1 when any row exceeds its tolerance).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "bench_data.hpp"
#include "bench_driver.hpp"
#include "bench_moe.hpp"
#include "bench_options.hpp"
#include "bench_file.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::cli {

namespace {

using namespace mixq::bench;

const char kHelp[] =
    "usage: mixq bench [options]\n"
    "       mixq bench FILE [options]   (a checkpoint's weights: see the end)\n\n"
    "Times Y = X . W^T (mixq::linear) with synthetic random weights for every scheme of the best\n"
    "available backend, next to that backend's dense baseline measured in the same run (CPU: FP32\n"
    "GEMM; CUDA: cuBLAS FP16), and checks each result against a float64 reference on the\n"
    "dequantized weights, computed on a sample of the outputs (up to 4 rows of M x 256 columns).\n"
    "Rows beyond their tolerance are marked FAIL and the exit status is 1.\n"
    "Default: Llama-3-8B layers (KxN) 4096x6144, 4096x4096, 4096x28672, 14336x4096 at M = 1, 16,\n"
    "256. Weights are random codes and scales generated directly (not the float quantizer).\n\n"
    "options:\n"
    "  --shapes KxN,...     layer shapes (K = in features, N = out features)\n"
    "  --m M,...            batch sizes (rows of X)\n"
    "  --schemes S,...      bench schemes: weight schemes (w4g128, w4g32asym, w4g128zp, w8g128,\n"
    "                       fp8b128, ...: weight-only) and W8A8 forms 'w8g128:int8' (per-block INT8\n"
    "                       activations), 'fp8b128:fp8' (per-token 1x128 FP8 activations);\n"
    "                       W4A8 'w4g128:fp8', 'w4g128zp:fp8' (cpu, ref)\n"
    "  --backend B          auto (default: cuda when a GPU is usable, else cpu), cpu, cuda, ref\n"
    "  --reps N             at most N timed calls per case (default 20; fewer when a call is slow:\n"
    "                       each case gets ~0.2 s, at least 2 calls)\n"
    "  --warmup N           untimed calls before timing (default 1)\n"
    "  --settle-ms N        CUDA: each case's own calls replayed untimed for N ms before it is\n"
    "                       timed, so every case (the baseline, timed first, too) runs at the\n"
    "                       clocks of sustained load (default 200; --quick 0)\n"
    "  --threads N          CPU threads (default: MIXQ_NUM_THREADS, else the CPUs of the affinity mask)\n"
    "  --act f16|bf16       CUDA activation (and cuBLAS baseline) dtype, default f16\n"
    "  --tune K=V,...       kernel tuning knobs (mixq/tuning.hpp keys, e.g. wo_token_tile=64),\n"
    "                       over MIXQ_TUNE\n"
    "  --force-kernel NAME  run this kernel family for every M it serves (e.g. sm90_wo_ws)\n"
    "  --chain              CUDA, ':int8' / ':fp8' schemes: time each layer as one of a chain of\n"
    "                       quantized layers: x arrives quantized (quantized once, untimed) and\n"
    "                       the output leaves quantized for the next layer (linear(xq, w, yq));\n"
    "                       the check runs on the same layer's 16-bit output\n"
    "  --json FILE          also write the results as JSON (with this command line)\n"
    "  --quick              tiny shapes (512x384, 320x200) at M = 1, 5, 33: a smoke test\n"
    "  --seed N             random seed (default 1)\n"
    "  --tol-scale X        multiply every error tolerance by X (e.g. 0.1: stricter)\n"
    "  --no-progress        no progress bar (it is drawn on stderr only when that is a terminal)\n"
    "  --op moe             the mixture-of-experts MLP instead (mixq bench --op moe --help)\n"
    "  --tp N,...           a tensor-parallel decoder layer on N GPUs (mixq bench --tp 1 --help)\n"
    "  --op conv2d          convolutions instead (mixq bench --op conv2d --help)\n";

struct Shape {
  int64_t K, N;
};

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> out;
  for (const std::string& item : split(text, ',')) {
    const size_t x = item.find('x');
    if (x == std::string::npos) usage_fail("bench", "--shapes: '" + item + "' is not KxN");
    const auto k = parse_int_list("bench", "--shapes", item.substr(0, x), 1, int64_t(1) << 20);
    const auto n = parse_int_list("bench", "--shapes", item.substr(x + 1), 1, int64_t(1) << 20);
    if (k.size() != 1 || n.size() != 1) usage_fail("bench", "--shapes: '" + item + "' is not KxN");
    if (k[0] * n[0] > (int64_t(1) << 31))
      usage_fail("bench", "--shapes: '" + item + "' has more than 2^31 weights");
    out.push_back({k[0], n[0]});
  }
  return out;
}

class Progress {
 public:
  Progress(int total, bool enabled) : total_(total), enabled_(enabled && isatty(STDERR_FILENO)) {}
  void step(const std::string& what) {
    ++done_;
    if (!enabled_) return;
    const int width = 30, filled = total_ ? width * done_ / total_ : width;
    std::fprintf(stderr, "\r[%.*s%*s] %d/%d %-48.48s", filled,
                 "##############################", width - filled, "", done_, total_,
                 what.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) std::fprintf(stderr, "\r%*s\r", 100, "");
  }
  ~Progress() { clear(); }
  // Clears the bar while the table is written to the same terminal.
  struct Pause {
    explicit Pause(Progress& p) : p_(p) { p_.clear(); }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;
    Progress& p_;
  };

 private:
  int total_, done_ = 0;
  bool enabled_;
};

// How many copies of a weight of `bytes` to rotate among so that the working set is at least
// ~3x the cache (capped: preparing copies costs time and memory).
int copies_for(int64_t bytes, int64_t cache) {
  if (bytes <= 0) return 1;
  const int64_t want = (3 * cache + bytes - 1) / bytes;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(8, want)));
}

void fill_rates(BenchRow& r, int64_t act_bytes_per_elem) {
  const double s = r.time_us * 1e-6;
  r.moved_bytes = r.weight_bytes + r.M * r.K * act_bytes_per_elem + r.M * r.N * 4;
  r.gb_per_s = s > 0 ? r.moved_bytes / s * 1e-9 : 0;
  r.tflop_per_s = s > 0 ? 2.0 * r.M * r.N * r.K / s * 1e-12 : 0;
}

std::string join_command(int argc, char** argv) {
  std::string s = "mixq";
  for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

}  // namespace

int run_bench(int argc, char** argv) {
  // `--op moe`: the mixture-of-experts benchmark (bench_moe.cpp); `--op conv2d`: convolutions
  // (bench_conv.cpp)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--op=conv2d") == 0 ||
        (std::strcmp(argv[i], "--op") == 0 && i + 1 < argc && std::strcmp(argv[i + 1], "conv2d") == 0))
      return run_bench_conv(argc, argv);
    if (std::strcmp(argv[i], "--op") == 0 || std::strncmp(argv[i], "--op=", 5) == 0)
      return run_bench_moe(argc, argv);
    if (std::strcmp(argv[i], "--tp") == 0 || std::strncmp(argv[i], "--tp=", 5) == 0)
      return run_bench_tp(argc, argv);
  }
  Args a("bench", argc, argv,
         {{"--shapes", "", true}, {"--m", "", true}, {"--schemes", "", true},
          {"--backend", "", true}, {"--reps", "", true}, {"--warmup", "", true},
          {"--threads", "", true}, {"--json", "", true}, {"--quick", "", false},
          {"--seed", "", true}, {"--no-progress", "", false}, {"--tol-scale", "", true},
          {"--act", "", true}, {"--tune", "", true}, {"--force-kernel", "", true},
          {"--only", "", true}, {"--skip", "", true}, {"--settle-ms", "", true},
          {"--chain", "", false}});
  if (a.help()) return print_help((std::string(kHelp) + "\n" + kBenchFileHelp).c_str());
  if (!a.positionals().empty()) return run_bench_file(a, join_command(argc, argv));
  for (const char* opt : {"--only", "--skip"})
    if (a.has(opt)) usage_fail("bench", std::string(opt) + " selects the weights of a FILE; none is given");
  // A bad --json path must fail now, not after the whole run.
  if (a.has("--json")) check_outputs("bench", {{"--json", a.get("--json")}}, {});
  const bool quick = a.has("--quick");
  const std::vector<Shape> shapes = parse_shapes(a.get(
      "--shapes", quick ? "512x384,320x200" : "4096x6144,4096x4096,4096x28672,14336x4096"));
  const std::vector<int64_t> ms =
      parse_int_list("bench", "--m", a.get("--m", quick ? "1,5,33" : "1,16,256"), 1, 1 << 20);
  TimingPolicy policy;
  policy.reps = static_cast<int>(a.get_int("--reps", quick ? 5 : 20, 1, 100000));
  policy.warmup = static_cast<int>(a.get_int("--warmup", 1, 0, 100000));
  policy.min_reps = 2;
  policy.budget_s = quick ? 0.02 : 0.2;
  policy.slow_call_s = 0.2;
  const uint64_t seed = static_cast<uint64_t>(a.get_int("--seed", 1, 0, int64_t(1) << 62));
  const double tol_scale = parse_tol_scale(a);
  const DriverConfig cfg = parse_driver_config(a);
  const std::string backend = a.get("--backend", "auto");
  std::unique_ptr<BenchDriver> driver;
  if (backend == "cuda" || (backend == "auto" && cuda_available())) {
    driver = make_cuda_bench_driver(cfg);
    MIXQ_CHECK(driver || backend == "auto", ErrorCode::Unsupported,
               "bench: the CUDA backend is not available (built without CUDA, or no usable GPU)");
  }
  if (!driver) {
    if (backend != "auto" && backend != "cpu" && backend != "ref" && backend != "cuda")
      usage_fail("bench", "--backend must be auto, cpu, cuda or ref, got '" + backend + "'");
    driver = make_cpu_bench_driver(cfg, backend == "ref" ? BackendKind::Reference : BackendKind::CPU);
  }

  std::vector<BenchScheme> schemes;
  {
    std::vector<std::string> names = driver->default_schemes();
    if (a.has("--schemes")) names = split(a.get("--schemes"), ',');
    for (const std::string& n : names) {
      try {
        schemes.push_back(parse_bench_scheme(n));
      } catch (const Error& e) {
        usage_fail("bench", std::string(e.what()).substr(std::strlen("mixq: ")));
      }
    }
  }
  // Weight schemes in first-use order: "w8g128" and "w8g128:int8" share one random weight.
  std::vector<std::string> weight_names;
  std::map<std::string, std::vector<size_t>> users;
  for (size_t i = 0; i < schemes.size(); ++i) {
    const std::string wn = scheme_name(schemes[i].weight);
    if (!users.count(wn)) weight_names.push_back(wn);
    users[wn].push_back(i);
  }

  BenchReport report;
  report.command = join_command(argc, argv);
  report.backend = driver->backend();
  report.device = driver->device();
  report.baseline = driver->baseline_name();
  report.threads = driver->threads();
  policy.settle_s = parse_settle_s(a, driver->backend(), quick ? 0 : 200);
  report.settle_ms = static_cast<int>(policy.settle_s * 1e3 + 0.5);
  const DType act_dtype = driver->activation_dtype();
  const int64_t act_bytes = dtype_bits(act_dtype) / 8;
  const int64_t cache = driver->cache_bytes();
  int64_t max_m = 1;
  for (int64_t m : ms) max_m = std::max(max_m, m);

  Progress progress(static_cast<int>(shapes.size() * ms.size() * (1 + schemes.size())),
                    !a.has("--no-progress"));
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto seconds_since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(now() - t).count();
  };
  const auto t_start = now();
  double gen_s = 0, setup_s = 0, ref_s = 0;
  print_table_header(stdout, report);
  for (size_t si = 0; si < shapes.size(); ++si) {
    const int64_t K = shapes[si].K, N = shapes[si].N;
    const std::string shape_text = std::to_string(K) + "x" + std::to_string(N);
    // Activations: N(0, 1) rows, rounded to the driver's activation dtype; smaller M use the
    // first rows.
    auto t_gen = now();
    std::vector<float> x(static_cast<size_t>(max_m * K));
    fill_random_normal(x.data(), max_m * K, 1.0f, seed * 1000 + si);
    round_to_dtype(x.data(), max_m * K, act_dtype);
    std::vector<float> y(static_cast<size_t>(max_m * N));
    std::vector<std::vector<BenchRow>> rows_by_m(ms.size());
    std::vector<double> dense_us(ms.size(), 0);

    {  // Dense baseline, same activations.
      std::vector<float> w(static_cast<size_t>(N * K));
      fill_random_normal(w.data(), N * K, 0.02f, seed * 1000 + si + 500);
      gen_s += seconds_since(t_gen);
      const int copies = copies_for(N * K * 4, cache);
      for (size_t mi = 0; mi < ms.size(); ++mi) {
        const int64_t M = ms[mi];
        progress.step("dense " + shape_text + " M=" + std::to_string(M));
        std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
        const HostProblem p{M, N, K, x.data(), y.data()};
        const TimedRun t = driver->run_dense(w.data(), copies, p, policy);
        setup_s += t.setup_s;
        const auto t_ref = now();
        BenchRow r;
        r.scheme = "dense";
        r.act = "f32 weights";
        r.K = K, r.N = N, r.M = M;
        r.kernel = t.kernel;
        r.time_us = t.median_us, r.min_us = t.min_us, r.reps = t.reps;
        r.weight_bytes = N * K * act_bytes;  // the dense weights as the baseline reads them
        fill_rates(r, act_bytes);
        const OutputSample s = choose_sample(M, N);
        const std::vector<double> xs = sampled_activations(x.data(), K, s, ActQuant::None, 0);
        const auto ref = reference_on_sample(xs, K, s, sampled_weight_rows(K, s, [&](int64_t n, float* buf) {
          std::memcpy(buf, w.data() + n * K, K * sizeof(float));
        }));
        r.rel_err = r.emu_err = relative_error(y.data(), N, s, ref);
        ref_s += seconds_since(t_ref);
        // The dense baseline may compute in a lower precision than its inputs (CUDA: FP16).
        r.tol = r.emu_tol = tol_scale * error_tolerance(ActQuant::None, act_dtype);
        r.speedup = 1.0;
        r.sample = s.describe(M, N);
        dense_us[mi] = t.median_us;
        rows_by_m[mi].push_back(r);
      }
      driver->release();
    }

    for (const std::string& wn : weight_names) {
      t_gen = now();
      const QuantizedWeight w =
          random_quantized_weight(N, K, schemes[users[wn][0]].weight, seed * 1000 + si + 7);
      gen_s += seconds_since(t_gen);
      const int copies = copies_for(w.storage_bytes(), cache);
      // The sampled columns depend on N only: dequantize them once for all M and act modes.
      const auto t_wref = now();
      const std::vector<float> wrows =
          sampled_weight_rows(K, choose_sample(1, N), [&](int64_t n, float* buf) {
            dequantize_rows(w, n, n + 1, buf, /*original_order=*/true);
          });
      ref_s += seconds_since(t_wref);
      for (size_t idx : users[wn]) {
        const BenchScheme& sc = schemes[idx];
        bool unsupported = false;
        std::string why;
        for (size_t mi = 0; mi < ms.size(); ++mi) {
          const int64_t M = ms[mi];
          progress.step(sc.name + " " + shape_text + " M=" + std::to_string(M));
          BenchRow r;
          r.scheme = sc.name;
          r.act = act_quant_name(sc.act);
          r.K = K, r.N = N, r.M = M;
          if (!unsupported) {
            std::fill(y.begin(), y.end(), std::numeric_limits<float>::quiet_NaN());
            const HostProblem p{M, N, K, x.data(), y.data()};
            try {
              const TimedRun t = driver->run_quantized(w, sc.act, copies, p, policy);
              r.kernel = t.kernel;
              r.time_us = t.median_us, r.min_us = t.min_us, r.reps = t.reps;
              r.paired_baseline_us = t.paired_baseline_us;
              setup_s += t.setup_s;
            } catch (const Error& e) {
              if (e.code() != ErrorCode::Unsupported) throw;
              unsupported = true;
              why = one_line(e.what());
            }
          }
          if (unsupported) {
            r.unsupported = true;
            r.note = why;
            rows_by_m[mi].push_back(r);
            continue;
          }
          r.weight_bytes = w.storage_bytes();
          if (M == 1) r.read_us = driver->plain_read_us(r.weight_bytes);
          fill_rates(r, act_bytes);
          const auto t_ref = now();
          const OutputSample s = choose_sample(M, N);
          const std::vector<double> xs = sampled_activations(x.data(), K, s, ActQuant::None, 0);
          r.rel_err = relative_error(y.data(), N, s, reference_on_sample(xs, K, s, wrows));
          r.emu_err = r.rel_err;
          // The CPU backend's default for small M quantizes the activations to int8 per
          // weight segment (kernel cpu_*_i8dot): judged like INT8 activations, and emulated.
          const bool i8dot = r.kernel.find("i8dot") != std::string::npos;
          if (sc.act != ActQuant::None) {
            const auto xq = sampled_activations(x.data(), K, s, sc.act, w.block_k);
            r.emu_err = relative_error(y.data(), N, s, reference_on_sample(xq, K, s, wrows));
          } else if (i8dot) {
            const auto xq = sampled_activations_i8dot(x.data(), K, s, w.block_k);
            r.emu_err = relative_error(y.data(), N, s, reference_on_sample(xq, K, s, wrows));
          }
          ref_s += seconds_since(t_ref);
          r.tol = tol_scale * (i8dot ? i8dot_error_tolerance(act_dtype)
                                     : error_tolerance(sc.act, act_dtype));
          r.emu_tol = tol_scale * (i8dot ? i8dot_emulated_error_tolerance(act_dtype)
                                         : emulated_error_tolerance(sc.act, act_dtype));
          // the ratio against the baseline timed on its own (its replays alternated with this
          // run's, where the driver pairs them, run a few percent slower: reported, not used)
          r.solo_baseline_us = dense_us[mi];
          r.speedup = r.time_us > 0 ? dense_us[mi] / r.time_us : 0;
          r.sample = s.describe(M, N);
          rows_by_m[mi].push_back(r);
        }
        driver->release();  // the next scheme prepares the weight for another act mode
      }
    }
    std::vector<BenchRow> shape_rows;
    for (auto& group : rows_by_m)
      for (auto& r : group) shape_rows.push_back(std::move(r));
    {
      Progress::Pause pause(progress);
      print_table_rows(stdout, shape_rows);
    }
    for (auto& r : shape_rows) report.rows.push_back(std::move(r));
  }
  const double elapsed = seconds_since(t_start);
  std::printf("\ntotal bench time %.1f s: kernel calls and cache flushes %.1f s, data generation %.1f s, prepare "
              "%.1f s, float64 reference %.1f s\n",
              elapsed, elapsed - gen_s - setup_s - ref_s, gen_s, setup_s, ref_s);
  std::fflush(stdout);
  if (a.has("--json")) {
    // Written under a temporary name and renamed into place, like every mixq output.
    formats::OutputFile json(a.get("--json"));
    write_json(json.temp_path(), report);
    json.commit();
  }
  int failed = 0;
  for (const BenchRow& r : report.rows) failed += r.ok() ? 0 : 1;
  if (failed) {
    std::fprintf(stderr, "mixq bench: %d result(s) exceed their error tolerance (marked FAIL)\n",
                 failed);
    return 1;
  }
  return 0;
}

}  // namespace mixq::cli
