// Options every `mixq bench` mode reads the same way (the synthetic layers, `bench FILE`,
// `--op moe`): one parser each, so the three modes accept and refuse the same values.
#pragma once

#include "bench_driver.hpp"
#include "cli.hpp"

#include <string>

namespace mixq::cli {

// --tol-scale X (> 0, finite; default 1).
double parse_tol_scale(const Args& a);
// --act f16|bf16 (the CUDA activation and dense-baseline dtype); `fallback` when absent.
DType parse_cuda_activation(const Args& a, DType fallback);
// --tune K=V,... over MIXQ_TUNE (default_tuning()).
Tuning parse_tuning(const Args& a);
// --threads, --act (default f16), --tune, --force-kernel.
bench::DriverConfig parse_driver_config(const Args& a);
// --settle-ms N (0 ... 60000; default `fallback_ms`) as seconds for TimingPolicy::settle_s where
// the driver's backend is "cuda"; 0 for the others (their calls do not move a GPU's clocks).
double parse_settle_s(const Args& a, const std::string& driver_backend, int fallback_ms);

}  // namespace mixq::cli
