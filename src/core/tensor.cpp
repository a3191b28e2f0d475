#include "mixq/tensor.hpp"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "mixq/error.hpp"

namespace mixq {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

TensorView::TensorView(void* ptr, DType t, std::initializer_list<int64_t> dims, Device dev,
                       int dev_index)
    : data(ptr), dtype(t), device(dev), device_index(dev_index) {
  MIXQ_CHECK_ARG(dims.size() <= kMaxRank, "TensorView: rank ", dims.size(), " > ", kMaxRank);
  rank = static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    MIXQ_CHECK_ARG(d >= 0, "TensorView: dimension ", i, " is negative (", d, ")");
    shape[i++] = d;
  }
  int64_t s = 1;
  for (int j = rank - 1; j >= 0; --j) {
    stride[j] = s;
    s *= shape[j];
  }
}

TensorView TensorView::strided(void* ptr, DType t, std::initializer_list<int64_t> dims,
                               std::initializer_list<int64_t> strides, Device dev, int dev_index) {
  MIXQ_CHECK_ARG(dims.size() == strides.size(), "TensorView::strided: ", dims.size(),
                 " dims but ", strides.size(), " strides");
  TensorView v(ptr, t, dims, dev, dev_index);
  int i = 0;
  for (int64_t s : strides) v.stride[i++] = s;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int j = rank - 1; j >= 0; --j) {
    if (shape[j] != 1 && stride[j] != s) return false;
    s *= shape[j];
  }
  return true;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int i = 0; i < rank; ++i) os << (i ? ", " : "") << shape[i];
  os << "] " << device_name(device);
  if (!is_contiguous()) {
    os << " (strides";
    for (int i = 0; i < rank; ++i) os << (i ? ", " : " ") << stride[i];
    os << ")";
  }
  return os.str();
}

void check_view(const TensorView& v, const char* arg, int rank, Device device) {
  MIXQ_CHECK_ARG(v.data != nullptr, arg, ": null data pointer");
  if (rank >= 0)
    MIXQ_CHECK_ARG(v.rank == rank, arg, ": expected rank ", rank, ", got ", v.describe());
  MIXQ_CHECK_ARG(v.device == device, arg, ": expected a ", device_name(device), " tensor, got ",
                 v.describe());
  for (int i = 0; i < v.rank; ++i)
    MIXQ_CHECK_ARG(v.stride[i] >= 0, arg, ": negative stride in ", v.describe());
  if (is_subbyte(v.dtype))
    MIXQ_CHECK_ARG(v.is_contiguous(), arg, ": 4-bit tensors must be contiguous, got ", v.describe());
}

void check_rows_contiguous(const TensorView& v, const char* arg) {
  MIXQ_CHECK_ARG(v.rank >= 1 && (v.stride[v.rank - 1] == 1 || v.shape[v.rank - 1] <= 1), arg,
                 ": innermost dimension must be contiguous, got ", v.describe());
  if (v.rank == 2)
    MIXQ_CHECK_ARG(v.stride[0] >= v.shape[1], arg, ": row stride ", v.stride[0],
                   " is smaller than the row length ", v.shape[1]);
}

std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& v) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(v.data);
  if (v.empty()) return {lo, lo};
  int64_t last = 0;  // the offset of the last element, in elements
  for (int i = 0; i < v.rank; ++i) {
    if (v.shape[i] == 0) return {lo, lo};
    last += (v.shape[i] - 1) * v.stride[i];
  }
  return {lo, lo + static_cast<uintptr_t>(dtype_bytes(v.dtype, last + 1))};
}

void check_apart(const char* fn, const TensorView& out, const char* out_arg, const TensorView& in,
                 const char* in_arg) {
  const auto [olo, ohi] = byte_span(out);
  const auto [ilo, ihi] = byte_span(in);
  MIXQ_CHECK_ARG(olo == ohi || ilo == ihi || ohi <= ilo || olo >= ihi, fn, ": ", out_arg, " (",
                 out.describe(), " at ", out.data, ") overlaps ", in_arg, " (", in.describe(),
                 " at ", in.data, "); the output must not share memory with an input");
}

void check_workspace_apart(const char* fn, const void* workspace, size_t used, const TensorView& v,
                           const char* arg) {
  if (!workspace || used == 0) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(workspace), hi = lo + used;
  const auto [vlo, vhi] = byte_span(v);
  MIXQ_CHECK_ARG(vlo == vhi || vhi <= lo || vlo >= hi, fn, ": ", arg, " (", v.describe(),
                 ") overlaps the first ", used, " bytes of ExecContext::workspace (", workspace,
                 "), which the call uses as scratch");
}

// Moves need no CUDA: shared by the CUDA build (src/cuda/runtime.cpp) and the stub.
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(o.ptr_), bytes_(o.bytes_), device_(o.device_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  std::swap(device_, o.device_);
  return *this;
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  MIXQ_CHECK(p != nullptr, ErrorCode::Internal, "HostBuffer: cannot allocate ", bytes, " bytes");
  ptr_.reset(p);
}

TensorView HostBuffer::view(DType t, std::initializer_list<int64_t> dims) const {
  TensorView v(data(), t, dims, Device::CPU);
  MIXQ_CHECK_ARG(static_cast<size_t>(v.nbytes()) <= bytes_, "HostBuffer::view: ", v.describe(),
                 " needs ", v.nbytes(), " bytes, buffer has ", bytes_);
  return v;
}

}  // namespace mixq
