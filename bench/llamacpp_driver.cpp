// llama.cpp's side of bench/llamacpp_compare.py: times ggml_mul_mat(W, X) for 2-D weights of a
// GGUF file on one ggml backend (CPU with the given threads, or CUDA), the way llama.cpp itself
// would run them, and writes one JSON document of medians.
//
// Built against a llama.cpp source tree by scripts/build_llamacpp.sh (links only ggml).
//
// What "the way llama.cpp runs them" means here:
//  - Weight placement: llama.cpp's model loader gives each weight the first buffer type of its
//    list that supports the MUL_MAT with a 512-column activation: on the CPU, the CPU backend's
//    extra buffer types in their order (AMX where the build and CPU have it, then CPU_REPACK,
//    which stores Q4_0 / Q4_K / IQ4_NL / Q8_0 ... interleaved for the SIMD kernels), then the
//    plain CPU buffer. The same test picks the buffer here, and the JSON names the one chosen.
//  - The op: Y = ggml_mul_mat(W[K, N], X[K, M]) in F32, computed by ggml_backend_graph_compute on
//    a backend made from the device, with ggml_backend_set_n_threads on the CPU.
//    --exclude-buffer NAME,... leaves buffer types out of that list (e.g. AMX on a machine that
//    advertises AMX but faults on its tile instructions, as some virtual machines do).
//  - Cold weights, as in mixq bench: on the CPU the last-level cache is evicted (a read of twice
//    its size, untimed) before each timed call; on a GPU one timed graph holds >= 16 mul_mats
//    that rotate among copies of the weight together exceeding --rotate-mib, and its time is
//    divided by the node count (test-backend-ops perf's method).
//  - Each result is checked: a few outputs against a float64 product of the activations and the
//    weight rows decoded by ggml's own to_float (llama.cpp quantizes the activations to 8 bits,
//    so the tolerance is loose: it catches a wrong or missing computation, not rounding).
//
//   llamacpp_driver --file F.gguf [--only SUBSTRING] [--m 1,16] [--threads T] [--backend cpu|cuda]
//                   [--reps N] [--warmup N] [--rotate-mib MIB] [--exclude-buffer NAME,...]
//                   [--json OUT]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

namespace {

struct Options {
  std::string file, only, json, backend = "cpu";
  std::vector<std::string> exclude_buffers;  // buffer type names left out of llama.cpp's list
  std::vector<int64_t> ms = {1};
  int threads = 1, reps = 20, warmup = 1;
  double rotate_mib = 256;
  double budget_s = 0.2;  // timed calls per case: at most `reps`, at least 2, about this long
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llamacpp_driver: %s\n", msg.c_str());
  std::exit(1);
}

int64_t parse_int(const std::string& opt, const std::string& s, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi)
    die(opt + ": '" + s + "' is not an integer in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "]");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--file") o.file = value();
    else if (a == "--only") o.only = value();
    else if (a == "--json") o.json = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(a, value(), 1, 4096));
    else if (a == "--reps") o.reps = static_cast<int>(parse_int(a, value(), 1, 100000));
    else if (a == "--warmup") o.warmup = static_cast<int>(parse_int(a, value(), 0, 100000));
    else if (a == "--exclude-buffer") {
      std::string s = value(), item;
      for (size_t p = 0; p <= s.size(); ++p) {
        if (p == s.size() || s[p] == ',') {
          if (!item.empty()) o.exclude_buffers.push_back(item);
          item.clear();
        } else {
          item += s[p];
        }
      }
    } else if (a == "--rotate-mib") o.rotate_mib = static_cast<double>(parse_int(a, value(), 0, 1 << 20));
    else if (a == "--m") {
      o.ms.clear();
      std::string s = value(), item;
      for (size_t p = 0; p <= s.size(); ++p) {
        if (p == s.size() || s[p] == ',') {
          o.ms.push_back(parse_int("--m", item, 1, 1 << 20));
          item.clear();
        } else {
          item += s[p];
        }
      }
    } else {
      die("unknown option '" + a + "'");
    }
  }
  if (o.file.empty()) die("--file F.gguf is required");
  if (o.backend != "cpu" && o.backend != "cuda") die("--backend must be cpu or cuda, got '" + o.backend + "'");
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Evicts the last-level cache by reading a buffer twice its size (the same rule as mixq bench's
// CPU driver), so that weights come from memory in the timed call as in a whole model.
class CacheFlusher {
 public:
  CacheFlusher() {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l3 <= 0) l3 = 32l << 20;
    buf_.assign(static_cast<size_t>(2 * l3) / 8, 1);
  }
  void flush() {
    uint64_t acc = 0;
    for (size_t i = 0; i < buf_.size(); i += 8) acc += buf_[i];  // one load per 64-byte line
    sink_ = acc;
  }
  size_t bytes() const { return buf_.size() * 8; }

 private:
  std::vector<uint64_t> buf_;
  volatile uint64_t sink_ = 0;
};

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o;
}

struct WeightSource {
  std::string name;
  ggml_type type;
  int64_t K, N;
  std::vector<uint8_t> bytes;  // the tensor exactly as stored in the file
};

// The buffer type llama.cpp's loader would give W: the first of `list` whose device supports
// MUL_MAT(W, X[K, 512]) with W in it (llama-model-loader.cpp weight_buft_supported).
ggml_backend_buffer_type_t choose_buffer_type(const WeightSource& w, ggml_backend_dev_t dev,
                                              const std::vector<ggml_backend_buffer_type_t>& list) {
  ggml_init_params ip = {ggml_tensor_overhead() * 8, nullptr, true};
  ggml_context* ctx = ggml_init(ip);
  ggml_tensor* t = ggml_new_tensor_2d(ctx, w.type, w.K, w.N);
  ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, w.K, 512);
  ggml_tensor* op = ggml_mul_mat(ctx, t, b);
  ggml_backend_buffer_type_t chosen = nullptr;
  for (ggml_backend_buffer_type_t buft : list) {
    t->buffer = ggml_backend_buft_alloc_buffer(buft, 0);
    const bool ok = ggml_backend_dev_supports_op(dev, op);
    ggml_backend_buffer_free(t->buffer);
    t->buffer = nullptr;
    if (ok) {
      chosen = buft;
      break;
    }
  }
  ggml_free(ctx);
  return chosen;
}

struct Result {
  std::string name, type, buffer;
  int64_t K, N, M;
  double median_us, min_us, rel_err;
  int reps, copies;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);

  // ---- the file: tensor infos without data (data is read per tensor, at its offset)
  ggml_context* meta = nullptr;
  gguf_init_params gp = {true, &meta};
  gguf_context* gg = gguf_init_from_file(o.file.c_str(), gp);
  if (!gg) die("cannot read '" + o.file + "' as GGUF");
  std::FILE* f = std::fopen(o.file.c_str(), "rb");
  if (!f) die("cannot open '" + o.file + "'");

  // ---- the device and its backend
  const bool gpu = o.backend == "cuda";
  ggml_backend_dev_t dev =
      ggml_backend_dev_by_type(gpu ? GGML_BACKEND_DEVICE_TYPE_GPU : GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!dev) die(std::string("no ") + (gpu ? "GPU" : "CPU") + " device in this ggml build");
  ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
  if (!backend) die("cannot initialise the backend of " + std::string(ggml_backend_dev_name(dev)));
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  if (!gpu) {
    auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    if (!set_threads) die("the CPU backend has no ggml_backend_set_n_threads");
    set_threads(backend, o.threads);
  }
  // llama.cpp's buffer type list for this device (make_cpu_buft_list / the GPU's own buffer).
  std::vector<ggml_backend_buffer_type_t> bufts;
  if (!gpu) {
    auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    if (get_extra)
      for (ggml_backend_buffer_type_t* e = get_extra(dev); e && *e; ++e) {
        const std::string n = ggml_backend_buft_name(*e);
        if (std::find(o.exclude_buffers.begin(), o.exclude_buffers.end(), n) == o.exclude_buffers.end())
          bufts.push_back(*e);
        else
          std::fprintf(stderr, "llamacpp_driver: buffer type %s left out (--exclude-buffer)\n", n.c_str());
      }
  }
  bufts.push_back(ggml_backend_dev_buffer_type(dev));
  std::string buffer_list;
  for (ggml_backend_buffer_type_t b : bufts) buffer_list += (buffer_list.empty() ? "" : ",") + std::string(ggml_backend_buft_name(b));

  CacheFlusher flusher;
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Result> results;
  int64_t max_m = 1;
  for (int64_t m : o.ms) max_m = std::max(max_m, m);

  for (int64_t ti = 0; ti < gguf_get_n_tensors(gg); ++ti) {
    const std::string name = gguf_get_tensor_name(gg, ti);
    if (!o.only.empty() && name.find(o.only) == std::string::npos) continue;
    const ggml_tensor* info = ggml_get_tensor(meta, name.c_str());
    if (!info || ggml_n_dims(info) != 2) continue;
    WeightSource w{name, gguf_get_tensor_type(gg, ti), info->ne[0], info->ne[1], {}};
    if (ggml_is_quantized(w.type) == false && w.type != GGML_TYPE_F16 && w.type != GGML_TYPE_BF16 &&
        w.type != GGML_TYPE_F32)
      continue;
    w.bytes.resize(gguf_get_tensor_size(gg, ti));
    const size_t at = gguf_get_data_offset(gg) + gguf_get_tensor_offset(gg, ti);
    if (std::fseek(f, static_cast<long>(at), SEEK_SET) != 0 ||
        std::fread(w.bytes.data(), 1, w.bytes.size(), f) != w.bytes.size())
      die("'" + o.file + "': cannot read the data of tensor '" + name + "'");

    ggml_backend_buffer_type_t buft = choose_buffer_type(w, dev, bufts);
    if (!buft) {
      std::fprintf(stderr, "llamacpp_driver: %s (%s): no buffer type supports MUL_MAT, skipped\n",
                   name.c_str(), ggml_type_name(w.type));
      continue;
    }
    // Cold weights on a GPU: enough copies to exceed the rotation budget (its L2 many times over).
    const int copies =
        gpu ? static_cast<int>(std::clamp<double>(std::ceil(o.rotate_mib * 1048576.0 / w.bytes.size()), 1, 16))
            : 1;
    ggml_init_params wp = {ggml_tensor_overhead() * (copies + 1), nullptr, true};
    ggml_context* wctx = ggml_init(wp);
    std::vector<ggml_tensor*> wt(copies);
    for (int c = 0; c < copies; ++c) wt[c] = ggml_new_tensor_2d(wctx, w.type, w.K, w.N);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    if (!wbuf) die("cannot allocate " + name + " in " + ggml_backend_buft_name(buft));
    for (int c = 0; c < copies; ++c) ggml_backend_tensor_set(wt[c], w.bytes.data(), 0, w.bytes.size());  // repacks

    // Float64 reference on a sample: up to 32 evenly spaced output columns, decoded by ggml.
    const auto* traits = ggml_get_type_traits(w.type);
    if (!traits->to_float) die(name + ": ggml has no to_float for " + ggml_type_name(w.type));
    std::vector<int64_t> cols;
    for (int64_t j = 0; j < std::min<int64_t>(32, w.N); ++j) cols.push_back(j * (w.N - 1) / std::max<int64_t>(1, std::min<int64_t>(32, w.N) - 1));
    std::vector<float> wrows(cols.size() * w.K);
    const size_t row_bytes = ggml_row_size(w.type, w.K);
    for (size_t c = 0; c < cols.size(); ++c)
      traits->to_float(w.bytes.data() + cols[c] * row_bytes, wrows.data() + c * w.K, w.K);

    std::vector<float> x(static_cast<size_t>(max_m * w.K));
    for (float& v : x) v = normal(gen);

    for (int64_t M : o.ms) {
      // CPU: one mul_mat per timed call, the cache evicted before it. GPU: one graph of `nodes`
      // mul_mats over the rotated weight copies, timed as a whole and divided by `nodes` (as
      // test-backend-ops perf does), so that host launch and synchronisation costs are amortised
      // the way a whole model's graph amortises them.
      const int nodes = gpu ? std::max(copies, 16) : 1;
      ggml_init_params gpar = {ggml_tensor_overhead() * (nodes + 8) + 2 * ggml_graph_overhead_custom(nodes + 4, false),
                               nullptr, true};
      ggml_context* gctx = ggml_init(gpar);
      ggml_tensor* xt = ggml_new_tensor_2d(gctx, GGML_TYPE_F32, w.K, M);
      std::vector<ggml_tensor*> yt(nodes);
      ggml_cgraph* check_graph = ggml_new_graph_custom(gctx, 4, false);
      ggml_cgraph* timed_graph = ggml_new_graph_custom(gctx, nodes + 4, false);
      for (int c = 0; c < nodes; ++c) {
        yt[c] = ggml_mul_mat(gctx, wt[c % copies], xt);
        ggml_build_forward_expand(timed_graph, yt[c]);
      }
      ggml_build_forward_expand(check_graph, yt[0]);
      ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors(gctx, backend);
      if (!gbuf) die("cannot allocate the activations of " + name);
      ggml_backend_tensor_set(xt, x.data(), 0, static_cast<size_t>(M * w.K) * sizeof(float));
      std::vector<float> y(static_cast<size_t>(M * w.N), std::nanf(""));
      ggml_backend_tensor_set(yt[0], y.data(), 0, y.size() * sizeof(float));  // poisoned

      auto compute = [&](ggml_cgraph* g) {
        const ggml_status st = ggml_backend_graph_compute(backend, g);
        if (st != GGML_STATUS_SUCCESS) die(name + ": graph compute failed (" + std::to_string(st) + ")");
        ggml_backend_synchronize(backend);
      };
      auto timed = [&] {
        if (!gpu) flusher.flush();
        const auto t0 = std::chrono::steady_clock::now();
        compute(timed_graph);
        return seconds_since(t0) / nodes;
      };
      compute(check_graph);
      ggml_backend_tensor_get(yt[0], y.data(), 0, y.size() * sizeof(float));
      double num = 0, den = 0;
      for (int64_t m : {int64_t(0), M - 1})
        for (size_t c = 0; c < cols.size(); ++c) {
          double ref = 0;
          for (int64_t k = 0; k < w.K; ++k) ref += double(x[m * w.K + k]) * wrows[c * w.K + k];
          const double d = y[m * w.N + cols[c]] - ref;
          num += d * d, den += ref * ref;
        }
      const double rel_err = den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0);
      if (!(rel_err <= 5e-2))
        die(name + " M=" + std::to_string(M) + ": relative error " + std::to_string(rel_err) +
            " against the float64 product (ggml's decode): the measurement would be meaningless");
      double first = timed();
      for (int r = 1; r < o.warmup; ++r) first = timed();
      int reps = o.reps;
      if (first > 0) reps = std::min<int>(reps, static_cast<int>(o.budget_s / first));
      reps = std::max(reps, std::min(2, o.reps));
      std::vector<double> samples;
      for (int r = 0; r < reps; ++r) samples.push_back(timed());
      Result res{name, ggml_type_name(w.type), ggml_backend_buft_name(buft), w.K, w.N, M,
                 median(samples) * 1e6, *std::min_element(samples.begin(), samples.end()) * 1e6,
                 rel_err, reps, copies};
      std::fprintf(stderr, "%-28s %-7s %5lldx%-6lld M=%-4lld %10.1f us  (%s, err %.1e)\n", name.c_str(),
                   res.type.c_str(), (long long)w.K, (long long)w.N, (long long)M, res.median_us,
                   res.buffer.c_str(), rel_err);
      results.push_back(res);
      ggml_backend_buffer_free(gbuf);
      ggml_free(gctx);
    }
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
  }
  std::fclose(f);

  std::string out = "{\n  \"tool\": \"llamacpp_driver\",\n  \"ggml_version\": \"" +
                    json_escape(ggml_version()) + "\",\n  \"ggml_commit\": \"" +
                    json_escape(ggml_commit()) + "\",\n  \"backend\": \"" + o.backend +
                    "\",\n  \"device\": \"" + json_escape(ggml_backend_dev_description(dev)) +
                    "\",\n  \"threads\": " + std::to_string(gpu ? 0 : o.threads) +
                    ",\n  \"buffer_types\": \"" + json_escape(buffer_list) +
                    "\",\n  \"cache_flush_bytes\": " + std::to_string(gpu ? 0 : flusher.bytes()) +
                    ",\n  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"name\": \"%s\", \"type\": \"%s\", \"K\": %lld, \"N\": %lld, \"M\": %lld, "
                  "\"buffer\": \"%s\", \"time_us\": %.3f, \"min_us\": %.3f, \"reps\": %d, "
                  "\"copies\": %d, \"rel_err\": %.3e}",
                  i ? "," : "", json_escape(r.name).c_str(), r.type.c_str(), (long long)r.K,
                  (long long)r.N, (long long)r.M, json_escape(r.buffer).c_str(), r.median_us,
                  r.min_us, r.reps, r.copies, r.rel_err);
    out += buf;
  }
  out += "\n  ]\n}\n";
  if (o.json.empty() || o.json == "-") {
    std::fputs(out.c_str(), stdout);
  } else {
    std::FILE* jf = std::fopen(o.json.c_str(), "w");
    if (!jf || std::fputs(out.c_str(), jf) < 0 || std::fclose(jf) != 0) die("cannot write '" + o.json + "'");
  }
  ggml_backend_free(backend);
  gguf_free(gg);
  ggml_free(meta);
  return 0;
}
