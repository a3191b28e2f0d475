// mixq bench --op moe: times the routed-experts MLP (mixq::moe_mlp) and its two grouped GEMMs on
// the expert shapes of DeepSeek-V3, Qwen3-30B-A3B and Mixtral-8x7B under synthetic routing, next
// to a dense baseline over the same routing, and checks the MLP output against a float64
// reference on sampled tokens (exit 1 when a row exceeds its tolerance).
#include "bench_moe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "bench_data.hpp"
#include "bench_options.hpp"
#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"
#include "mixq/numeric.hpp"

namespace mixq::cli {

namespace {

using namespace mixq::bench;

const char kHelp[] =
    "usage: mixq bench --op moe [options]\n\n"
    "Times the routed-experts MLP y[t] = sum_j w[t][j] * down_e(silu(gate_e(x_t)) * up_e(x_t))\n"
    "(mixq::moe_mlp), and separately its grouped GEMMs (gate+up fused: N = 2 * intermediate,\n"
    "K = hidden; down: N = hidden, K = intermediate), with random quantized experts and synthetic\n"
    "top-k routing, next to a dense baseline over the same routing (CPU: f32 GEMMs per active\n"
    "expert; CUDA: cuBLAS BF16/F16 GEMMs per active expert, same process). Each row also gives the\n"
    "bytes of expert weights the batch touches (the active experts' gate+up and down), their rate\n"
    "(GB/s over the whole MLP; CUDA: % of the measured streaming-read ceiling) and TFLOP/s; the\n"
    "CUDA driver also replays each call in a CUDA graph (mlp_graph; JSON *_graph_us), as a\n"
    "serving engine's decode step runs it, an L2 flush before each call subtracted; the\n"
    "output is checked against a float64 reference on up to 2 sampled tokens (FAIL: exit 1).\n\n"
    "options:\n"
    "  --models M,...       deepseek-v3 (E 256, top-8, hidden 7168, intermediate 2048),\n"
    "                       qwen3-30b-a3b (E 128, top-8, 2048, 768), mixtral-8x7b (E 8, top-2,\n"
    "                       4096, 14336); default all three (--quick: tiny, E 8, top-2, 256, 128;\n"
    "                       and tiny-wide, E 16, top-4, 512, 256)\n"
    "  --m T,...            tokens per batch (default 1,8,64,512,4096; --quick 1,8,33)\n"
    "  --routing R,...      uniform (each token picks top-k distinct experts uniformly) and/or\n"
    "                       skewed (Zipf-like: expert ranks drawn with P(r) ~ 1/(r+1)^1.2 over a\n"
    "                       random order of the experts, distinct per token); default both\n"
    "  --schemes S,...      w4g128, w8g128, fp8b128, 'w8g128:int8', 'fp8b128:fp8', 'w4g128:fp8'\n"
    "                       (W4A8) (default: the backend's: cpu w4g128,w8g128; cuda\n"
    "                       w4g128,w8g128,fp8b128)\n"
    "  --backend B          auto (default: cuda when usable, else cpu), cpu, cuda\n"
    "  --reps N             at most N timed calls per figure (default 10)\n"
    "  --warmup N           untimed calls before timing (default 1)\n"
    "  --settle-ms N        CUDA: each figure's own call repeated untimed for N ms before it is\n"
    "                       timed (the clocks of sustained load; default 200, --quick 0)\n"
    "  --threads N          CPU threads (default: MIXQ_NUM_THREADS, else the CPUs of the affinity mask)\n"
    "  --act f16|bf16       CUDA activation (and cuBLAS baseline) dtype, default bf16\n"
    "  --json FILE          also write the rows as JSON (with this command line)\n"
    "  --quick              tiny models, T = 1, 8, 33: a smoke test\n"
    "  --seed N             random seed (default 1)\n"
    "  --tol-scale X        multiply every error tolerance by X (e.g. 0.1: stricter)\n"
    "  --tune K=V,...       kernel tuning knobs (mixq/tuning.hpp keys, e.g. moe_token_tile=128),\n"
    "                       over MIXQ_TUNE\n"
    "  --no-progress        accepted for symmetry with bench (no progress bar is drawn)\n";

const std::vector<MoeModel> kModels = {
    {"deepseek-v3", 256, 8, 7168, 2048},
    {"qwen3-30b-a3b", 128, 8, 2048, 768},
    {"mixtral-8x7b", 8, 2, 4096, 14336},
};
const std::vector<MoeModel> kQuickModels = {
    {"tiny", 8, 2, 256, 128},
    {"tiny-wide", 16, 4, 512, 256},
};

struct Row {
  MoeModel model;
  int64_t T = 0;
  std::string routing, scheme, act;
  int64_t active = 0, max_rows = 0;
  MoeTimes t;
  int64_t bytes = 0;
  double gb_s = 0, ceiling_pct = 0, tflop_s = 0, speedup = 0, rel_err = 0, tol = 0;
  bool unsupported = false;
  std::string note;
  bool ok() const { return unsupported || rel_err <= tol; }
};

// Top-k routing: `topk` distinct experts per token and positive weights that sum to 1.
void make_routing(int64_t T, const MoeModel& m, bool skewed, uint64_t seed,
                  std::vector<int32_t>* ids, std::vector<float>* w) {
  std::mt19937_64 rng(seed);
  const int64_t E = m.experts, k = m.topk;
  std::vector<int32_t> order(E);
  for (int64_t e = 0; e < E; ++e) order[e] = static_cast<int32_t>(e);
  std::shuffle(order.begin(), order.end(), rng);  // which expert holds each popularity rank
  std::vector<double> cdf(E);
  double acc = 0;
  for (int64_t r = 0; r < E; ++r) cdf[r] = acc += skewed ? std::pow(r + 1.0, -1.2) : 1.0;
  std::uniform_real_distribution<double> u(0, acc);
  ids->assign(T * k, 0);
  w->assign(T * k, 0);
  for (int64_t t = 0; t < T; ++t) {
    std::set<int32_t> chosen;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      int32_t e;
      do {
        const int64_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
        e = order[std::min<int64_t>(r, E - 1)];
      } while (chosen.count(e));
      chosen.insert(e);
      (*ids)[t * k + j] = e;
      sum += (*w)[t * k + j] = 0.1f + static_cast<float>(u(rng) / acc);
    }
    for (int64_t j = 0; j < k; ++j) (*w)[t * k + j] = static_cast<float>((*w)[t * k + j] / sum);
  }
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// float64 reference of one token's MLP output from the quantized experts (dequantized row by
// row; activations rounded as the backend keeps its intermediates).
std::vector<double> reference_token(const float* x, const int32_t* ids, const float* w,
                                    const MoeModel& m, const std::vector<QuantizedWeight>& gu,
                                    const std::vector<QuantizedWeight>& dn, DType act_dtype) {
  const int64_t H = m.hidden, I = m.intermediate;
  std::vector<double> y(H, 0.0), a(I);
  std::vector<float> row(std::max(H, I));
  std::vector<float> af(I);
  for (int64_t j = 0; j < m.topk; ++j) {
    const QuantizedWeight& g = gu[ids[j]];
    std::vector<double> h(2 * I);
    for (int64_t n = 0; n < 2 * I; ++n) {
      dequantize_rows(g, n, n + 1, row.data(), true);
      double s = 0;
      for (int64_t c = 0; c < H; ++c) s += double(row[c]) * x[c];
      h[n] = s;
    }
    for (int64_t i = 0; i < I; ++i) af[i] = static_cast<float>(silu(h[i]) * h[I + i]);
    round_to_dtype(af.data(), I, act_dtype);
    const QuantizedWeight& d = dn[ids[j]];
    for (int64_t n = 0; n < H; ++n) {
      dequantize_rows(d, n, n + 1, row.data(), true);
      double s = 0;
      for (int64_t c = 0; c < I; ++c) s += double(row[c]) * af[c];
      y[n] += double(w[j]) * s;
    }
  }
  return y;
}

// Tolerances of the sampled MLP outputs vs float64 (relative Frobenius): weight-only 3e-2 (f32
// activations: the CPU's kernels for experts with <= 8 rows quantize activations to int8 per
// weight segment, ~1e-2 per GEMM and two GEMMs chained, measured 1.1e-2 .. 1.4e-2; f16 / bf16: the
// intermediates are rounded to the activation dtype between the GEMMs), INT8 / FP8 activations
// 6e-2 (two rounds of 8-bit activation quantization).
double moe_tolerance(ActQuant act, DType) { return act != ActQuant::None ? 6e-2 : 3e-2; }

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
      continue;
    }
    o += c;
  }
  return o + "\"";
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

void write_json(const std::string& path, const std::string& command, const MoeBenchDriver& d,
                int settle_ms, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "{\n  \"command\": " << json_str(command) << ",\n  \"op\": \"moe\",\n  \"backend\": "
    << json_str(d.backend()) << ",\n  \"device\": " << json_str(d.device())
    << ",\n  \"baseline\": " << json_str(d.baseline_name())
    << ",\n  \"read_ceiling_gb_s\": " << num(d.read_ceiling_gb_s()) << ",\n  \"settle_ms\": " << settle_ms
    << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? ",\n" : "\n") << "    {\"model\": " << json_str(r.model.name)
      << ", \"experts\": " << r.model.experts << ", \"topk\": " << r.model.topk
      << ", \"hidden\": " << r.model.hidden << ", \"intermediate\": " << r.model.intermediate
      << ", \"tokens\": " << r.T << ", \"routing\": " << json_str(r.routing)
      << ", \"scheme\": " << json_str(r.scheme) << ", \"act\": " << json_str(r.act)
      << ", \"unsupported\": " << (r.unsupported ? "true" : "false");
    if (r.unsupported) {
      f << ", \"note\": " << json_str(r.note) << "}";
      continue;
    }
    f << ", \"active_experts\": " << r.active << ", \"max_expert_rows\": " << r.max_rows
      << ", \"gate_up_us\": " << num(r.t.gate_up_us) << ", \"down_us\": " << num(r.t.down_us)
      << ", \"moe_mlp_us\": " << num(r.t.mlp_us) << ", \"baseline_us\": " << num(r.t.baseline_us)
      << ", \"gate_up_graph_us\": " << num(r.t.gate_up_graph_us)
      << ", \"down_graph_us\": " << num(r.t.down_graph_us)
      << ", \"moe_mlp_graph_us\": " << num(r.t.mlp_graph_us)
      << ", \"speedup\": " << num(r.speedup) << ", \"weight_bytes_touched\": " << r.bytes
      << ", \"gb_per_s\": " << num(r.gb_s) << ", \"ceiling_pct\": " << num(r.ceiling_pct)
      << ", \"tflop_per_s\": " << num(r.tflop_s) << ", \"kernel_gate_up\": "
      << json_str(r.t.kernel_gate_up) << ", \"kernel_down\": " << json_str(r.t.kernel_down)
      << ", \"rel_err\": " << num(r.rel_err) << ", \"tol\": " << num(r.tol)
      << ", \"ok\": " << (r.ok() ? "true" : "false") << "}";
  }
  f << "\n  ]\n}\n";
  MIXQ_CHECK(f.good(), ErrorCode::Io, "bench: cannot write ", path);
}

void print_header(const MoeBenchDriver& d, int settle_ms) {
  std::printf("mixq bench --op moe: backend %s, %s\nbaseline: %s\n", d.backend().c_str(),
              d.device().c_str(), d.baseline_name().c_str());
  if (settle_ms > 0) std::printf("each figure timed after %d ms of its own untimed calls\n", settle_ms);
  if (d.read_ceiling_gb_s() > 0) std::printf("read ceiling: %.0f GB/s\n", d.read_ceiling_gb_s());
  std::printf("%-14s %5s %-7s %-12s %5s %6s %10s %10s %10s %10s %10s %7s %9s %8s %6s %8s %9s %s\n",
              "model", "T", "routing", "scheme", "act", "rows", "gate_up_us", "down_us",
              "mlp_us", "mlp_graph", "base_us", "speedup", "MB_touch", "GB/s", "%ceil", "TFLOP/s",
              "rel_err", "ok");
}

void print_row(const Row& r) {
  if (r.unsupported) {
    std::printf("%-14s %5lld %-7s %-12s unsupported: %s\n", r.model.name.c_str(),
                static_cast<long long>(r.T), r.routing.c_str(), r.scheme.c_str(), r.note.c_str());
    return;
  }
  std::printf("%-14s %5lld %-7s %-12s %5lld %6lld %10.1f %10.1f %10.1f %10.1f %10.1f %7.2f %9.1f "
              "%8.1f %6.1f %8.2f %9.2e %s\n",
              r.model.name.c_str(), static_cast<long long>(r.T), r.routing.c_str(),
              r.scheme.c_str(), static_cast<long long>(r.active),
              static_cast<long long>(r.max_rows), r.t.gate_up_us, r.t.down_us, r.t.mlp_us,
              r.t.mlp_graph_us, r.t.baseline_us, r.speedup, r.bytes / 1e6, r.gb_s, r.ceiling_pct, r.tflop_s,
              r.rel_err, r.ok() ? "ok" : "FAIL");
  std::fflush(stdout);
}

}  // namespace

int run_bench_moe(int argc, char** argv) {
  Args a("bench", argc, argv,
         {{"--op", "", true}, {"--models", "", true}, {"--m", "", true},
          {"--routing", "", true}, {"--schemes", "", true}, {"--backend", "", true},
          {"--reps", "", true}, {"--warmup", "", true}, {"--threads", "", true},
          {"--act", "", true}, {"--json", "", true}, {"--quick", "", false},
          {"--seed", "", true}, {"--no-progress", "", false}, {"--tol-scale", "", true},
          {"--tune", "", true}, {"--settle-ms", "", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(0, 0, "no positional arguments");
  if (a.get("--op") != "moe") usage_fail("bench", "--op must be moe or conv2d, got '" + a.get("--op") + "'");
  if (a.has("--json")) check_outputs("bench", {{"--json", a.get("--json")}}, {});
  const bool quick = a.has("--quick");

  std::vector<MoeModel> models;
  if (a.has("--models")) {
    for (const std::string& n : split(a.get("--models"), ',')) {
      std::vector<MoeModel> all = kModels;
      all.insert(all.end(), kQuickModels.begin(), kQuickModels.end());
      auto it = std::find_if(all.begin(), all.end(), [&](const MoeModel& m) { return m.name == n; });
      if (it == all.end())
        usage_fail("bench", "--models: '" + n + "' is not one of deepseek-v3, qwen3-30b-a3b, "
                            "mixtral-8x7b, tiny, tiny-wide");
      models.push_back(*it);
    }
  } else {
    models = quick ? kQuickModels : kModels;
  }
  const std::vector<int64_t> ts = parse_int_list(
      "bench", "--m", a.get("--m", quick ? "1,8,33" : "1,8,64,512,4096"), 1, 1 << 20);
  std::vector<std::string> routings = split(a.get("--routing", "uniform,skewed"), ',');
  for (const std::string& r : routings)
    if (r != "uniform" && r != "skewed")
      usage_fail("bench", "--routing: '" + r + "' is not uniform or skewed");
  TimingPolicy policy;
  policy.reps = static_cast<int>(a.get_int("--reps", quick ? 3 : 10, 1, 100000));
  policy.warmup = static_cast<int>(a.get_int("--warmup", 1, 0, 100000));
  policy.min_reps = 1;
  policy.budget_s = quick ? 0.02 : 0.3;
  const uint64_t seed = static_cast<uint64_t>(a.get_int("--seed", 1, 0, int64_t(1) << 62));
  const int threads = static_cast<int>(a.get_int("--threads", 0, 0, 4096));
  const double tol_scale = parse_tol_scale(a);
  const DType cuda_act = parse_cuda_activation(a, DType::BF16);
  const Tuning tuning = parse_tuning(a);
  const std::string backend = a.get("--backend", "auto");
  if (backend != "auto" && backend != "cpu" && backend != "cuda")
    usage_fail("bench", "--backend must be auto, cpu or cuda for --op moe, got '" + backend + "'");
  std::unique_ptr<MoeBenchDriver> driver;
  if (backend == "cuda" || (backend == "auto" && cuda_available())) {
    driver = make_cuda_moe_driver(0, cuda_act, tuning);
    MIXQ_CHECK(driver || backend == "auto", ErrorCode::Unsupported,
               "bench: the CUDA backend is not available (built without CUDA, or no usable GPU)");
  }
  if (!driver) driver = make_cpu_moe_driver(threads, tuning);
  policy.settle_s = parse_settle_s(a, driver->backend(), quick ? 0 : 200);

  std::vector<BenchScheme> schemes;
  for (const std::string& n : a.has("--schemes") ? split(a.get("--schemes"), ',')
                                                 : driver->default_schemes()) {
    try {
      schemes.push_back(parse_bench_scheme(n));
    } catch (const Error& e) {
      usage_fail("bench", std::string(e.what()).substr(std::strlen("mixq: ")));
    }
  }

  std::string command = "mixq";
  for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
  const DType act_dtype = driver->activation_dtype();
  const double ceiling = driver->read_ceiling_gb_s();
  const auto t_start = std::chrono::steady_clock::now();
  const int settle_ms = static_cast<int>(policy.settle_s * 1e3 + 0.5);
  print_header(*driver, settle_ms);
  std::vector<Row> rows;
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const MoeModel& m = models[mi];
    const int64_t E = m.experts, H = m.hidden, I = m.intermediate, k = m.topk;
    int64_t max_t = 1;
    for (int64_t t : ts) max_t = std::max(max_t, t);
    std::vector<float> x(max_t * H);
    fill_random_normal(x.data(), max_t * H, 1.0f, seed * 1000 + mi);
    round_to_dtype(x.data(), max_t * H, act_dtype);
    // Dense baseline weights: a few distinct experts reused round-robin (expert e uses copy
    // e % copies; enough copies that consecutive experts never share one in the caches).
    const int64_t copies = std::min<int64_t>(E, 16);
    std::vector<std::vector<float>> dgu(copies), ddn(copies);
    for (int64_t c = 0; c < copies; ++c) {
      dgu[c].resize(2 * I * H);
      ddn[c].resize(H * I);
      fill_random_normal(dgu[c].data(), 2 * I * H, 0.02f, seed * 1000 + mi * 64 + c + 100);
      fill_random_normal(ddn[c].data(), H * I, 0.02f, seed * 1000 + mi * 64 + c + 300);
    }
    for (const BenchScheme& sc : schemes) {
      std::vector<QuantizedWeight> gu, dn;
      for (int64_t e = 0; e < E; ++e) {
        gu.push_back(random_quantized_weight(2 * I, H, sc.weight, seed * 100000 + mi * 1000 + e));
        dn.push_back(random_quantized_weight(H, I, sc.weight, seed * 100000 + mi * 1000 + 500 + e));
      }
      bool unsupported = false;
      std::string why;
      for (const std::string& routing : routings) {
        for (int64_t T : ts) {
          Row r;
          r.model = m, r.T = T, r.routing = routing, r.scheme = sc.name;
          r.act = act_quant_name(sc.act);
          if (unsupported) {
            r.unsupported = true, r.note = why;
            print_row(r);
            rows.push_back(r);
            continue;
          }
          std::vector<int32_t> ids;
          std::vector<float> w;
          make_routing(T, m, routing == "skewed", seed * 7919 + T * 31 + mi, &ids, &w);
          std::vector<int32_t> offsets(E + 1, 0);
          for (int32_t e : ids) ++offsets[e + 1];
          for (int64_t e = 0; e < E; ++e) {
            r.active += offsets[e + 1] ? 1 : 0;
            r.max_rows = std::max<int64_t>(r.max_rows, offsets[e + 1]);
            offsets[e + 1] += offsets[e];
          }
          std::vector<float> y(T * H, std::numeric_limits<float>::quiet_NaN());
          const MoeProblem p{T, k, x.data(), ids.data(), w.data(), offsets.data(), y.data()};
          try {
            r.t = driver->run(m, gu, dn, sc.act, dgu, ddn, p, policy);
          } catch (const Error& e) {
            if (e.code() != ErrorCode::Unsupported) throw;
            unsupported = true, why = one_line(e.what());
            r.unsupported = true, r.note = why;
            print_row(r);
            rows.push_back(r);
            continue;
          }
          for (int64_t e = 0; e < E; ++e)
            if (offsets[e + 1] > offsets[e]) r.bytes += gu[e].storage_bytes() + dn[e].storage_bytes();
          const double s = r.t.mlp_us * 1e-6;
          r.gb_s = s > 0 ? r.bytes / s * 1e-9 : 0;
          r.ceiling_pct = ceiling > 0 ? 100.0 * r.gb_s / ceiling : 0;
          r.tflop_s = s > 0 ? 2.0 * T * k * (2 * I * H + H * I) / s * 1e-12 : 0;
          r.speedup = r.t.mlp_us > 0 ? r.t.baseline_us / r.t.mlp_us : 0;
          // float64 check on up to 2 tokens (the first and the last)
          double num2 = 0, den2 = 0;
          for (int64_t t : {int64_t(0), T - 1}) {
            const auto ref = reference_token(x.data() + t * H, ids.data() + t * k,
                                             w.data() + t * k, m, gu, dn, act_dtype);
            for (int64_t n = 0; n < H; ++n) {
              const double d = double(y[t * H + n]) - ref[n];
              num2 += std::isfinite(d) ? d * d : std::numeric_limits<double>::infinity();
              den2 += ref[n] * ref[n];
            }
            if (T == 1) break;
          }
          r.rel_err = std::sqrt(num2 / std::max(den2, 1e-300));
          r.tol = tol_scale * moe_tolerance(sc.act, act_dtype);
          print_row(r);
          rows.push_back(r);
        }
      }
      driver->release();
    }
  }
  std::printf("\ntotal bench time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  if (a.has("--json")) {
    formats::OutputFile json(a.get("--json"));
    write_json(json.temp_path(), command, *driver, settle_ms, rows);
    json.commit();
  }
  int failed = 0;
  for (const Row& r : rows) failed += r.ok() ? 0 : 1;
  if (failed) {
    std::fprintf(stderr, "mixq bench: %d result(s) exceed their error tolerance (marked FAIL)\n",
                 failed);
    return 1;
  }
  return 0;
}

}  // namespace mixq::cli
