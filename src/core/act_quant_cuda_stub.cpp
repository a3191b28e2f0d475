// Built only without CUDA (the name ends in cuda_stub.cpp, which CMake excludes from CUDA
// builds): CUDA tensors passed to the activation quantizers are reported as unsupported.
#include "core/act_quant_dispatch.hpp"
#include "mixq/error.hpp"

namespace mixq::detail {

void quantize_activations_fp8_block_cuda(const TensorView&, const TensorView&, const TensorView&,
                                         const ExecContext&) {
  MIXQ_FAIL(ErrorCode::Unsupported, "quantize_activations_fp8_block: CUDA tensors, but this "
            "build of mixq has no CUDA support (configure with -DMIXQ_CUDA=ON)");
}

void quantize_activations_int8_block_cuda(const TensorView&, int64_t, const TensorView&,
                                          const TensorView&, const TensorView&, const TensorView&,
                                          const ExecContext&) {
  MIXQ_FAIL(ErrorCode::Unsupported, "quantize_activations_int8_block: CUDA tensors, but this "
            "build of mixq has no CUDA support (configure with -DMIXQ_CUDA=ON)");
}

}  // namespace mixq::detail
