// Non-owning tensor views and owning buffers.
//
// A TensorView is a pointer plus shape, element strides, dtype and device. Rank is at most 4.
// Sub-byte dtypes (I4/U4) must be contiguous; their strides count elements like every other type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixq/dtype.hpp"

namespace mixq {

enum class Device : uint8_t { CPU, CUDA };
const char* device_name(Device d);

struct TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int device_index = 0;
  int rank = 0;
  int64_t shape[kMaxRank] = {0, 0, 0, 0};
  int64_t stride[kMaxRank] = {0, 0, 0, 0};  // in elements

  TensorView() = default;
  // Contiguous row-major view.
  TensorView(void* ptr, DType t, std::initializer_list<int64_t> dims, Device dev = Device::CPU,
             int dev_index = 0);
  static TensorView strided(void* ptr, DType t, std::initializer_list<int64_t> dims,
                            std::initializer_list<int64_t> strides, Device dev = Device::CPU,
                            int dev_index = 0);

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  int64_t nbytes() const { return dtype_bytes(dtype, numel()); }
  bool is_contiguous() const;
  // Leading dimension of a rank-2 view (stride of dim 0); rows must have unit inner stride.
  int64_t ld() const { return stride[0]; }
  std::string describe() const;  // "f16[4, 4096] cpu (strides 4096, 1)"

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
};

// Validates `v` and throws InvalidArgument naming `arg` when the rank, dtype, device or
// innermost stride is not what the operation needs. Pass rank < 0 to skip the rank check.
void check_view(const TensorView& v, const char* arg, int rank, Device device);
// Same, and the innermost dimension must be unit-stride (rows contiguous).
void check_rows_contiguous(const TensorView& v, const char* arg);
// The bytes [lo, hi) that a view's elements span (empty: lo == hi).
std::pair<uintptr_t, uintptr_t> byte_span(const TensorView& v);
// Throws InvalidArgument naming both arguments when the bytes of `out` and `in` overlap: an
// output written while other threads of the call may still read the input.
void check_apart(const char* fn, const TensorView& out, const char* out_arg, const TensorView& in,
                 const char* in_arg);
// Throws InvalidArgument naming `arg` when `v` overlaps the first `used` bytes of a caller's
// workspace at `workspace` (null: nothing to check), which the call `fn` writes as scratch.
void check_workspace_apart(const char* fn, const void* workspace, size_t used, const TensorView& v,
                           const char* arg);

// Owning, 64-byte aligned host memory.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;

  void* data() const { return ptr_.get(); }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data()); }
  TensorView view(DType t, std::initializer_list<int64_t> dims) const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};

// Owning device memory (cudaMalloc). Throws Unsupported in a build without CUDA.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, int device = 0);
  DeviceBuffer(DeviceBuffer&&) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  int device() const { return device_; }
  TensorView view(DType t, std::initializer_list<int64_t> dims) const;

  void copy_from_host(const void* src, size_t bytes, size_t offset = 0);
  void copy_to_host(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

// Runtime GPU detection: true when mixq was built with CUDA and a usable device exists.
bool cuda_available();
int cuda_device_count();

}  // namespace mixq
