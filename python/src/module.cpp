// mixq._mixq: the compiled core of the Python package. Thin: arguments are converted to the C++
// API's types without copies (views.hpp) and the C++ calls do all validation; the Python
// package (python/mixq) adds allocation of outputs/workspaces, streams and docstrings.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "mixq/cpu.hpp"
#include "mixq/tensor.hpp"

NB_MODULE(_mixq, m) {
  m.doc() = "mixq's compiled core (use the mixq package's functions instead)";
  mixq_py::register_error_translator(m);
  mixq_py::bind_weights(m);
  mixq_py::bind_prepare(m);
  mixq_py::bind_ops(m);
  mixq_py::bind_formats(m);
  mixq_py::bind_host_timing(m);
  mixq_py::bind_moe(m);
  mixq_py::bind_shard(m);
  mixq_py::bind_quantized(m);

  m.def("cuda_available", &mixq::cuda_available,
        "True when mixq was built with CUDA and a usable GPU exists.");
  m.def("cuda_device_count", &mixq::cuda_device_count, "Number of usable GPUs (0 without CUDA).");
  m.def("cpu_isa", [] { return std::string(mixq::cpu::isa_name()); },
        "The CPU kernel set in use: avx512, avx2vnni, avx2 or scalar.");
#ifdef MIXQ_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
}
