// Mixture-of-experts bindings (mixq/moe.hpp): PreparedExperts, prepare_experts, the grouped
// linear in both row layouts, the routing helpers, moe_mlp and the expert loaders. Arrays are
// borrowed without copies (views.hpp); the C++ calls validate values, shapes and devices. The GIL
// is released around every call (CUDA calls only enqueue work on the given stream).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/moe.hpp"
#include "placement.hpp"
#include "views.hpp"

namespace mixq_py {

namespace {

// A prepared expert stack and the CUDA ordinal it was prepared for.
struct Experts {
  mixq::PreparedExperts experts;
  int device = 0;
};

// Arrays must live where the experts do (CUDA: on their device); named in the message.
void check_place(const mixq::TensorView& v, const char* arg, const Experts& w) {
  mixq_py::check_place(v, arg, w.experts.backend(), w.device, "the experts are");
}

}  // namespace

void bind_moe(nb::module_& m) {
  nb::class_<Experts>(m, "PreparedExperts",
                      "E experts of one [N, K] shape and scheme, prepared for one backend.")
      .def_prop_ro("num_experts", [](const Experts& w) { return w.experts.num_experts(); })
      .def_prop_ro("N", [](const Experts& w) { return w.experts.N(); })
      .def_prop_ro("K", [](const Experts& w) { return w.experts.K(); })
      .def_prop_ro("backend", [](const Experts& w) {
        return std::string(mixq::backend_name(w.experts.backend()));
      })
      .def_prop_ro("act", [](const Experts& w) {
        return std::string(mixq::act_quant_name(w.experts.act()));
      })
      .def_ro("device", &Experts::device, "CUDA ordinal the experts were prepared for (0 on CPU).")
      .def("kernel_name", [](const Experts& w, int64_t rows, const std::string& dtype) {
             return kernel_name_for(w.experts, rows, dtype);
           }, nb::arg("rows"), nb::arg("dtype") = "",
           "The kernel a grouped call over `rows` rows in all of `dtype` activations runs ('' = the "
           "backend's default activation dtype).")
      .def("workspace_size", [](const Experts& w, int64_t rows) {
             return mixq::grouped_linear_workspace_size(w.experts, rows);
           }, nb::arg("rows"), "Scratch bytes of a grouped call over `rows` rows.")
      .def("__len__", [](const Experts& w) { return w.experts.num_experts(); });

  m.def("prepare_experts", [](const std::vector<mixq::QuantizedWeight>& experts,
                              const std::string& backend, const std::string& act,
                              int64_t act_block, int device, const std::string& force_kernel,
                              const std::string& tuning) {
        MIXQ_CHECK_ARG(!experts.empty(), "experts: the list is empty");
        const auto o = prepare_options(backend, act, act_block, device, force_kernel, 1.0f, 0,
                                       1.0f, 0, tuning);
        nb::gil_scoped_release release;
        return Experts{mixq::prepare_experts(experts, o), device};
      }, nb::arg("experts"), nb::arg("backend") = "auto", nb::arg("act") = "none",
      nb::arg("act_block") = 0, nb::arg("device") = 0, nb::arg("force_kernel") = "",
      nb::arg("tuning") = "");

  m.def("grouped_linear", [](nb::handle x, const Experts& w, nb::handle y, nb::handle offsets,
                             nb::handle counts, int64_t max_tokens, nb::handle bias,
                             nb::handle error, uintptr_t stream, nb::handle workspace,
                             int num_threads) {
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        Borrowed bo = borrow_optional(offsets, "offsets", Access::Read);
        Borrowed bc = borrow_optional(counts, "counts", Access::Read);
        Borrowed bb = borrow_optional(bias, "bias", Access::Read);
        Borrowed be = borrow_optional(error, "error", Access::Write);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        MIXQ_CHECK_ARG(bo.view.empty() != bc.view.empty(),
                       "offsets / counts: pass exactly one (offsets for the contiguous layout, "
                       "counts and max_tokens for the masked one)");
        check_place(bx.view, "x", w);
        check_place(by.view, "out", w);
        check_place(bo.view, "offsets", w);
        check_place(bc.view, "counts", w);
        check_place(bb.view, "bias", w);
        check_place(be.view, "error", w);
        check_place(bw.view, "workspace", w);
        mixq::MoeRows rows = bo.view.empty() ? mixq::MoeRows::masked(bc.view, max_tokens)
                                             : mixq::MoeRows::contiguous(bo.view);
        rows.error = be.view;
        mixq::Epilogue ep;
        ep.bias = bb.view;
        const mixq::ExecContext ctx = exec_context(stream, bw, num_threads);
        nb::gil_scoped_release release;
        mixq::grouped_linear(bx.view, w.experts, by.view, rows, ep, ctx);
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("offsets").none(),
      nb::arg("counts").none(), nb::arg("max_tokens"), nb::arg("bias").none(),
      nb::arg("error").none(), nb::arg("stream"), nb::arg("workspace").none(),
      nb::arg("num_threads"));

  m.def("moe_route_workspace_size", &mixq::moe_route_workspace_size, nb::arg("num_experts"));

  m.def("moe_route", [](nb::handle ids, int64_t num_experts, nb::handle offsets,
                        nb::handle sorted_pairs, nb::handle pair_position, nb::handle error,
                        uintptr_t stream, nb::handle workspace) {
        Borrowed bi = borrow(ids, "topk_ids", Access::Read);
        Borrowed bo = borrow(offsets, "offsets", Access::Write);
        Borrowed bs = borrow(sorted_pairs, "permutation", Access::Write);
        Borrowed bp = borrow(pair_position, "inverse", Access::Write);
        Borrowed be = borrow_optional(error, "error", Access::Write);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        const mixq::ExecContext ctx = exec_context(stream, bw, 0);
        nb::gil_scoped_release release;
        mixq::moe_route(bi.view, num_experts, bo.view, bs.view, bp.view, be.view, ctx);
      }, nb::arg("topk_ids"), nb::arg("num_experts"), nb::arg("offsets"),
      nb::arg("sorted_pairs"), nb::arg("pair_position"), nb::arg("error").none(),
      nb::arg("stream"), nb::arg("workspace").none());

  m.def("moe_gather", [](nb::handle x, nb::handle sorted_pairs, int64_t topk, nb::handle xs,
                         uintptr_t stream) {
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed bs = borrow(sorted_pairs, "permutation", Access::Read);
        Borrowed bo = borrow(xs, "out", Access::Write);
        mixq::ExecContext ctx;
        ctx.stream = reinterpret_cast<void*>(stream);
        nb::gil_scoped_release release;
        mixq::moe_gather(bx.view, bs.view, topk, bo.view, ctx);
      }, nb::arg("x"), nb::arg("sorted_pairs"), nb::arg("topk"), nb::arg("out"),
      nb::arg("stream"));

  m.def("moe_scatter_add", [](nb::handle ys, nb::handle pair_position, nb::handle weights,
                              nb::handle y, bool accumulate, uintptr_t stream) {
        Borrowed bys = borrow(ys, "ys", Access::Read);
        Borrowed bp = borrow(pair_position, "inverse", Access::Read);
        Borrowed bw = borrow(weights, "topk_weights", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        mixq::ExecContext ctx;
        ctx.stream = reinterpret_cast<void*>(stream);
        nb::gil_scoped_release release;
        mixq::moe_scatter_add(bys.view, bp.view, bw.view, by.view, accumulate, ctx);
      }, nb::arg("ys"), nb::arg("pair_position"), nb::arg("topk_weights"), nb::arg("out"),
      nb::arg("accumulate"), nb::arg("stream"));

  m.def("moe_mlp_workspace_size", [](const Experts& gu, const Experts& down, int64_t tokens,
                                     int64_t topk, const std::string& dtype) {
        return mixq::moe_mlp_workspace_size(gu.experts, down.experts, tokens, topk, dtype_arg(dtype, "x"));
      }, nb::arg("w_gate_up"), nb::arg("w_down"), nb::arg("tokens"), nb::arg("topk"),
      nb::arg("dtype"));

  m.def("moe_mlp", [](nb::handle x, nb::handle ids, nb::handle weights, const Experts& gu,
                      const Experts& down, nb::handle y, const std::string& activation,
                      nb::handle error, uintptr_t stream, nb::handle workspace, int num_threads) {
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed bi = borrow(ids, "topk_ids", Access::Read);
        Borrowed bt = borrow(weights, "topk_weights", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        Borrowed be = borrow_optional(error, "error", Access::Write);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        check_place(bx.view, "x", gu);
        check_place(bi.view, "topk_ids", gu);
        check_place(bt.view, "topk_weights", gu);
        check_place(by.view, "out", gu);
        check_place(be.view, "error", gu);
        check_place(bw.view, "workspace", gu);
        const mixq::MoeActivation act = mixq::parse_moe_activation(activation);
        const mixq::ExecContext ctx = exec_context(stream, bw, num_threads);
        nb::gil_scoped_release release;
        mixq::moe_mlp(bx.view, bi.view, bt.view, gu.experts, down.experts, by.view, act,
                      be.view, ctx);
      }, nb::arg("x"), nb::arg("topk_ids"), nb::arg("topk_weights"), nb::arg("w_gate_up"),
      nb::arg("w_down"), nb::arg("out"), nb::arg("activation"), nb::arg("error").none(),
      nb::arg("stream"), nb::arg("workspace").none(), nb::arg("num_threads"));

  m.def("fuse_gate_up", [](const mixq::QuantizedWeight& gate, const mixq::QuantizedWeight& up) {
        nb::gil_scoped_release release;
        return mixq::fuse_gate_up(gate, up);
      }, nb::arg("gate"), nb::arg("up"));

  m.def("load_experts", [](const std::string& path, const std::string& name) {
        nb::gil_scoped_release release;
        return mixq::load_experts(path, name);
      }, nb::arg("path"), nb::arg("name"));

  m.def("load_experts_gate_up", [](const std::string& path, const std::string& gate,
                                   const std::string& up) {
        nb::gil_scoped_release release;
        return mixq::load_experts_gate_up(path, gate, up);
      }, nb::arg("path"), nb::arg("gate_name"), nb::arg("up_name"));
}

}  // namespace mixq_py
