// NCCL collectives for the tensor-parallel layers (mixq/parallel.hpp). Built when CMake finds NCCL
// (MIXQ_NCCL=AUTO/ON: Debian's libnccl-dev, the CUDA toolkit's, or PyPI's nvidia-nccl wheel);
// otherwise every entry point throws Unsupported and nccl_available() is false.
#pragma once

#include <memory>
#include <string>
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

// One process per GPU. nccl_unique_id makes a communicator's identity (ncclGetUniqueId's 128
// bytes as 256 lowercase hex digits, text that passes through a command line or a file); one
// process calls it and hands the string to every rank. Its bootstrap listens in the calling
// process, which must stay alive until every rank has joined.
std::string nccl_unique_id();

// This process's rank `rank` of `world` (cudaSetDevice(device), then ncclCommInitRank with the
// id from nccl_unique_id), owned by the returned Collectives. A collective: every rank calls it
// with the same id and world, and it returns once all have.
std::shared_ptr<Collectives> nccl_rank_collectives(const std::string& unique_id_hex, int rank,
                                                   int world, int device);

// ncclGroupStart / ncclGroupEnd for the lifetime of the object.
class NcclGroup {
 public:
  NcclGroup();
  ~NcclGroup() noexcept(false);
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
};

}  // namespace mixq
