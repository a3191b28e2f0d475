// linear and conv2d on borrowed views. The GIL is released around the C++ call (CPU products
// run for milliseconds; CUDA calls only enqueue work on the given stream).
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "views.hpp"

namespace mixq_py {

namespace {

// [..., K] with leading dimensions that merge into one row index ([B, T, K] with B's stride
// T * T's stride) becomes [rows, K]; anything else is refused rather than copied.
mixq::TensorView as_rows(const mixq::TensorView& v, const char* arg) {
  if (v.rank <= 2) return v;
  mixq::TensorView r = v;
  int64_t rows = v.shape[v.rank - 2];
  for (int i = v.rank - 3; i >= 0; --i) {
    MIXQ_CHECK_ARG(v.shape[i] <= 1 || v.stride[i] == v.shape[i + 1] * v.stride[i + 1], arg,
                   ": leading dimensions of ", v.describe(),
                   " do not merge into one row index without a copy");
    rows *= v.shape[i];
  }
  r.rank = 2;
  r.shape[0] = rows;
  r.shape[1] = v.shape[v.rank - 1];
  r.stride[0] = v.stride[v.rank - 2];
  r.stride[1] = v.stride[v.rank - 1];
  return r;
}

// The C++ API checks device types and x/y's CUDA ordinal; naming the weight's device here
// covers the bias and workspace too, with the argument's name in the message.
void check_place(const mixq::TensorView& v, const char* arg, const Prepared& p) {
  if (v.empty()) return;
  const bool cuda_weight = p.weight.backend() == mixq::BackendKind::CUDA;
  const mixq::Device want = cuda_weight ? mixq::Device::CUDA : mixq::Device::CPU;
  MIXQ_CHECK_ARG(v.device == want, arg, ": expected a ", mixq::device_name(want),
                 " array (the weight is prepared for the ", mixq::backend_name(p.weight.backend()),
                 " backend), got ", v.describe());
  if (cuda_weight)
    MIXQ_CHECK_ARG(v.device_index == p.device, arg, ": on cuda:", v.device_index,
                   " but the weight is prepared for cuda:", p.device);
}

mixq::Epilogue epilogue(const Borrowed& bias, float lo, float hi) {
  mixq::Epilogue ep;
  ep.bias = bias.view;
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  return ep;
}

mixq::ExecContext context(uintptr_t stream, const Borrowed& ws, const char* arg, int threads) {
  mixq::ExecContext ctx;
  ctx.stream = reinterpret_cast<void*>(stream);
  ctx.num_threads = threads;
  if (!ws.view.empty()) {
    MIXQ_CHECK_ARG(ws.view.is_contiguous(), arg, ": must be contiguous, got ", ws.view.describe());
    ctx.workspace = ws.view.data;
    ctx.workspace_bytes = static_cast<size_t>(ws.view.nbytes());
  }
  return ctx;
}

mixq::Layout parse_layout(const std::string& s) {
  if (s == "nchw") return mixq::Layout::NCHW;
  if (s == "nhwc") return mixq::Layout::NHWC;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, "layout '", s, "' is not one of nchw, nhwc");
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("linear", [](nb::handle x, const Prepared& w, nb::handle y, nb::handle bias,
                     float clamp_lo, float clamp_hi, uintptr_t stream, nb::handle workspace,
                     int num_threads) {
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        Borrowed bb = borrow_optional(bias, "bias", Access::Read);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        const mixq::TensorView xv = as_rows(bx.view, "x"), yv = as_rows(by.view, "out");
        check_place(xv, "x", w);
        check_place(yv, "out", w);
        check_place(bb.view, "bias", w);
        check_place(bw.view, "workspace", w);
        const mixq::Epilogue ep = epilogue(bb, clamp_lo, clamp_hi);
        const mixq::ExecContext ctx = context(stream, bw, "workspace", num_threads);
        nb::gil_scoped_release release;
        mixq::linear(xv, w.weight, yv, ep, ctx);
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("bias").none(),
      nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stream"), nb::arg("workspace").none(),
      nb::arg("num_threads"));

  m.def("conv2d", [](nb::handle x, const Prepared& w, nb::handle y, nb::handle bias,
                     float clamp_lo, float clamp_hi, int64_t sh, int64_t sw, int64_t ph,
                     int64_t pw, int64_t dh, int64_t dw, const std::string& layout,
                     uintptr_t stream, nb::handle workspace, int num_threads) {
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        Borrowed bb = borrow_optional(bias, "bias", Access::Read);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        check_place(bx.view, "x", w);
        check_place(by.view, "out", w);
        check_place(bb.view, "bias", w);
        check_place(bw.view, "workspace", w);
        mixq::Conv2dParams p;
        p.stride_h = sh; p.stride_w = sw;
        p.pad_h = ph; p.pad_w = pw;
        p.dilation_h = dh; p.dilation_w = dw;
        p.layout = parse_layout(layout);
        const mixq::Epilogue ep = epilogue(bb, clamp_lo, clamp_hi);
        const mixq::ExecContext ctx = context(stream, bw, "workspace", num_threads);
        nb::gil_scoped_release release;
        mixq::conv2d(bx.view, w.weight, by.view, p, ep, ctx);
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("bias").none(),
      nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stride_h"), nb::arg("stride_w"),
      nb::arg("pad_h"), nb::arg("pad_w"), nb::arg("dilation_h"), nb::arg("dilation_w"),
      nb::arg("layout"), nb::arg("stream"), nb::arg("workspace").none(), nb::arg("num_threads"));

  m.def("conv2d_output_size", [](int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh,
                                 int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
        mixq::Conv2dParams p;
        p.stride_h = sh; p.stride_w = sw;
        p.pad_h = ph; p.pad_w = pw;
        p.dilation_h = dh; p.dilation_w = dw;
        int64_t ho = 0, wo = 0;
        mixq::conv2d_output_size(H, W, kh, kw, p, &ho, &wo);
        return nb::make_tuple(ho, wo);
      });
}

}  // namespace mixq_py
