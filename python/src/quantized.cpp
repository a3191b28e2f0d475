// Quantized activations from Python arrays (mixq::QuantizedActivations, include/mixq/ops.hpp):
// the activation quantizers into caller buffers, and linear with a quantized input, a quantized
// output, or both. The Python class mixq.QuantizedActivations owns the arrays; here they are
// borrowed views, assembled into the C++ view type, and the C++ calls validate them.
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "placement.hpp"
#include "views.hpp"

namespace mixq_py {

namespace {

mixq::ActQuant act_kind(const std::string& kind, const char* arg) {
  if (kind == "fp8-block") return mixq::ActQuant::Fp8Block;
  if (kind == "int8-block") return mixq::ActQuant::Int8Block;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, arg, ": kind '", kind,
            "' is not one of fp8-block, int8-block");
}

// The borrowed arrays of one QuantizedActivations (q; scale; INT8: offset and sums).
struct BorrowedActs {
  Borrowed q, scale, offset, sums;
  mixq::QuantizedActivations acts;
};

// `name` prefixes the argument names ("xq" -> "xq.q", ...); access: Read for an input, Write
// for an output.
BorrowedActs borrow_acts(const std::string& kind, int64_t block, nb::handle q, nb::handle scale,
                         nb::handle offset, nb::handle sums, const std::string& name,
                         Access access) {
  BorrowedActs b;
  const mixq::ActQuant k = act_kind(kind, name.c_str());
  b.q = borrow(q, (name + ".q").c_str(), access);
  b.scale = borrow(scale, (name + ".scale").c_str(), access);
  b.offset = borrow_optional(offset, (name + ".offset").c_str(), access);
  b.sums = borrow_optional(sums, (name + ".sums").c_str(), access);
  b.acts = k == mixq::ActQuant::Fp8Block
               ? mixq::QuantizedActivations::fp8_block(b.q.view, b.scale.view)
               : mixq::QuantizedActivations::int8_block(block, b.q.view, b.scale.view,
                                                        b.offset.view, b.sums.view);
  b.acts.block = block;  // (checked by the C++ call, FP8 included)
  return b;
}

void check_acts_place(const BorrowedActs& a, const char* name, const Prepared& w) {
  const std::string n(name);
  check_place(a.q.view, (n + ".q").c_str(), w.weight.backend(), w.device, "the weight is");
  check_place(a.scale.view, (n + ".scale").c_str(), w.weight.backend(), w.device, "the weight is");
  check_place(a.offset.view, (n + ".offset").c_str(), w.weight.backend(), w.device, "the weight is");
  check_place(a.sums.view, (n + ".sums").c_str(), w.weight.backend(), w.device, "the weight is");
}

}  // namespace

void bind_quantized(nb::module_& m) {
  m.def("act_quant_row_pitch", &mixq::act_quant_row_pitch, nb::arg("K"),
        "Bytes between code rows: K rounded up to 16.");
  m.def("act_quant_meta_pitch", &mixq::act_quant_meta_pitch, nb::arg("M"),
        "Elements between meta rows: M rounded up to 4.");

  m.def("quantize_activations", [](nb::handle x, const std::string& kind, int64_t block,
                                   nb::handle q, nb::handle scale, nb::handle offset,
                                   nb::handle sums, uintptr_t stream) {
        Borrowed bx = borrow(x, "x", Access::Read);
        BorrowedActs out = borrow_acts(kind, block, q, scale, offset, sums, "out", Access::Write);
        mixq::ExecContext ctx;
        ctx.stream = reinterpret_cast<void*>(stream);
        nb::gil_scoped_release release;
        if (out.acts.kind == mixq::ActQuant::Fp8Block)
          mixq::quantize_activations_fp8_block(bx.view, out.acts.q, out.acts.scale, ctx);
        else
          mixq::quantize_activations_int8_block(bx.view, block, out.acts.q, out.acts.scale,
                                                out.acts.offset, out.acts.sums, ctx);
      }, nb::arg("x"), nb::arg("kind"), nb::arg("block"), nb::arg("q"), nb::arg("scale"),
      nb::arg("offset").none(), nb::arg("sums").none(), nb::arg("stream"));

  // x: an array (x_kind "") or the parts of a QuantizedActivations; out likewise (y_kind "": an
  // array).
  m.def("linear_acts", [](nb::handle x, const std::string& x_kind, int64_t x_block, nb::handle xq,
                          nb::handle xs, nb::handle xo, nb::handle xsum, const Prepared& w,
                          nb::handle y, const std::string& y_kind, int64_t y_block, nb::handle yq,
                          nb::handle ys, nb::handle yo, nb::handle ysum, nb::handle bias,
                          float clamp_lo, float clamp_hi, uintptr_t stream, nb::handle workspace,
                          int num_threads) {
        Borrowed bx, by;
        BorrowedActs ax, ay;
        if (x_kind.empty()) {
          bx = borrow(x, "x", Access::Read);
          check_place(bx.view, "x", w.weight.backend(), w.device, "the weight is");
        } else {
          ax = borrow_acts(x_kind, x_block, xq, xs, xo, xsum, "xq", Access::Read);
          check_acts_place(ax, "xq", w);
        }
        if (y_kind.empty()) {
          by = borrow(y, "out", Access::Write);
          check_place(by.view, "out", w.weight.backend(), w.device, "the weight is");
        } else {
          ay = borrow_acts(y_kind, y_block, yq, ys, yo, ysum, "out", Access::Write);
          check_acts_place(ay, "out", w);
        }
        Borrowed bb = borrow_optional(bias, "bias", Access::Read);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        check_place(bb.view, "bias", w.weight.backend(), w.device, "the weight is");
        check_place(bw.view, "workspace", w.weight.backend(), w.device, "the weight is");
        mixq::Epilogue ep;
        ep.bias = bb.view;
        ep.clamp_lo = clamp_lo;
        ep.clamp_hi = clamp_hi;
        const mixq::ExecContext ctx = exec_context(stream, bw, num_threads);
        nb::gil_scoped_release release;
        if (x_kind.empty() && y_kind.empty()) mixq::linear(bx.view, w.weight, by.view, ep, ctx);
        else if (x_kind.empty()) mixq::linear(bx.view, w.weight, ay.acts, ep, ctx);
        else if (y_kind.empty()) mixq::linear(ax.acts, w.weight, by.view, ep, ctx);
        else mixq::linear(ax.acts, w.weight, ay.acts, ep, ctx);
      }, nb::arg("x").none(), nb::arg("x_kind"), nb::arg("x_block"), nb::arg("xq").none(),
      nb::arg("xs").none(), nb::arg("xo").none(), nb::arg("xsum").none(), nb::arg("w"),
      nb::arg("y").none(), nb::arg("y_kind"), nb::arg("y_block"), nb::arg("yq").none(),
      nb::arg("ys").none(), nb::arg("yo").none(), nb::arg("ysum").none(),
      nb::arg("bias").none(), nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stream"),
      nb::arg("workspace").none(), nb::arg("num_threads"));

  m.def("quantized_output_workspace_size", [](const Prepared& w, int64_t M,
                                              const std::string& kind, int64_t block) {
        return mixq::linear_workspace_size(w.weight, M, act_kind(kind, "kind"), block);
      }, nb::arg("w"), nb::arg("M"), nb::arg("kind"), nb::arg("block"));
  m.def("quantized_output_kernel_name", [](const Prepared& w, int64_t M, const std::string& dtype,
                                           const std::string& kind, int64_t block) {
        return w.weight.kernel_name(M, dtype_arg(dtype, "dtype"), act_kind(kind, "kind"), block);
      }, nb::arg("w"), nb::arg("M"), nb::arg("dtype"), nb::arg("kind"), nb::arg("block"));
}

}  // namespace mixq_py
