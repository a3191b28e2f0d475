#include "views.hpp"

#include <string>

#include "mixq/error.hpp"

namespace mixq_py {

namespace {

using mixq::DType;
namespace dl = nb::dlpack;

// DLPack device types (dlpack.h): kDLCPU, kDLCUDA, kDLCUDAHost (pinned host memory, which the
// CPU backend reads like any host memory), kDLCUDAManaged (addressable by the GPU).
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string dlpack_dtype_name(const dl::dtype& t) {
  const char* kind = "?";
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Int: kind = "int"; break;
    case dl::dtype_code::UInt: kind = "uint"; break;
    case dl::dtype_code::Float: kind = "float"; break;
    case dl::dtype_code::Bfloat: kind = "bfloat"; break;
    case dl::dtype_code::Complex: kind = "complex"; break;
    case dl::dtype_code::Bool: kind = "bool"; break;
    default: kind = "float8/other"; break;
  }
  return mixq::detail::cat(kind, int(t.bits), t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

[[noreturn]] void bad_dtype(const char* arg, const std::string& got) {
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, arg, ": dtype ", got,
            " is not one mixq handles (float32, float16, bfloat16, float8_e4m3fn, int8, uint8, "
            "int32, float64)");
}

DType from_dlpack_dtype(const dl::dtype& t, const char* arg) {
  if (t.lanes == 1) {
    switch (static_cast<dl::dtype_code>(t.code)) {
      case dl::dtype_code::Float:
        if (t.bits == 32) return DType::F32;
        if (t.bits == 16) return DType::F16;
        if (t.bits == 64) return DType::F64;
        break;
      case dl::dtype_code::Bfloat:
        if (t.bits == 16) return DType::BF16;
        break;
      case dl::dtype_code::Float8_E4M3FN:
        if (t.bits == 8) return DType::F8E4M3;
        break;
      case dl::dtype_code::Int:
        if (t.bits == 8) return DType::I8;
        if (t.bits == 32) return DType::I32;
        break;
      case dl::dtype_code::UInt:
        if (t.bits == 8) return DType::U8;
        break;
      default: break;
    }
  }
  bad_dtype(arg, dlpack_dtype_name(t));
}

mixq::Device from_dlpack_device(int32_t type, const char* arg) {
  if (type == kDLCPU || type == kDLCUDAHost) return mixq::Device::CPU;
  if (type == kDLCUDA || type == kDLCUDAManaged) return mixq::Device::CUDA;
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, arg, ": DLPack device type ", type,
            " is neither CPU nor CUDA");
}

template <typename Array>
mixq::TensorView view_of(const Array& a, const char* arg) {
  MIXQ_CHECK_ARG(a.ndim() >= 1 && a.ndim() <= mixq::TensorView::kMaxRank, arg, ": rank ",
                 a.ndim(), " is not supported (1 to ", mixq::TensorView::kMaxRank, ")");
  mixq::TensorView v;
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.dtype = from_dlpack_dtype(a.dtype(), arg);
  v.device = from_dlpack_device(a.device_type(), arg);
  v.device_index = v.device == mixq::Device::CUDA ? a.device_id() : 0;
  v.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = static_cast<int64_t>(a.shape(i));
    v.stride[i] = static_cast<int64_t>(a.stride(i));
    MIXQ_CHECK_ARG(v.stride[i] >= 0 || v.shape[i] <= 1, arg, ": negative stride ", v.stride[i],
                   " in dimension ", i, " (flip the array into a contiguous copy first)");
  }
  return v;
}

// numpy-style typestr ("<f4", "|i1", ...) of the array interface protocols.
DType from_typestr(const std::string& ts, const char* arg) {
  if (ts.size() >= 3 && ts[0] != '>') {
    const std::string t = ts.substr(1);
    if (t == "f4") return DType::F32;
    if (t == "f2") return DType::F16;
    if (t == "f8") return DType::F64;
    if (t == "i1") return DType::I8;
    if (t == "u1") return DType::U8;
    if (t == "i4") return DType::I32;
  }
  bad_dtype(arg, "'" + ts + "' (array interface typestr)");
}

// __cuda_array_interface__ (v2/v3) or __array_interface__ (v3): {shape, typestr, data: (ptr,
// read_only), strides: None or bytes per dimension}. The stream key of the CUDA version is the
// producer's stream: mixq does not synchronise with it (callers order their own work).
Borrowed from_interface(nb::handle obj, nb::dict d, bool cuda, const char* arg, Access access) {
  Borrowed b;
  b.owner = nb::borrow(obj);
  mixq::TensorView& v = b.view;
  v.dtype = from_typestr(nb::cast<std::string>(d["typestr"]), arg);
  v.device = cuda ? mixq::Device::CUDA : mixq::Device::CPU;
  nb::tuple data = nb::cast<nb::tuple>(d["data"]);
  v.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(data[0]));
  MIXQ_CHECK_ARG(!(access == Access::Write && nb::cast<bool>(data[1])), arg,
                 ": the array is read-only and cannot be written");
  nb::tuple shape = nb::cast<nb::tuple>(d["shape"]);
  MIXQ_CHECK_ARG(shape.size() >= 1 && shape.size() <= size_t(mixq::TensorView::kMaxRank), arg,
                 ": rank ", shape.size(), " is not supported (1 to ", mixq::TensorView::kMaxRank,
                 ")");
  v.rank = static_cast<int>(shape.size());
  const int64_t item = mixq::dtype_bytes(v.dtype, 1);
  int64_t contiguous = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.shape[i] = nb::cast<int64_t>(shape[i]);
    v.stride[i] = contiguous;
    contiguous *= v.shape[i];
  }
  nb::object strides = d.contains("strides") ? nb::borrow(d["strides"]) : nb::none();
  if (!strides.is_none()) {
    nb::tuple st = nb::cast<nb::tuple>(strides);
    for (int i = 0; i < v.rank; ++i) {
      const int64_t bytes = nb::cast<int64_t>(st[i]);
      MIXQ_CHECK_ARG(bytes >= 0 && bytes % item == 0, arg, ": stride of ", bytes,
                     " bytes in dimension ", i, " is negative or not a multiple of the ", item,
                     "-byte element");
      v.stride[i] = bytes / item;
    }
  }
  if (cuda) {
    // The interface does not name the device; the pointer's device is the caller's current one.
    v.device_index = nb::hasattr(obj, "device") && nb::hasattr(obj.attr("device"), "id")
                         ? nb::cast<int>(obj.attr("device").attr("id"))
                         : 0;
  }
  return b;
}

}  // namespace

Borrowed borrow(nb::handle obj, const char* arg, Access access) {
  MIXQ_CHECK_ARG(obj.is_valid() && !obj.is_none(), arg, ": an array is required, got None");
  Borrowed b;
  // convert = false: never let nanobind make a converted copy; a view or an error.
  if (access == Access::Read) {
    nb::ndarray<nb::ro> a;
    if (nb::try_cast(obj, a, false)) {
      b.view = view_of(a, arg);
      b.read = std::move(a);
      return b;
    }
  } else {
    nb::ndarray<> a;
    if (nb::try_cast(obj, a, false)) {
      b.view = view_of(a, arg);
      b.write = std::move(a);
      return b;
    }
  }
  if (nb::hasattr(obj, "__cuda_array_interface__"))
    return from_interface(obj, nb::cast<nb::dict>(obj.attr("__cuda_array_interface__")), true,
                          arg, access);
  if (nb::hasattr(obj, "__array_interface__"))
    return from_interface(obj, nb::cast<nb::dict>(obj.attr("__array_interface__")), false, arg,
                          access);
  const std::string type_name = nb::cast<std::string>(nb::type_name(obj.type()));
  MIXQ_FAIL(mixq::ErrorCode::InvalidArgument, arg, ": cannot view a ", type_name,
            " as an array without a copy",
            access == Access::Write ? " (outputs must be writable)" : "",
            " (expected a numpy array, a torch tensor (detached), a CuPy array or another "
            "DLPack / array-interface object)");
}

Borrowed borrow_optional(nb::handle obj, const char* arg, Access access) {
  if (!obj.is_valid() || obj.is_none()) return Borrowed{};
  return borrow(obj, arg, access);
}

}  // namespace mixq_py
