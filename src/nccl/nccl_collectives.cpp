// mixq/nccl.hpp on NCCL (compiled only when CMake found it; src/core/nccl_stub.cpp otherwise).
#include "mixq/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "cuda/runtime/stream_fence.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

#define MIXQ_NCCL_CHECK(expr)                                                              \
  do {                                                                                     \
    const ncclResult_t r_ = (expr);                                                        \
    MIXQ_CHECK(r_ == ncclSuccess, ErrorCode::Cuda, #expr " failed: ", ncclGetErrorString(r_)); \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default: break;
  }
  MIXQ_FAIL(ErrorCode::InvalidArgument, "nccl collectives: dtype ", dtype_name(t),
            " (f32, f16 or bf16 only)");
}

// The libnccl loaded at run time must be the release mixq was compiled against (its structs and
// enums are not stable across releases: a wheel's header with another libnccl hangs or fails).
void check_library_version() {
  int v = 0;
  MIXQ_NCCL_CHECK(ncclGetVersion(&v));
  MIXQ_CHECK(v / 100 == NCCL_VERSION_CODE / 100, ErrorCode::Unsupported, "nccl: the libnccl loaded "
             "at run time is version ", v, ", mixq was built against ", NCCL_VERSION_CODE,
             " (rebuild mixq against the same NCCL, or put that libnccl first on the loader path)");
}

// NCCL 2.28.0 - 2.30.6 launches its symmetric-window kernels on sm_90+ with programmatic stream
// serialization but without a wait for the previous grid (fixed in 2.30.7): an all-reduce in a
// window could sum a partial product the GEMM before it had not finished storing (seen on two
// H200s as NaN poison in a registered sum, one run in three). On those releases every collective
// goes behind a stream fence (cuda/runtime/stream_fence.hpp), whether or not its buffer is a
// window: a buffer the caller registered itself is not known here.
bool symmetric_kernels_skip_grid_wait(int device) {
  int v = 0, major = 0;
  MIXQ_NCCL_CHECK(ncclGetVersion(&v));
  MIXQ_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9 && v >= NCCL_VERSION(2, 28, 0) && v < NCCL_VERSION(2, 30, 7);
}

class NcclCollectives final : public Collectives,
                              public std::enable_shared_from_this<NcclCollectives> {
 public:
  NcclCollectives(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
    MIXQ_CHECK_ARG(comm != nullptr, "nccl_collectives: comm is null");
    check_library_version();
    int n = 0, r = 0, d = 0;
    MIXQ_NCCL_CHECK(ncclCommCount(comm, &n));
    MIXQ_NCCL_CHECK(ncclCommUserRank(comm, &r));
    MIXQ_NCCL_CHECK(ncclCommCuDevice(comm, &d));
    world_ = n;
    rank_ = r;
    device_ = d;
    fence_before_kernels_ = symmetric_kernels_skip_grid_wait(d);
  }
  ~NcclCollectives() override {
    if (host_buf_) cudaFree(host_buf_);
    if (setup_stream_) cudaStreamDestroy(setup_stream_);
    if (owned_) ncclCommDestroy(comm_);
  }
  int64_t rank() const override { return rank_; }
  int64_t world() const override { return world_; }
  Device device() const override { return Device::CUDA; }
  int device_index() const override { return device_; }
  std::string name() const override { return "nccl"; }

  void all_reduce_sum(void* buf, int64_t count, DType dtype, void* stream) override {
    cuda::DeviceGuard guard(device_);
    if (fence_before_kernels_) cuda::launch_stream_fence(static_cast<cudaStream_t>(stream));
    MIXQ_NCCL_CHECK(ncclAllReduce(buf, buf, size_t(count), nccl_type(dtype), ncclSum, comm_,
                                  static_cast<cudaStream_t>(stream)));
  }
  void all_gather(const void* send, void* recv, int64_t count, DType dtype, void* stream) override {
    cuda::DeviceGuard guard(device_);
    if (fence_before_kernels_) cuda::launch_stream_fence(static_cast<cudaStream_t>(stream));
    MIXQ_NCCL_CHECK(ncclAllGather(send, recv, size_t(count), nccl_type(dtype), comm_,
                                  static_cast<cudaStream_t>(stream)));
  }
  // Set-up exchanges go through a small device buffer kept for the communicator's lifetime:
  // allocating and freeing per call could wait for a peer rank's kernels (cudaFree) while that
  // rank waits for this one in the same collective.
  void all_gather_host(const void* send, void* out, size_t bytes) override {
    cuda::DeviceGuard guard(device_);
    const size_t padded = (bytes + 15) / 16 * 16;
    if (padded * size_t(world_) > host_buf_bytes_) {
      if (host_buf_) cudaFree(host_buf_);
      host_buf_ = nullptr;
      host_buf_bytes_ = std::max<size_t>(padded * size_t(world_), 4096);
      MIXQ_CUDA_CHECK(cudaMalloc(&host_buf_, host_buf_bytes_));
    }
    if (!setup_stream_) MIXQ_CUDA_CHECK(cudaStreamCreateWithFlags(&setup_stream_, cudaStreamNonBlocking));
    char* buf = static_cast<char*>(host_buf_);
    char* mine = buf + padded * size_t(rank_);
    MIXQ_CUDA_CHECK(cudaMemcpyAsync(mine, send, bytes, cudaMemcpyHostToDevice, setup_stream_));
    MIXQ_NCCL_CHECK(ncclAllGather(mine, buf, padded, ncclUint8, comm_, setup_stream_));
    for (int64_t r = 0; r < world_; ++r)
      MIXQ_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out) + bytes * size_t(r), buf + padded * size_t(r),
                                      bytes, cudaMemcpyDeviceToHost, setup_stream_));
    MIXQ_CUDA_CHECK(cudaStreamSynchronize(setup_stream_));
  }

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  // ncclMemAlloc'd (CUDA VMM) memory registered as a symmetric window. Every rank allocates alike,
  // so every rank's buffer sits at the same offset of the same registration, which is what lets
  // NCCL run its symmetric kernels on it: on NVLink they load and store the peers' memory
  // directly instead of staging through the channel buffers, which is most of a small
  // all-reduce's latency. The deleter deregisters (a collective, like the registration) and
  // frees, and keeps this communicator alive until then.
  std::shared_ptr<void> alloc_collective_buffer(size_t bytes) override {
    cuda::DeviceGuard guard(device_);
    bytes = std::max<size_t>(bytes, 1);
    void* p = nullptr;
    MIXQ_NCCL_CHECK(ncclMemAlloc(&p, bytes));
    ncclWindow_t win = nullptr;
    const ncclResult_t r = ncclCommWindowRegister(comm_, p, bytes, &win, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) {
      ncclMemFree(p);
      MIXQ_FAIL(ErrorCode::Cuda, "nccl: ncclCommWindowRegister of ", bytes, " bytes on rank ", rank_,
                " failed: ", ncclGetErrorString(r));
    }
    std::shared_ptr<NcclCollectives> self = shared_from_this();
    return std::shared_ptr<void>(p, [self, win](void* q) {
      cuda::QuietDeviceGuard g(self->device_);  // a deleter must not throw: errors are dropped
      ncclCommWindowDeregister(self->comm_, win);
      ncclMemFree(q);
    });
  }
#endif

 private:
  ncclComm_t comm_;
  bool owned_;
  int64_t rank_ = 0, world_ = 1;
  int device_ = 0;
  bool fence_before_kernels_ = false;
  void* host_buf_ = nullptr;
  size_t host_buf_bytes_ = 0;
  cudaStream_t setup_stream_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }

std::shared_ptr<Collectives> nccl_collectives(ncclComm_t comm) {
  return std::make_shared<NcclCollectives>(comm, false);
}

std::vector<std::shared_ptr<Collectives>> nccl_local_collectives(const std::vector<int>& devices) {
  MIXQ_CHECK_ARG(!devices.empty(), "nccl_local_collectives: no devices");
  int count = 0;
  MIXQ_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (size_t i = 0; i < devices.size(); ++i) {
    MIXQ_CHECK_ARG(devices[i] >= 0 && devices[i] < count, "nccl_local_collectives: devices[", i,
                   "] = ", devices[i], " is not a CUDA device (", count, " present)");
    for (size_t j = 0; j < i; ++j)
      MIXQ_CHECK_ARG(devices[i] != devices[j], "nccl_local_collectives: device ", devices[i],
                     " is listed twice");
  }
  check_library_version();
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  MIXQ_NCCL_CHECK(ncclCommInitAll(comms.data(), int(devices.size()), devices.data()));
  std::vector<std::shared_ptr<Collectives>> out;
  for (ncclComm_t c : comms) out.push_back(std::make_shared<NcclCollectives>(c, true));
  return out;
}

std::string nccl_unique_id() {
  check_library_version();
  ncclUniqueId id;
  MIXQ_NCCL_CHECK(ncclGetUniqueId(&id));
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * NCCL_UNIQUE_ID_BYTES);
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) {
    const auto b = static_cast<unsigned char>(id.internal[i]);
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

std::shared_ptr<Collectives> nccl_rank_collectives(const std::string& unique_id_hex, int rank,
                                                   int world, int device) {
  MIXQ_CHECK_ARG(unique_id_hex.size() == size_t(2 * NCCL_UNIQUE_ID_BYTES),
                 "nccl_rank_collectives: unique_id_hex has ", unique_id_hex.size(),
                 " characters, expected ", 2 * NCCL_UNIQUE_ID_BYTES, " (nccl_unique_id's hex digits)");
  for (size_t i = 0; i < unique_id_hex.size(); ++i) {
    const auto c = static_cast<unsigned char>(unique_id_hex[i]);
    MIXQ_CHECK_ARG(std::isxdigit(c), "nccl_rank_collectives: unique_id_hex[", i, "] (character code ",
                   int(c), ") is not a hex digit");
  }
  MIXQ_CHECK_ARG(world >= 1, "nccl_rank_collectives: world (", world, ") must be at least 1");
  MIXQ_CHECK_ARG(rank >= 0 && rank < world, "nccl_rank_collectives: rank (", rank,
                 ") must be in [0, world = ", world, ")");
  int count = 0;
  MIXQ_CUDA_CHECK(cudaGetDeviceCount(&count));
  MIXQ_CHECK_ARG(device >= 0 && device < count, "nccl_rank_collectives: device ", device,
                 " is not a CUDA device (", count, " present)");
  check_library_version();
  auto nibble = [](char c) {
    return c <= '9' ? c - '0' : (std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  };
  ncclUniqueId id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i)
    id.internal[i] =
        char(nibble(unique_id_hex[size_t(2 * i)]) << 4 | nibble(unique_id_hex[size_t(2 * i + 1)]));
  MIXQ_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  MIXQ_NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  try {
    return std::make_shared<NcclCollectives>(comm, true);
  } catch (...) {
    ncclCommDestroy(comm);  // the Collectives that would own it failed to start
    throw;
  }
}

NcclGroup::NcclGroup() { MIXQ_NCCL_CHECK(ncclGroupStart()); }
NcclGroup::~NcclGroup() noexcept(false) { MIXQ_NCCL_CHECK(ncclGroupEnd()); }

}  // namespace mixq
