// Per-device state shared by every prepared weight on that device: its properties, one cuBLAS
// handle with a fixed workspace (so cuBLAS never allocates during graph capture), and the internal
// scratch used when a call passes no workspace. Calls that rely on the internal scratch must not
// run concurrently on different streams; pass ExecContext::workspace to run concurrently.
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <mutex>

#include "cuda/dispatch/device_caps.hpp"
#include "mixq/tensor.hpp"

namespace mixq::cuda {

// Makes `device` current for a scope (prepare and each call), restoring the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// The same for destructors and deleters: never throws; where the device cannot be made current,
// the scope runs on the caller's device and the errors are dropped.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) noexcept;
  ~QuietDeviceGuard();
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

 private:
  int prev_ = -1;  // -1: nothing to restore
};

// prepare: throws InvalidArgument naming the ordinal when `device` is not a visible CUDA device.
void check_device_ordinal(int device);
// linear: x and y must live on the prepared weight's device.
void check_call_device(const TensorView& x, const TensorView& y, int device);
// The scratch of a call that needs `need` bytes: the caller's workspace (checked against need) or,
// without one, the buffer reserved at prepare time (checked too: M decides the size).
char* call_workspace(void* workspace, size_t workspace_bytes, size_t need,
                     const DeviceBuffer& reserved, int64_t M);

class DeviceContext {
 public:
  static DeviceContext& get(int device);

  int device() const { return device_; }
  const DeviceCaps& caps() const { return caps_; }
  // Grows (at prepare time only) the shared scratch to at least `bytes`; returns the buffer the
  // caller keeps (an older, smaller buffer stays alive for weights that hold it).
  std::shared_ptr<DeviceBuffer> reserve_scratch(size_t bytes);

  // cuBLAS calls take this lock: the handle's stream is set per call.
  std::mutex& cublas_mutex() { return cublas_mutex_; }
  cublasHandle_t cublas() const { return cublas_; }

  ~DeviceContext();

 private:
  explicit DeviceContext(int device);
  int device_;
  DeviceCaps caps_;
  std::mutex mutex_, cublas_mutex_;
  std::shared_ptr<DeviceBuffer> scratch_;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_ws_;
};

}  // namespace mixq::cuda
