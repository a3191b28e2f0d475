// The backend-facing half of `mixq bench`. A BenchDriver owns everything device-specific: it
// copies the host-generated weights and activations to its device (in its activation dtype),
// prepares the weight with mixq::prepare, times mixq::linear and its own dense baseline, and
// copies the output back for the error check. The host half (cmd_bench.cpp, bench_data.cpp)
// generates data, computes the float64 reference, and prints the table / JSON.
//
// Drivers: CPU (and the float64 reference backend) in bench_cpu.cpp; CUDA in bench_cuda.cpp,
// compiled only in CUDA builds. make_cuda_bench_driver() is declared here so that driver
// selection does not depend on the build; bench_cpu.cpp defines a fallback returning nullptr
// when MIXQ_WITH_CUDA is not defined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"

namespace mixq::bench {

// One benchmarked configuration: a weight scheme and how activations meet it.
// Names: the weight scheme ("w4g128", ...), weight-only; "w8g128:int8" = W8A8 with per-block
// INT8 activations (block = the weight's block_k); "fp8b128:fp8" = per-token 1x128 FP8
// activations (DeepSeek-V3 style).
struct BenchScheme {
  std::string name;
  QuantScheme weight;
  ActQuant act = ActQuant::None;
};
BenchScheme parse_bench_scheme(const std::string& name);  // throws InvalidArgument

// Documented error tolerances (relative Frobenius error on the sampled outputs):
//  - vs the float64 product of the activations given to the kernel and the dequantized weights:
//    weight-only with f32 activations 1e-5 (f32 accumulation over K <= 16K terms), f16
//    activations 2e-3, bf16 1e-2 (outputs may be rounded to the activation type);
//    INT8 block activations 1e-2 (8-bit per-block rounding of X, ~4e-3 on Gaussian data);
//    FP8 activations 4e-2 (e4m3 keeps 3 mantissa bits: ~2.5e-2 RMS relative rounding on
//    Gaussian data).
//  - vs the float64 product of the *quantized-then-dequantized* activations (the exact math of
//    the kernel; only accumulation order and a rare tie in activation rounding differ): 1e-5 for
//    f32 paths and 2e-3 for INT8/FP8 activation paths. This second check is what catches a
//    wrong scale or a dropped block, which the first tolerance would hide.
double error_tolerance(ActQuant act, DType activation_dtype);
double emulated_error_tolerance(ActQuant act, DType activation_dtype);
// The CPU backend's weight-only int8-dot kernel (default for M <= 8 with integer codes):
// activations are quantized to int8 per weight segment (<= 256 columns, scale + offset), so vs
// float64 it is held to the INT8-activation tolerance (1e-2; ~3e-3..6e-3 measured on Gaussian
// data), and vs the float64 product of the same int8-quantized activations to 1e-4 (only f32
// accumulation differs, ~1e-7 measured; a wrong scale, offset or dropped segment gives > 1e-2).
double i8dot_error_tolerance(DType activation_dtype);
double i8dot_emulated_error_tolerance(DType activation_dtype);

struct TimingPolicy {
  int warmup = 1;
  int reps = 20;           // at most this many timed calls ...
  int min_reps = 3;        // ... at least this many ...
  double budget_s = 0.25;  // ... and no more than fit in this time after the first call.
  // A first call slower than this is itself the one sample (a multi-second call is not
  // distorted by warm-up effects, and repeating it would blow the run's time budget).
  double slow_call_s = 0.5;
  // CUDA: the case's own calls, untimed, for at least this long before the timed ones.
  // Under sustained load the GPU's clocks fall to its power cap; a case timed first on a rested
  // GPU runs faster than it would inside a model (H200, 14336x4096 at M = 4096: cuBLAS timed
  // first 612 us, the same calls replayed after another case's 705), and the bench times the
  // baseline first. 0: none.
  double settle_s = 0;
};
// How many timed calls to make after a first (warm-up) call took `first_call_s` seconds.
int timed_reps(const TimingPolicy& p, double first_call_s);
double median(std::vector<double> v);

struct TimedRun {
  double median_us = 0;
  double min_us = 0;
  int reps = 0;
  std::string kernel;  // kernel name (PreparedWeight::kernel_name), or the baseline's name
  double setup_s = 0;  // untimed preparation (mixq::prepare of the copies, uploads)
  // The dense baseline on the same shape and M, its graph replays alternated with this run's
  // (CUDA): both see the same clocks and power state. 0 where the driver does not pair them.
  // Reported next to the baseline timed on its own (run_dense), which the ratios use: alternating
  // replays slow the baseline down by a few percent.
  double paired_baseline_us = 0;
};

// Host activations / outputs, row-major f32. x values are already representable in the driver's
// activation dtype (the host rounds them), so the reference sees exactly what the kernel sees.
struct HostProblem {
  int64_t M = 0, N = 0, K = 0;
  const float* x = nullptr;  // [M][K]
  float* y = nullptr;        // [M][N], filled by the driver
};

class BenchDriver {
 public:
  virtual ~BenchDriver() = default;
  virtual std::string backend() const = 0;        // "cpu", "ref", "cuda"
  virtual std::string device() const = 0;         // human-readable device description
  virtual std::string baseline_name() const = 0;  // "dense f32 GEMM (mixq::cpu::dense_gemm_f32)"
  virtual DType activation_dtype() const = 0;     // F32 on CPU; F16 on CUDA
  // The benchmark schemes the backend runs natively (the default --schemes list).
  virtual std::vector<std::string> default_schemes() const = 0;
  // Bytes of the last-level cache the weights should not stay in between timed calls; weights
  // smaller than ~2x this are rotated among several prepared copies.
  virtual int64_t cache_bytes() const = 0;
  // CPU threads the driver uses (0 when not applicable).
  virtual int threads() const { return 0; }
  // Microseconds a plain streaming read of `bytes` takes on the device, cold and timed as the
  // kernels are (the floor of a GEMV over that many weight bytes, ramp-up and tail included);
  // 0 where the driver does not measure it.
  virtual double plain_read_us(int64_t /*bytes*/) { return 0; }

  // Drivers may keep per-weight state (prepared copies, device uploads) between calls that pass
  // the same weight; the host calls release() before that weight is destroyed or changed. (The
  // CUDA driver keeps its device copies of the last dense weight past release(), for the paired
  // baseline of the quantized runs on the same shape; a dense weight of another shape replaces them.)
  virtual void release() {}

  // Prepares `copies` copies of w (for act), times mixq::linear on p, leaves the output in p.y.
  // `copies` is what rotating would need for a cold cache; a driver may instead flush its
  // caches before each timed call and prepare one copy (the CPU driver does: repacking is slow).
  // Throws mixq::Error(Unsupported) when the backend does not run this scheme.
  virtual TimedRun run_quantized(const QuantizedWeight& w, ActQuant act, int copies,
                                 const HostProblem& p, const TimingPolicy& policy) = 0;
  // Times the backend's dense baseline on W [N][K] f32 (converted to its dense dtype).
  virtual TimedRun run_dense(const float* w, int copies, const HostProblem& p,
                             const TimingPolicy& policy) = 0;
};

struct DriverConfig {
  int threads = 0;  // CPU threads (0 = MIXQ_NUM_THREADS or all)
  int device = 0;   // CUDA ordinal
  DType cuda_activation = DType::F16;  // CUDA: f16 or bf16 activations (and dense baseline)
  Tuning tuning = default_tuning();    // PrepareOptions::tuning of every prepared weight
  std::string force_kernel;            // PrepareOptions::force_kernel (empty: the planner's)
  // CUDA, W8A8 / FP8 schemes: time each layer as one of a chain of quantized layers, x arriving
  // quantized (the previous layer's output) and y leaving quantized for the next layer of the
  // same kind: linear(xq, w, yq). Weight-only schemes are timed as usual.
  bool chain = false;
};

std::unique_ptr<BenchDriver> make_cpu_bench_driver(const DriverConfig& cfg, BackendKind kind);
// nullptr when mixq was built without CUDA (bench_cpu.cpp) or no GPU is usable.
std::unique_ptr<BenchDriver> make_cuda_bench_driver(const DriverConfig& cfg);

// Times `call(i)` (i = call index, used to rotate weight copies): `warmup` untimed calls, then
// timed_reps() calls each timed by `timer(call, i)` (which returns seconds), median reported.
TimedRun time_calls(const std::function<void(int)>& call,
                    const std::function<double(const std::function<void(int)>&, int)>& timer,
                    const TimingPolicy& policy);
// The host wall-clock timer for synchronous (CPU) calls.
double wall_time_call(const std::function<void(int)>& call, int i);

}  // namespace mixq::bench
