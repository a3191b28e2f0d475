// The pieces of the _mixq extension module, one function per concept (each in its own file).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "mixq/ops.hpp"

namespace mixq_py {

namespace nb = nanobind;

// A prepared weight and the device it was prepared for (mixq::PreparedWeight does not report
// its CUDA ordinal, and the Python layer needs it to pick streams and allocate outputs).
struct Prepared {
  mixq::PreparedWeight weight;
  int device = 0;
  int64_t ci = 0, kh = 0, kw = 0;  // convolution weights: the geometry conv2d needs for out=
};

// PrepareOptions from the Python keywords (prepare.cpp); shared by prepare and prepare_experts.
mixq::PrepareOptions prepare_options(const std::string& backend, const std::string& act,
                                     int64_t act_block, int device,
                                     const std::string& force_kernel, float in_scale,
                                     int in_zero, float out_scale, int out_zero,
                                     const std::string& tuning);

// The dtype named `name` (mixq's names: "f16", "bf16", ...), else an error naming the argument.
mixq::DType dtype_arg(const std::string& name, const char* arg);  // weights.cpp

// The kernel a call of `rows` rows of `dtype` activations runs on a prepared weight or a stack of
// experts ('' = its default activation dtype).
template <typename W>
std::string kernel_name_for(const W& w, int64_t rows, const std::string& dtype) {
  return dtype.empty() ? w.kernel_name(rows) : w.kernel_name(rows, dtype_arg(dtype, "dtype"));
}

void bind_weights(nb::module_& m);   // weights.cpp: QuantizedWeight, quantize, dequantize
void bind_prepare(nb::module_& m);   // prepare.cpp: PreparedWeight, prepare, queries
void bind_ops(nb::module_& m);       // ops.cpp: linear, conv2d
void bind_formats(nb::module_& m);   // formats.cpp: inspect, load, save
void bind_host_timing(nb::module_& m);  // host_timing.cpp: host cost of the C++ call
void bind_moe(nb::module_& m);       // moe.cpp: stacked experts, grouped linear, routing, moe_mlp
void bind_shard(nb::module_& m);     // shard.cpp: tensor-parallel shards of a weight
void bind_quantized(nb::module_& m);  // quantized.cpp: quantized activations, linear on them

}  // namespace mixq_py
