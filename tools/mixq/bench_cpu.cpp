// The CPU bench driver (also serves the float64 reference backend), the shared timing helpers,
// and the CUDA-driver fallback for builds without CUDA.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "bench_driver.hpp"
#include "mixq/error.hpp"

// The optimized CPU backend's dense FP32 GEMM (Y[M][N] = X[M][K] . W[N][K]^T), the baseline.
#include "cpu/thread_pool.hpp"
#include "mixq/cpu.hpp"

namespace mixq::bench {

BenchScheme parse_bench_scheme(const std::string& name) {
  BenchScheme s;
  s.name = name;
  std::string weight = name;
  const size_t colon = name.find(':');
  if (colon != std::string::npos) {
    weight = name.substr(0, colon);
    const std::string act = name.substr(colon + 1);
    if (act == "int8") s.act = ActQuant::Int8Block;
    else if (act == "fp8") s.act = ActQuant::Fp8Block;
    else
      MIXQ_FAIL(ErrorCode::InvalidArgument, "bench scheme '", name, "': activation mode '", act,
                "' is not int8 or fp8 (e.g. w8g128:int8, fp8b128:fp8)");
  }
  s.weight = parse_scheme(weight);
  if (s.act == ActQuant::Int8Block)
    MIXQ_CHECK_ARG(s.weight.code_type == DType::I8 && s.weight.zero_kind != ZeroKind::ZeroPoint,
                   "bench scheme '", name, "': int8 activations need i8 weights (w8g*, w8g*asym)");
  if (s.act == ActQuant::Fp8Block)
    MIXQ_CHECK_ARG(s.weight.code_type == DType::F8E4M3 || s.weight.code_type == DType::I4 ||
                       s.weight.code_type == DType::U4,
                   "bench scheme '", name, "': fp8 activations need fp8b128 weights or 4-bit ones "
                   "(W4A8: w4g128:fp8, w4g128zp:fp8)");
  return s;
}

double error_tolerance(ActQuant act, DType activation_dtype) {
  double t = activation_dtype == DType::F32 ? 1e-5 : activation_dtype == DType::F16 ? 2e-3 : 1e-2;
  if (act == ActQuant::Int8Block) t = std::max(t, 1e-2);
  if (act == ActQuant::Fp8Block) t = std::max(t, 4e-2);
  return t;
}

double emulated_error_tolerance(ActQuant act, DType activation_dtype) {
  double t = error_tolerance(ActQuant::None, activation_dtype);
  if (act != ActQuant::None) t = std::max(t, 2e-3);
  return t;
}

double i8dot_error_tolerance(DType activation_dtype) {
  return std::max(1e-2, error_tolerance(ActQuant::None, activation_dtype));
}

double i8dot_emulated_error_tolerance(DType activation_dtype) {
  return std::max(1e-4, error_tolerance(ActQuant::None, activation_dtype));
}

int timed_reps(const TimingPolicy& p, double first_call_s) {
  int n = p.reps;
  if (first_call_s > 0) n = std::min<int>(n, static_cast<int>(p.budget_s / first_call_s));
  return std::max(n, std::min(p.min_reps, p.reps));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

double wall_time_call(const std::function<void(int)>& call, int i) {
  const auto t0 = std::chrono::steady_clock::now();
  call(i);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TimedRun time_calls(const std::function<void(int)>& call,
                    const std::function<double(const std::function<void(int)>&, int)>& timer,
                    const TimingPolicy& policy) {
  int index = 0;
  double first = 0;
  std::vector<double> samples;
  for (int w = 0; w < policy.warmup; ++w) {
    first = timer(call, index++);
    if (first >= policy.slow_call_s) {
      samples.push_back(first);
      break;
    }
  }
  if (samples.empty() && policy.warmup == 0) samples.push_back(first = timer(call, index++));
  if (first >= policy.slow_call_s) {
    TimedRun r;
    r.reps = 1;
    r.median_us = r.min_us = first * 1e6;
    return r;
  }
  const int reps = timed_reps(policy, first);
  while (static_cast<int>(samples.size()) < reps) samples.push_back(timer(call, index++));
  TimedRun r;
  r.reps = static_cast<int>(samples.size());
  r.median_us = median(samples) * 1e6;
  r.min_us = *std::min_element(samples.begin(), samples.end()) * 1e6;
  return r;
}

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  return "unknown CPU";
}


class CpuDriver final : public BenchDriver {
 public:
  CpuDriver(const DriverConfig& cfg, BackendKind kind)
      : threads_(cpu::resolve_num_threads(cfg.threads)), kind_(kind), tuning_(cfg.tuning),
        force_kernel_(cfg.force_kernel) {}

  std::string backend() const override { return backend_name(kind_); }
  std::string device() const override {
    return cpu_model() + ", " + std::to_string(threads_) + " thread(s)";
  }
  std::string baseline_name() const override {
    return "dense f32 GEMM (mixq::cpu::DenseGemmF32, packed once)";
  }
  DType activation_dtype() const override { return DType::F32; }
  int threads() const override { return threads_; }
  void release() override {
    prepared_.clear();
    cached_weight_ = nullptr;
    dense_.reset();
    dense_src_ = nullptr;
  }
  std::vector<std::string> default_schemes() const override {
    return {"w4g128", "w4g32asym", "w4g128zp", "w8g128", "fp8b128", "w8g128:int8", "fp8b128:fp8"};
  }
  int64_t cache_bytes() const override {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0) l3 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? l3 : (32l << 20);
  }

  TimedRun run_quantized(const QuantizedWeight& w, ActQuant act, int copies, const HostProblem& p,
                         const TimingPolicy& policy) override {
    const auto t0 = std::chrono::steady_clock::now();
    PrepareOptions opts;
    opts.backend = kind_;
    opts.act = act;
    opts.tuning = tuning_;  // --tune (e.g. cpu_activations=exact), --force-kernel
    if (kind_ == BackendKind::CPU) opts.force_kernel = force_kernel_;
    // The copies are prepared once per weight and reused for every M.
    // One prepared copy; small weights are evicted by flush_cache() before each timed call.
    const bool flush = copies > 1;
    copies = 1;
    if (cached_weight_ != &w || cached_act_ != act || prepared_.empty()) {
      prepared_.clear();
      prepared_.push_back(prepare(w, opts));
      cached_weight_ = &w;
      cached_act_ = act;
    }
    const std::vector<PreparedWeight>& prepared = prepared_;
    // Caller-owned workspace, touched now: no allocation or page faults inside the timed calls.
    const size_t ws_bytes = linear_workspace_size(prepared[0], p.M);
    HostBuffer ws(ws_bytes ? ws_bytes : 64);
    std::memset(ws.data(), 0, ws.size());
    const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ExecContext ctx;
    ctx.num_threads = threads_;
    ctx.workspace = ws_bytes ? ws.data() : nullptr;
    ctx.workspace_bytes = ws_bytes;
    const TensorView x(const_cast<float*>(p.x), DType::F32, {p.M, p.K});
    const TensorView y(p.y, DType::F32, {p.M, p.N});
    TimedRun r = time_calls(
        [&](int i) { linear(x, prepared[i % copies], y, Epilogue::none(), ctx); },
        [&](const std::function<void(int)>& call, int i) {
          if (flush) flush_cache();
          return wall_time_call(call, i);
        },
        policy);
    r.kernel = prepared[0].kernel_name(p.M);
    r.setup_s = setup;
    return r;
  }

  TimedRun run_dense(const float* w, int copies, const HostProblem& p,
                     const TimingPolicy& policy) override {
    // Packed once per weight (like the quantized weights), reused for every M; the cache is
    // flushed before each timed call when the weight would otherwise stay cached.
    const auto t0 = std::chrono::steady_clock::now();
    const bool flush = copies > 1;
    if (!dense_ || dense_src_ != w || dense_->N() != p.N || dense_->K() != p.K) {
      dense_.reset();
      dense_ = std::make_unique<cpu::DenseGemmF32>(w, p.N, p.K, threads_);
      dense_src_ = w;
    }
    std::fill(p.y, p.y + p.M * p.N, 0.f);  // grows the workspace outside the timed calls
    dense_->run(p.x, std::min<int64_t>(p.M, 1), p.y);
    const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    TimedRun r = time_calls(
        [&](int) { dense_->run(p.x, p.M, p.y); },
        [&](const std::function<void(int)>& call, int i) {
          if (flush) flush_cache();
          return wall_time_call(call, i);
        },
        policy);
    r.kernel = "dense_" + dense_->kernel_name(p.M).substr(4);  // "dense_avx512_f32gemv", ...
    r.setup_s = setup;
    return r;
  }

 private:
  int threads_;
  BackendKind kind_;
  Tuning tuning_;
  std::string force_kernel_;
  // The prepared current weight (keyed by its address and act mode, cleared by release()):
  // preparing once per layer, not once per M, keeps the run short.
  const QuantizedWeight* cached_weight_ = nullptr;
  ActQuant cached_act_ = ActQuant::None;
  std::vector<PreparedWeight> prepared_;
  std::unique_ptr<cpu::DenseGemmF32> dense_;  // the packed dense baseline weight
  const float* dense_src_ = nullptr;
  HostBuffer flush_buf_;

  // Evicts the last-level cache by reading a buffer twice its size (untimed), so that a small
  // weight is streamed from memory in the timed call as it would be in a real model.
  void flush_cache() {
    const size_t bytes = static_cast<size_t>(2 * cache_bytes());
    if (flush_buf_.size() != bytes) {
      flush_buf_ = HostBuffer(bytes);
      std::memset(flush_buf_.data(), 1, bytes);
    }
    const uint64_t* p = flush_buf_.as<const uint64_t>();
    uint64_t acc = 0;
    for (size_t i = 0; i < bytes / 8; i += 8) acc += p[i];  // one load per 64-byte line
    flush_sink_ = acc;
  }
  volatile uint64_t flush_sink_ = 0;
};

}  // namespace

std::unique_ptr<BenchDriver> make_cpu_bench_driver(const DriverConfig& cfg, BackendKind kind) {
  MIXQ_CHECK_ARG(kind == BackendKind::CPU || kind == BackendKind::Reference,
                 "make_cpu_bench_driver: backend ", backend_name(kind));
  return std::make_unique<CpuDriver>(cfg, kind);
}

#ifndef MIXQ_WITH_CUDA
std::unique_ptr<BenchDriver> make_cuda_bench_driver(const DriverConfig&) { return nullptr; }
#endif

}  // namespace mixq::bench
