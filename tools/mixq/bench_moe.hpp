// `mixq bench --op moe`: the routed-experts MLP (mixq::moe_mlp and its two grouped GEMMs) on the
// expert shapes of real MoE models, with synthetic top-k routing. The host half (bench_moe.cpp)
// generates weights, routing and activations, checks outputs against a float64 reference on
// sampled tokens and prints the table / JSON; a MoeBenchDriver (bench_moe_cpu.cpp,
// bench_moe_cuda.cpp) owns the device: preparation, timing, and its dense baseline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_driver.hpp"
#include "mixq/moe.hpp"

namespace mixq::bench {

struct MoeModel {
  std::string name;
  int64_t experts, topk, hidden, intermediate;
};

// One routed batch on the host.
struct MoeProblem {
  int64_t T = 0, topk = 0;
  const float* x = nullptr;             // [T][hidden], representable in the activation dtype
  const int32_t* ids = nullptr;         // [T][topk]
  const float* weights = nullptr;       // [T][topk]
  const int32_t* offsets = nullptr;     // [E + 1] of the contiguous layout (moe_route's)
  float* y = nullptr;                   // [T][hidden], filled by the driver
};

struct MoeTimes {
  double gate_up_us = 0, down_us = 0, mlp_us = 0, baseline_us = 0;
  // CUDA: the same calls replayed in a CUDA graph (no launch gaps, as a serving engine's decode
  // step runs them), each after an L2 flush whose own time is subtracted; 0 where not measured
  double gate_up_graph_us = 0, down_graph_us = 0, mlp_graph_us = 0;
  std::string kernel_gate_up, kernel_down;
  double setup_s = 0;
};

class MoeBenchDriver {
 public:
  virtual ~MoeBenchDriver() = default;
  virtual std::string backend() const = 0;
  virtual std::string device() const = 0;
  virtual std::string baseline_name() const = 0;
  virtual DType activation_dtype() const = 0;
  virtual std::vector<std::string> default_schemes() const = 0;
  // The measured streaming-read ceiling in GB/s (0 where not measured: CPU).
  virtual double read_ceiling_gb_s() const = 0;
  virtual int threads() const { return 0; }
  // Prepares the stacks, times grouped gate_up, grouped down, the whole moe_mlp (leaving its
  // output in p.y) and the dense baseline over the same routing. `dense_gate_up` / `dense_down`
  // are f32 weights of `dense_count` experts; expert e's baseline uses copy e % dense_count.
  // Throws Error(Unsupported) for a scheme the backend does not run.
  virtual MoeTimes run(const MoeModel& m, const std::vector<QuantizedWeight>& gate_up,
                       const std::vector<QuantizedWeight>& down, ActQuant act,
                       const std::vector<std::vector<float>>& dense_gate_up,
                       const std::vector<std::vector<float>>& dense_down, const MoeProblem& p,
                       const TimingPolicy& policy) = 0;
  // Drops the prepared stacks of the last run.
  virtual void release() {}
};

// tuning: PrepareOptions::tuning of the prepared stacks (--tune).
std::unique_ptr<MoeBenchDriver> make_cpu_moe_driver(int threads, const Tuning& tuning);
// nullptr without CUDA (bench_moe_cpu.cpp defines the fallback) or without a usable GPU.
std::unique_ptr<MoeBenchDriver> make_cuda_moe_driver(int device, DType activation, const Tuning& tuning);

}  // namespace mixq::bench

namespace mixq::cli {
int run_bench_moe(int argc, char** argv);  // bench_moe.cpp
}
