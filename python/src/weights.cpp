// QuantizedWeight (the canonical weight) as a Python object, the weight quantizers, and
// dequantization into numpy.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/quantize.hpp"
#include "views.hpp"

namespace mixq_py {

namespace {

using mixq::QuantizedWeight;

// A read-only numpy view of one of the weight's byte buffers, kept alive by the weight object.
template <typename T>
nb::ndarray<nb::numpy, const T> buffer_view(const std::vector<T>& v, nb::handle owner,
                                            std::initializer_list<size_t> shape) {
  return nb::ndarray<nb::numpy, const T>(v.data(), shape, owner);
}

// A fresh float32 numpy array that owns its memory (freed with the array).
nb::ndarray<nb::numpy, float> new_f32(size_t rows, size_t cols, float** data) {
  float* p = new float[rows * cols];
  nb::capsule owner(p, [](void* q) noexcept { delete[] static_cast<float*>(q); });
  *data = p;
  return nb::ndarray<nb::numpy, float>(p, {rows, cols}, owner);
}

// Copies a host array's bytes (any dtype, C-contiguous) into a byte vector.
template <typename T>
std::vector<T> bytes_of(nb::handle a, const char* arg) {
  std::vector<T> out;
  if (a.is_none()) return out;
  Borrowed b = borrow(a, arg, Access::Read);
  MIXQ_CHECK_ARG(b.view.device == mixq::Device::CPU && b.view.is_contiguous(), arg,
                 ": expected a contiguous host array, got ", b.view.describe());
  const size_t n = static_cast<size_t>(b.view.nbytes());
  MIXQ_CHECK_ARG(n % sizeof(T) == 0, arg, ": ", n, " bytes is not a whole number of ", sizeof(T),
                 "-byte elements");
  out.resize(n / sizeof(T));
  if (n) std::memcpy(out.data(), b.view.data, n);
  return out;
}

mixq::ZeroKind zero_kind_arg(const std::string& name) {
  if (name == "none") return mixq::ZeroKind::None;
  if (name == "offset") return mixq::ZeroKind::Offset;
  if (name == "zero-point") return mixq::ZeroKind::ZeroPoint;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, "zero_kind: '", name,
            "' is not one of none, offset, zero-point");
}

}  // namespace

mixq::DType dtype_arg(const std::string& name, const char* arg) {
  const auto t = mixq::parse_dtype(name);
  MIXQ_CHECK_ARG(t.has_value(), arg, ": unknown dtype '", name, "'");
  return *t;
}

void bind_weights(nb::module_& m) {
  nb::class_<QuantizedWeight>(m, "QuantizedWeight",
                              "The canonical quantized weight W[N][K] (see mixq.QuantizedWeight).")
      .def_static("from_parts", [](int64_t N, int64_t K, const std::string& code_type,
                                   int64_t block_k, int64_t block_n, const std::string& scale_type,
                                   const std::string& zero_kind, bool has_scales, nb::handle codes,
                                   nb::handle scales, nb::handle zeros, nb::handle k_perm,
                                   const std::string& origin) {
            QuantizedWeight w;
            w.N = N;
            w.K = K;
            w.code_type = dtype_arg(code_type, "code_type");
            w.block_k = block_k;
            w.block_n = block_n;
            w.scale_type = dtype_arg(scale_type, "scale_type");
            w.zero_kind = zero_kind_arg(zero_kind);
            w.has_scales = has_scales;
            w.codes = bytes_of<uint8_t>(codes, "codes");
            w.scales = bytes_of<uint8_t>(scales, "scales");
            w.zeros = bytes_of<uint8_t>(zeros, "zeros");
            w.k_perm = bytes_of<int32_t>(k_perm, "k_perm");
            w.origin = origin;
            w.validate();
            return w;
          }, nb::arg("N"), nb::arg("K"), nb::arg("code_type"), nb::arg("block_k"),
          nb::arg("block_n"), nb::arg("scale_type"), nb::arg("zero_kind"), nb::arg("has_scales"),
          nb::arg("codes"), nb::arg("scales").none(), nb::arg("zeros").none(),
          nb::arg("k_perm").none(), nb::arg("origin") = "",
          "Build a weight from its buffers (copied; see include/mixq/quantized_weight.hpp for the "
          "layout) and validate it.")
      .def_ro("N", &QuantizedWeight::N)
      .def_ro("K", &QuantizedWeight::K)
      .def_prop_ro("code_type", [](const QuantizedWeight& w) { return std::string(mixq::dtype_name(w.code_type)); })
      .def_ro("block_k", &QuantizedWeight::block_k)
      .def_ro("block_n", &QuantizedWeight::block_n)
      .def_prop_ro("scale_type", [](const QuantizedWeight& w) { return std::string(mixq::dtype_name(w.scale_type)); })
      .def_prop_ro("zero_kind", [](const QuantizedWeight& w) { return std::string(mixq::zero_kind_name(w.zero_kind)); })
      .def_ro("has_scales", &QuantizedWeight::has_scales)
      .def_ro("origin", &QuantizedWeight::origin)
      .def_prop_ro("has_k_perm", [](const QuantizedWeight& w) { return !w.k_perm.empty(); })
      .def_prop_ro("storage_bytes", &QuantizedWeight::storage_bytes)
      .def_prop_ro("bits_per_weight", &QuantizedWeight::bits_per_weight)
      .def("describe", &QuantizedWeight::describe)
      .def("__repr__", [](const QuantizedWeight& w) { return "<mixq.QuantizedWeight " + w.describe() + ">"; })
      .def_prop_ro("codes", [](nb::handle self) {
            const auto& w = nb::cast<const QuantizedWeight&>(self);
            return buffer_view(w.codes, self, {size_t(w.N), size_t(w.row_bytes())});
          }, nb::rv_policy::reference_internal)
      .def_prop_ro("scales_bytes", [](nb::handle self) {
            const auto& w = nb::cast<const QuantizedWeight&>(self);
            return buffer_view(w.scales, self, {w.scales.size()});
          }, nb::rv_policy::reference_internal)
      .def_prop_ro("zeros_bytes", [](nb::handle self) {
            const auto& w = nb::cast<const QuantizedWeight&>(self);
            return buffer_view(w.zeros, self, {w.zeros.size()});
          }, nb::rv_policy::reference_internal)
      .def_prop_ro("k_perm", [](nb::handle self) {
            const auto& w = nb::cast<const QuantizedWeight&>(self);
            return buffer_view(w.k_perm, self, {w.k_perm.size()});
          }, nb::rv_policy::reference_internal)
      .def("scale", &QuantizedWeight::scale, nb::arg("nb"), nb::arg("kb"))
      .def("dequantize", [](const QuantizedWeight& w, bool original_order) {
            w.validate();
            float* p = nullptr;
            auto out = new_f32(size_t(w.N), size_t(w.K), &p);
            {
              nb::gil_scoped_release release;
              mixq::dequantize_rows(w, 0, w.N, p, original_order);
            }
            return out;
          }, nb::arg("original_order") = true);

  m.def("quantize", [](nb::handle w, const std::string& scheme) {
        const mixq::QuantScheme s = mixq::parse_scheme(scheme);
        Borrowed b = borrow(w, "w", Access::Read);
        MIXQ_CHECK_ARG(b.view.device == mixq::Device::CPU, "w: quantize reads host memory, got a ",
                       b.view.describe(), " (move the weight to the CPU first)");
        nb::gil_scoped_release release;
        return mixq::quantize_weight(b.view, s);
      }, nb::arg("w"), nb::arg("scheme"));
  m.def("quantize_int8_per_channel", [](nb::handle w) {
        Borrowed b = borrow(w, "w", Access::Read);
        MIXQ_CHECK_ARG(b.view.device == mixq::Device::CPU, "w: quantize reads host memory, got a ",
                       b.view.describe());
        nb::gil_scoped_release release;
        return mixq::quantize_weight_int8_per_channel(b.view);
      }, nb::arg("w"));
  m.def("scheme_name", [](const std::string& name) {
        return mixq::scheme_name(mixq::parse_scheme(name));
      }, nb::arg("name"));
}

}  // namespace mixq_py
