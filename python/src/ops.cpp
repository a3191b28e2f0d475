// linear and conv2d on borrowed views. The GIL is released around the C++ call (CPU products
// run for milliseconds; CUDA calls only enqueue work on the given stream).
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "placement.hpp"
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
  mixq_py::check_place(v, arg, p.weight.backend(), p.device, "the weight is");
}

mixq::Epilogue epilogue(const Borrowed& bias, float lo, float hi) {
  mixq::Epilogue ep;
  ep.bias = bias.view;
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  return ep;
}

mixq::Layout parse_layout(const std::string& s) {
  if (s == "nchw") return mixq::Layout::NCHW;
  if (s == "nhwc") return mixq::Layout::NHWC;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, "layout '", s, "' is not one of nchw, nhwc");
}

// An image's dtype by mixq's name ("f16", "bf16", ...) or numpy / torch's ("float16", "int8").
mixq::DType image_dtype(const std::string& name) {
  if (name == "int8") return mixq::DType::I8;
  if (name == "uint8") return mixq::DType::U8;
  return dtype_arg(name, "dtype");
}

}  // namespace

// The torch op's entry: rows of x and y given as raw pointers and strides, read off the
// tensors in Python (attribute reads of ~0.1 us each), because importing a torch tensor through
// DLPack costs ~3.5 us per tensor (torch builds the capsule in Python) and the op's budget over
// the C++ call is a few microseconds. Device placement is passed explicitly; mixq::linear still
// validates dtypes, shapes, devices and the workspace.
struct RawRows {
  uintptr_t ptr;
  int dtype;       // mixq::DType as int
  int64_t rows, cols, ld;
  int device;      // -1: host, else the CUDA ordinal
};

constexpr int kDTypeCount = static_cast<int>(mixq::DType::F64) + 1;

mixq::TensorView raw_view(const RawRows& r) {
  mixq::TensorView v;
  v.data = reinterpret_cast<void*>(r.ptr);
  v.dtype = static_cast<mixq::DType>(r.dtype);
  v.device = r.device < 0 ? mixq::Device::CPU : mixq::Device::CUDA;
  v.device_index = r.device < 0 ? 0 : r.device;
  v.rank = r.rows < 0 ? 1 : 2;
  if (r.rows < 0) {  // a vector (bias)
    v.shape[0] = r.cols;
    v.stride[0] = 1;
  } else {
    v.shape[0] = r.rows;
    v.shape[1] = r.cols;
    v.stride[0] = r.ld;
    v.stride[1] = 1;
  }
  return v;
}

void check_dtype_code(int code, const char* arg) {
  MIXQ_CHECK_ARG(code >= 0 && code < kDTypeCount, arg, ": dtype code ", code, " is not a mixq dtype");
}

// The raw calls' bias (0: none) and clamp, and their stream and workspace.
mixq::Epilogue raw_epilogue(uintptr_t bias, int bias_dtype, int bias_device, int64_t n, float lo, float hi) {
  check_dtype_code(bias_dtype, "bias");
  mixq::Epilogue ep;
  if (bias) ep.bias = raw_view({bias, bias_dtype, -1, n, 1, bias_device});
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  return ep;
}

mixq::ExecContext raw_context(uintptr_t stream, uintptr_t workspace, int64_t workspace_bytes) {
  mixq::ExecContext ctx;
  ctx.stream = reinterpret_cast<void*>(stream);
  ctx.workspace = reinterpret_cast<void*>(workspace);
  ctx.workspace_bytes = static_cast<size_t>(workspace_bytes);
  return ctx;
}

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
        const mixq::ExecContext ctx = exec_context(stream, bw, num_threads);
        nb::gil_scoped_release release;
        mixq::linear(xv, w.weight, yv, ep, ctx);
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("bias").none(),
      nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stream"), nb::arg("workspace").none(),
      nb::arg("num_threads"));

  // {dtype name: code} for linear_rows (the C++ dtype_name: f32, f16, bf16, ...).
  nb::dict codes;
  for (int t = 0; t < kDTypeCount; ++t)
    codes[mixq::dtype_name(static_cast<mixq::DType>(t))] = t;
  m.attr("dtype_codes") = codes;

  m.def("linear_rows", [](const Prepared& w, uintptr_t x, int x_dtype, int64_t M, int64_t K,
                          int64_t ldx, uintptr_t y, int64_t N, int64_t ldy, int device,
                          uintptr_t bias, int bias_dtype, int bias_device, float clamp_lo,
                          float clamp_hi, uintptr_t stream, uintptr_t workspace,
                          int64_t workspace_bytes) {
        check_dtype_code(x_dtype, "x");
        const mixq::TensorView xv = raw_view({x, x_dtype, M, K, ldx, device});
        const mixq::TensorView yv = raw_view({y, x_dtype, M, N, ldy, device});
        const mixq::Epilogue ep = raw_epilogue(bias, bias_dtype, bias_device, N, clamp_lo, clamp_hi);
        check_place(xv, "x", w);
        check_place(ep.bias, "bias", w);
        const mixq::ExecContext ctx = raw_context(stream, workspace, workspace_bytes);
        nb::gil_scoped_release release;
        mixq::linear(xv, w.weight, yv, ep, ctx);
      }, nb::arg("w"), nb::arg("x"), nb::arg("x_dtype"), nb::arg("M"), nb::arg("K"),
      nb::arg("ldx"), nb::arg("y"), nb::arg("N"), nb::arg("ldy"), nb::arg("device"),
      nb::arg("bias"), nb::arg("bias_dtype"), nb::arg("bias_device"), nb::arg("clamp_lo"),
      nb::arg("clamp_hi"), nb::arg("stream"), nb::arg("workspace"), nb::arg("workspace_bytes"),
      "linear on raw row-major views (the torch op's fast path; mixq.linear is the public "
      "entry). bias = 0 for none; device = -1 for host memory, else the CUDA ordinal.");

  // The torch conv op's fast path: x and y contiguous in their layout (NCHW [B][C][H][W] or NHWC
  // [B][H][W][C]), given as raw pointers with their sizes, as linear_rows does for rows.
  m.def("conv2d_raw", [](const Prepared& w, uintptr_t x, int x_dtype, int64_t B, int64_t Ci,
                         int64_t H, int64_t W, uintptr_t y, int y_dtype, int64_t Ho, int64_t Wo,
                         const std::string& layout, int device, uintptr_t bias, int bias_dtype,
                         int bias_device, float clamp_lo, float clamp_hi, int64_t sh, int64_t sw,
                         int64_t ph, int64_t pw, int64_t dh, int64_t dw, uintptr_t stream,
                         uintptr_t workspace, int64_t workspace_bytes) {
        check_dtype_code(x_dtype, "x");
        check_dtype_code(y_dtype, "out");
        mixq::Conv2dParams p;
        p.stride_h = sh; p.stride_w = sw;
        p.pad_h = ph; p.pad_w = pw;
        p.dilation_h = dh; p.dilation_w = dw;
        p.layout = parse_layout(layout);
        const int64_t Co = w.weight.N();
        const bool nchw = p.layout == mixq::Layout::NCHW;
        auto image = [&](uintptr_t ptr, int dtype, int64_t C, int64_t h, int64_t wd) {
          mixq::TensorView v;
          v.data = reinterpret_cast<void*>(ptr);
          v.dtype = static_cast<mixq::DType>(dtype);
          v.device = device < 0 ? mixq::Device::CPU : mixq::Device::CUDA;
          v.device_index = device < 0 ? 0 : device;
          v.rank = 4;
          const int64_t dims[4] = {B, nchw ? C : h, nchw ? h : wd, nchw ? wd : C};
          int64_t stride = 1;
          for (int i = 3; i >= 0; --i) {
            v.shape[i] = dims[i];
            v.stride[i] = stride;
            stride *= dims[i];
          }
          return v;
        };
        const mixq::TensorView xv = image(x, x_dtype, Ci, H, W), yv = image(y, y_dtype, Co, Ho, Wo);
        const mixq::Epilogue ep = raw_epilogue(bias, bias_dtype, bias_device, Co, clamp_lo, clamp_hi);
        check_place(xv, "x", w);
        check_place(ep.bias, "bias", w);
        const mixq::ExecContext ctx = raw_context(stream, workspace, workspace_bytes);
        nb::gil_scoped_release release;
        mixq::conv2d(xv, w.weight, yv, p, ep, ctx);
      }, nb::arg("w"), nb::arg("x"), nb::arg("x_dtype"), nb::arg("B"), nb::arg("Ci"), nb::arg("H"),
      nb::arg("W"), nb::arg("y"), nb::arg("y_dtype"), nb::arg("Ho"), nb::arg("Wo"), nb::arg("layout"),
      nb::arg("device"), nb::arg("bias"), nb::arg("bias_dtype"), nb::arg("bias_device"),
      nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stride_h"), nb::arg("stride_w"),
      nb::arg("pad_h"), nb::arg("pad_w"), nb::arg("dilation_h"), nb::arg("dilation_w"),
      nb::arg("stream"), nb::arg("workspace"), nb::arg("workspace_bytes"),
      "conv2d on raw contiguous images (the torch op's fast path; mixq.conv2d is the public "
      "entry). bias = 0 for none; device = -1 for host memory, else the CUDA ordinal.");

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
        const mixq::ExecContext ctx = exec_context(stream, bw, num_threads);
        nb::gil_scoped_release release;
        mixq::conv2d(bx.view, w.weight, by.view, p, ep, ctx);
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("bias").none(),
      nb::arg("clamp_lo"), nb::arg("clamp_hi"), nb::arg("stride_h"), nb::arg("stride_w"),
      nb::arg("pad_h"), nb::arg("pad_w"), nb::arg("dilation_h"), nb::arg("dilation_w"),
      nb::arg("layout"), nb::arg("stream"), nb::arg("workspace").none(), nb::arg("num_threads"));

  // What conv2d_raw / conv2d callers allocate: the C++ conv2d_workspace_size of an input of this
  // shape and dtype (on CUDA an NCHW call's NHWC copies too, not only its B*Ho*Wo GEMM rows).
  m.def("conv2d_workspace_size", [](const Prepared& w, int64_t B, int64_t Ci, int64_t H, int64_t W,
                                    const std::string& dtype, const std::string& layout, int64_t sh,
                                    int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
        const mixq::DType t = image_dtype(dtype);
        mixq::Conv2dParams p;
        p.stride_h = sh; p.stride_w = sw;
        p.pad_h = ph; p.pad_w = pw;
        p.dilation_h = dh; p.dilation_w = dw;
        p.layout = parse_layout(layout);
        MIXQ_CHECK_ARG(B >= 0 && Ci >= 0 && H >= 0 && W >= 0, "conv2d_workspace_size: sizes (B ",
                       B, ", Ci ", Ci, ", H ", H, ", W ", W, ") must be >= 0");
        const bool cuda = w.weight.backend() == mixq::BackendKind::CUDA;
        const mixq::Device dev = cuda ? mixq::Device::CUDA : mixq::Device::CPU;
        const int ordinal = cuda ? w.device : 0;
        const mixq::TensorView x = p.layout == mixq::Layout::NCHW
                                       ? mixq::TensorView(nullptr, t, {B, Ci, H, W}, dev, ordinal)
                                       : mixq::TensorView(nullptr, t, {B, H, W, Ci}, dev, ordinal);
        return mixq::conv2d_workspace_size(w.weight, x, p);
      }, nb::arg("w"), nb::arg("B"), nb::arg("Ci"), nb::arg("H"), nb::arg("W"), nb::arg("dtype"),
      nb::arg("layout"), nb::arg("stride_h"), nb::arg("stride_w"), nb::arg("pad_h"),
      nb::arg("pad_w"), nb::arg("dilation_h"), nb::arg("dilation_w"),
      "Workspace bytes of a conv2d call on an input [B, Ci, H, W] ('nchw') or [B, H, W, Ci] "
      "('nhwc') of `dtype` ('f16', 'float16', ...); 0 on the CPU backends.");

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
