// NCCL collectives for the tensor-parallel layers (mixq/parallel.hpp). Built when CMake finds NCCL
// (MIXQ_NCCL=AUTO/ON: Debian's libnccl-dev, the CUDA toolkit's, or PyPI's nvidia-nccl wheel);
// otherwise every entry point throws Unsupported and nccl_available() is false.
#pragma once

#include <memory>
#include <vector>

#include "mixq/parallel.hpp"

typedef struct ncclComm* ncclComm_t;  // as nccl.h declares it

namespace mixq {

// True when this build of mixq has NCCL.
bool nccl_available();

// The caller's communicator (one rank, on the device it was created on), not owned: destroy it
// after the layers that use it. Collectives run on the stream of each call (graph-capturable).
std::shared_ptr<Collectives> nccl_collectives(ncclComm_t comm);

// One process driving several GPUs: a communicator per device in `devices` (rank i on
// devices[i], ncclCommInitAll), each owned by its Collectives. Drive each rank from its own
// thread (or bracket the calls of all ranks in one NcclGroup); a ParallelLinear's construction
// is a collective, so the ranks' constructors must run concurrently.
std::vector<std::shared_ptr<Collectives>> nccl_local_collectives(const std::vector<int>& devices);

// ncclGroupStart / ncclGroupEnd for the lifetime of the object.
class NcclGroup {
 public:
  NcclGroup();
  ~NcclGroup() noexcept(false);
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
};

}  // namespace mixq
