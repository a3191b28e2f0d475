// Built when mixq is configured without NCCL: the tensor-parallel collectives say so clearly.
#include "mixq/error.hpp"
#include "mixq/nccl.hpp"

namespace mixq {

namespace {
[[noreturn]] void no_nccl(const char* what) {
  MIXQ_FAIL(ErrorCode::Unsupported, what, ": this build of mixq has no NCCL (configure a CUDA "
            "build with NCCL present: python3 -m pip install nvidia-nccl-cu13, or apt-get install "
            "libnccl-dev; -DMIXQ_NCCL=ON makes its absence an error)");
}
}  // namespace

bool nccl_available() { return false; }
std::shared_ptr<Collectives> nccl_collectives(ncclComm_t) { no_nccl("nccl_collectives"); }
std::vector<std::shared_ptr<Collectives>> nccl_local_collectives(const std::vector<int>&) {
  no_nccl("nccl_local_collectives");
}
std::string nccl_unique_id() { no_nccl("nccl_unique_id"); }
std::shared_ptr<Collectives> nccl_rank_collectives(const std::string&, int, int, int) {
  no_nccl("nccl_rank_collectives");
}
NcclGroup::NcclGroup() { no_nccl("NcclGroup"); }
NcclGroup::~NcclGroup() noexcept(false) {}

}  // namespace mixq
