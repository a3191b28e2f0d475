// Kernel choice for the INT8 GEMMs (by compute capability and M) and the sm_80 launchers.
#include <string>

#include "cuda/int8_gemm.hpp"
#include "cuda/int8_gemm_launch.cuh"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

void launch_tile(const Int8GemmParams& p, int tile, cudaStream_t stream) {
  MIXQ_CHECK(p.mode == Int8Mode::Tensor ? p.kb == kInt8TensorBlockK : (p.kb == 64 || p.kb == 128),
             ErrorCode::Internal, "int8 gemm: K block ", p.kb, " has no kernel");
  if (p.mode == Int8Mode::Tensor) int8k::launch_tensor(p, tile, stream);
  else if (p.kb == 64) int8k::launch_block_g64(p, tile, stream);
  else int8k::launch_block_g128(p, tile, stream);
}

constexpr Int8GemmKernel kSmall{"sm80_i8_16x32", launch_sm80_int8_small};
constexpr Int8GemmKernel kMedium{"sm80_i8_64x64", launch_sm80_int8_medium};
constexpr Int8GemmKernel kLarge{"sm80_i8_128x128", launch_sm80_int8_large};

}  // namespace

void launch_sm80_int8_small(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 0, s); }
void launch_sm80_int8_medium(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 1, s); }
void launch_sm80_int8_large(const Int8GemmParams& p, cudaStream_t s) { launch_tile(p, 2, s); }

int64_t int8_small_max_m(const DeviceCaps&) { return 16; }
int64_t int8_medium_max_m(const DeviceCaps&) { return 128; }

std::string int8_gemm_kernel_names(Int8Mode, int, bool) {
  return std::string(kSmall.name) + ", " + kMedium.name + ", " + kLarge.name;
}

Int8GemmKernel select_int8_gemm(const DeviceCaps& caps, Int8Mode mode, int kb, bool offset,
                                int64_t M, const std::string& force) {
  if (!force.empty()) {
    for (const Int8GemmKernel& k : {kSmall, kMedium, kLarge})
      if (force == k.name) return k;
    MIXQ_FAIL(ErrorCode::InvalidArgument, "int8 gemm: force_kernel '", force, "' is not one of ",
              int8_gemm_kernel_names(mode, kb, offset));
  }
  // A Hopper wgmma kernel plugs in here (caps.cc_major == 9) once it exists.
  if (M <= int8_small_max_m(caps)) return kSmall;
  if (M <= int8_medium_max_m(caps)) return kMedium;
  return kLarge;
}

}  // namespace mixq::cuda
