// Built only when mixq is configured without CUDA: every CUDA entry point reports so clearly.
#include "core/device_ops.hpp"
#include "core/prepared.hpp"
#include "mixq/device.hpp"
#include "mixq/error.hpp"
#include "mixq/tensor.hpp"

namespace mixq {

std::shared_ptr<const PreparedImpl> prepare_cuda(const QuantizedWeight&, const ConvGeometry*,
                                                 const PrepareOptions&) {
  MIXQ_FAIL(ErrorCode::Unsupported, "backend cuda: this build of mixq has no CUDA support "
            "(configure with -DMIXQ_CUDA=ON on a machine with nvcc)");
}

bool cuda_available() { return false; }
ReadCeiling measure_read_ceiling(size_t, int) {
  MIXQ_FAIL(ErrorCode::Unsupported, "measure_read_ceiling: this build of mixq has no CUDA support");
}
int cuda_device_count() { return 0; }

DeviceBuffer::DeviceBuffer(size_t, int) {
  MIXQ_FAIL(ErrorCode::Unsupported, "DeviceBuffer: this build of mixq has no CUDA support");
}
DeviceBuffer::~DeviceBuffer() = default;
TensorView DeviceBuffer::view(DType, std::initializer_list<int64_t>) const {
  MIXQ_FAIL(ErrorCode::Unsupported, "DeviceBuffer: this build of mixq has no CUDA support");
}
void DeviceBuffer::copy_from_host(const void*, size_t, size_t) {
  MIXQ_FAIL(ErrorCode::Unsupported, "DeviceBuffer: this build of mixq has no CUDA support");
}
void DeviceBuffer::copy_to_host(void*, size_t, size_t) const {
  MIXQ_FAIL(ErrorCode::Unsupported, "DeviceBuffer: this build of mixq has no CUDA support");
}

}  // namespace mixq

namespace mixq {

void cuda_copy_rows(void*, size_t, const void*, size_t, size_t, int64_t, int, void*) {
  MIXQ_FAIL(ErrorCode::Unsupported, "copy_rows: this build of mixq has no CUDA support");
}
void* cuda_alloc_async(size_t, int, void*) {
  MIXQ_FAIL(ErrorCode::Unsupported, "device memory: this build of mixq has no CUDA support");
}
void cuda_free_async(void*, int, void*) {}
void cuda_epilogue_in_place(const TensorView&, const Epilogue&, void*) {
  MIXQ_FAIL(ErrorCode::Unsupported, "epilogue: this build of mixq has no CUDA support");
}
StreamFork::StreamFork(int, int) {
  MIXQ_FAIL(ErrorCode::Unsupported, "StreamFork: this build of mixq has no CUDA support");
}
StreamFork::~StreamFork() = default;
void StreamFork::fork(int, void*) {}
void StreamFork::join(void*) {}

}  // namespace mixq
