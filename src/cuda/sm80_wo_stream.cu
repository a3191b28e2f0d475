// Dispatch of the streaming kernel by activation type (the instantiations live in
// sm80_wo_stream_{f16,bf16,f32}.cu).
#include "cuda/wo_stream_launch.cuh"

namespace mixq::cuda {

void launch_wo_stream_f16(const WoStreamParams&, int, int, dim3, size_t, cudaStream_t);
void launch_wo_stream_bf16(const WoStreamParams&, int, int, dim3, size_t, cudaStream_t);
void launch_wo_stream_f32(const WoStreamParams&, int, int, dim3, size_t, cudaStream_t);

void launch_wo_stream(const WoStreamParams& p, int mt, int codes, dim3 grid, size_t smem,
                      cudaStream_t stream) {
  switch (p.x_type) {
    case IoType::F16: return launch_wo_stream_f16(p, mt, codes, grid, smem, stream);
    case IoType::BF16: return launch_wo_stream_bf16(p, mt, codes, grid, smem, stream);
    case IoType::F32: return launch_wo_stream_f32(p, mt, codes, grid, smem, stream);
  }
}

}  // namespace mixq::cuda
