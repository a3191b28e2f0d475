// PreparedWeight (a weight repacked for one backend) and prepare() for linear and conv weights.
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/tuning.hpp"

namespace mixq_py {

namespace {

// The C++ API prints act modes (act_quant_name) but has no parser; these are its names plus the
// CLI's short forms (`--act int8|fp8`).
mixq::ActQuant parse_act(const std::string& name) {
  if (name == "none" || name == "weight-only") return mixq::ActQuant::None;
  if (name == "int8" || name == "int8-block") return mixq::ActQuant::Int8Block;
  if (name == "fp8" || name == "fp8-block") return mixq::ActQuant::Fp8Block;
  if (name == "int8-per-tensor") return mixq::ActQuant::Int8PerTensor;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, "act '", name,
            "' is not one of none, int8 (int8-block), fp8 (fp8-block), int8-per-tensor");
}

}  // namespace

mixq::PrepareOptions prepare_options(const std::string& backend, const std::string& act,
                             int64_t act_block, int device, const std::string& force_kernel,
                             float in_scale, int in_zero, float out_scale, int out_zero,
                             const std::string& tuning) {
  mixq::PrepareOptions o;
  o.backend = mixq::parse_backend(backend);
  o.act = parse_act(act);
  o.act_block = act_block;
  o.device = device;
  o.force_kernel = force_kernel;
  o.input_quant = {in_scale, in_zero};
  o.output_quant = {out_scale, out_zero};
  // "key=value,..." over the process default (MIXQ_TUNE): mixq/tuning.hpp
  if (!tuning.empty()) o.tuning = mixq::Tuning::parse(tuning, mixq::default_tuning());
  MIXQ_CHECK_ARG(device >= 0, "device (", device, ") must be >= 0");
  return o;
}

namespace {

mixq::ConvKOrder parse_order(const std::string& s) {
  if (s == "cikhkw") return mixq::ConvKOrder::CiKhKw;
  if (s == "khkwci") return mixq::ConvKOrder::KhKwCi;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, "order '", s, "' is not one of cikhkw, khkwci");
}

#define MIXQ_PY_PREPARE_ARGS                                                                 \
  nb::arg("backend") = "auto", nb::arg("act") = "none", nb::arg("act_block") = 0,            \
  nb::arg("device") = 0, nb::arg("force_kernel") = "", nb::arg("input_scale") = 1.0f,        \
  nb::arg("input_zero") = 0, nb::arg("output_scale") = 1.0f, nb::arg("output_zero") = 0,        \
  nb::arg("tuning") = ""

}  // namespace

void bind_prepare(nb::module_& m) {
  nb::class_<Prepared>(m, "PreparedWeight", "A weight prepared for one backend.")
      .def_prop_ro("backend", [](const Prepared& p) { return std::string(mixq::backend_name(p.weight.backend())); })
      .def_prop_ro("act", [](const Prepared& p) { return std::string(mixq::act_quant_name(p.weight.act())); })
      .def_prop_ro("N", [](const Prepared& p) { return p.weight.N(); })
      .def_prop_ro("K", [](const Prepared& p) { return p.weight.K(); })
      .def_prop_ro("is_conv", [](const Prepared& p) { return p.weight.is_conv(); })
      .def_ro("device", &Prepared::device, "CUDA ordinal the weight was prepared for (0 on CPU).")
      .def_prop_ro("conv_geometry", [](const Prepared& p) -> nb::object {
            if (!p.weight.is_conv()) return nb::none();
            return nb::make_tuple(p.ci, p.kh, p.kw);
          }, "(Ci, Kh, Kw) of a convolution weight, None for a linear one.")
      .def("kernel_name", [](const Prepared& p, int64_t M, const std::string& dtype) {
             return kernel_name_for(p.weight, M, dtype);
           }, nb::arg("M"), nb::arg("dtype") = "",
           "The kernel a call with M rows of `dtype` activations runs ('' = the weight's "
           "default activation dtype).")
      .def("workspace_size", [](const Prepared& p, int64_t M) {
             return mixq::linear_workspace_size(p.weight, M);
           }, nb::arg("M"));

  m.def("prepare", [](const mixq::QuantizedWeight& w, const std::string& backend,
                      const std::string& act, int64_t act_block, int device,
                      const std::string& force_kernel, float in_scale, int in_zero,
                      float out_scale, int out_zero, const std::string& tuning) {
        const auto o = prepare_options(backend, act, act_block, device, force_kernel, in_scale, in_zero,
                               out_scale, out_zero, tuning);
        nb::gil_scoped_release release;
        return Prepared{mixq::prepare(w, o), device};
      }, nb::arg("w"), MIXQ_PY_PREPARE_ARGS);

  m.def("prepare_conv", [](const mixq::QuantizedWeight& w, int64_t ci, int64_t kh, int64_t kw,
                           const std::string& order, const std::string& backend,
                           const std::string& act, int64_t act_block, int device,
                           const std::string& force_kernel, float in_scale, int in_zero,
                           float out_scale, int out_zero, const std::string& tuning) {
        const auto o = prepare_options(backend, act, act_block, device, force_kernel, in_scale, in_zero,
                               out_scale, out_zero, tuning);
        mixq::ConvWeight cw{w, ci, kh, kw, parse_order(order)};
        nb::gil_scoped_release release;
        return Prepared{mixq::prepare(cw, o), device, ci, kh, kw};
      }, nb::arg("w"), nb::arg("ci"), nb::arg("kh"), nb::arg("kw"), nb::arg("order"),
      MIXQ_PY_PREPARE_ARGS);
}

}  // namespace mixq_py
