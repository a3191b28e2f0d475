#include "cuda/runtime/device_context.hpp"

#include <cuda_runtime.h>

#include <map>

#include "cuda/runtime/check.hpp"
#include "cuda/launch/wo_kernels.hpp"
#include "cuda/runtime/device_probes.hpp"

namespace mixq::cuda {

DeviceGuard::DeviceGuard(int device) {
  MIXQ_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) MIXQ_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() { cudaSetDevice(prev_); }

QuietDeviceGuard::QuietDeviceGuard(int device) noexcept {
  int prev = 0;
  if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) prev_ = prev;
}
QuietDeviceGuard::~QuietDeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);
}

void check_call_device(const TensorView& x, const TensorView& y, int device) {
  MIXQ_CHECK_ARG(x.device_index == device && y.device_index == device, "linear: x (device ",
                 x.device_index, ") and y (device ", y.device_index,
                 ") must be on the prepared weight's device ", device);
}

char* call_workspace(void* workspace, size_t workspace_bytes, size_t need,
                     const DeviceBuffer& reserved, int64_t M) {
  if (workspace) {
    MIXQ_CHECK_ARG(workspace_bytes >= need, "linear: workspace of ", workspace_bytes,
                   " bytes is smaller than the ", need, " bytes this call needs "
                   "(linear_workspace_size)");
    return static_cast<char*>(workspace);
  }
  MIXQ_CHECK_ARG(need <= reserved.size(), "linear: M = ", M, " needs ", need,
                 " bytes of workspace, more than the ", reserved.size(),
                 " reserved at prepare time; pass ExecContext::workspace (linear_workspace_size)");
  return static_cast<char*>(reserved.data());
}

void check_device_ordinal(int device) {
  MIXQ_CHECK_ARG(device >= 0 && device < cuda_device_count(), "prepare: CUDA device ", device,
                 " does not exist (", cuda_device_count(), " visible)");
}

namespace {
std::mutex g_registry_mutex;
}  // namespace

DeviceContext& DeviceContext::get(int device) {
  static std::map<int, std::unique_ptr<DeviceContext>> registry;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto& slot = registry[device];
  if (!slot) slot.reset(new DeviceContext(device));
  return *slot;
}

DeviceContext::DeviceContext(int device) : device_(device) {
  cudaDeviceProp prop{};
  MIXQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  caps_.sm_count = prop.multiProcessorCount;
  caps_.cc_major = prop.major;
  caps_.cc_minor = prop.minor;
  caps_.smem_per_sm = prop.sharedMemPerMultiprocessor;
  caps_.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  caps_.l2_bytes = prop.l2CacheSize;
  caps_.sm90a = probe_sm90a_image(device);
  caps_.stream_clusters = wo_stream_clusters_available(device);
  probe_cluster_capacity(device, caps_);
  int prev = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&prev));
  MIXQ_CUDA_CHECK(cudaSetDevice(device));
  const cublasStatus_t st = cublasCreate(&cublas_);
  if (st == CUBLAS_STATUS_SUCCESS) {
    cublas_ws_ = DeviceBuffer(size_t(32) << 20, device);
    cublasSetWorkspace(cublas_, cublas_ws_.data(), cublas_ws_.size());
  }
  cudaSetDevice(prev);
  MIXQ_CHECK(st == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, "cublasCreate failed on device ", device,
             ": status ", static_cast<int>(st));
}

DeviceContext::~DeviceContext() {
  // Destroyed at process exit; the CUDA context may already be gone, so errors are ignored.
  if (cublas_) cublasDestroy(cublas_);
}

std::shared_ptr<DeviceBuffer> DeviceContext::reserve_scratch(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!scratch_ || scratch_->size() < bytes)
    scratch_ = std::make_shared<DeviceBuffer>(std::max<size_t>(bytes, 256), device_);
  return scratch_;
}

}  // namespace mixq::cuda
