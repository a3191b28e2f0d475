// Instantiations and launcher of the few-input-channel conv kernels (kernels/conv/sm80_conv_stem.cuh):
// f16 / bf16 operands, Ci 1-4, 64- or 128-pixel tiles, the patch by the threads or (sm_90) by TMA.
#include <algorithm>

#include "cuda/kernels/conv/sm80_conv_stem.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

namespace {

// Persistent grid: at most the blocks resident at once (each dequantizes the weight once), split
// over the 64-channel tiles.
template <class Kernel, class... Args>
void launch_persistent(Kernel* kernel, const ConvStemParams& s, int sms, cudaStream_t stream,
                       const Args&... args) {
  if (s.smem_bytes > 48 * 1024)
    MIXQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(s.smem_bytes)));
  int per_sm = 0;
  MIXQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kStemThreads,
                                                                s.smem_bytes));
  const int64_t resident = int64_t(std::max(per_sm, 1)) * std::max(sms, 1);
  const int co_tiles = (s.g.Co + kStemBN - 1) / kStemBN;
  const int64_t grid_x = std::max<int64_t>(1, std::min<int64_t>(s.pixel_tiles, (resident + co_tiles - 1) / co_tiles));
  kernel<<<dim3(unsigned(grid_x), unsigned(co_tiles)), kStemThreads, s.smem_bytes, stream>>>(s, args...);
}

// The TMA form's map: x as [B][H][W * Ci] 16-bit elements, a warp's box [Kh][box_w].
template <typename T, int CI, int MF>
void launch_stem(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if (!s.tma) return launch_persistent(conv::conv_stem_kernel<T, CI, MF>, s, sms, stream);
  const ConvIgemmParams& g = s.g;
  const uint64_t row = uint64_t(g.W) * CI;
  const CUtensorMap xmap = make_tensor_map_3d(
      CU_TENSOR_MAP_DATA_TYPE_UINT16, g.x, row, uint64_t(g.H), uint64_t(g.B), row * 2,
      row * 2 * uint64_t(g.H), uint32_t(s.box_w), uint32_t(g.Kh), 1);
  launch_persistent(conv::conv_stem_tma_kernel<T, CI, MF>, s, sms, stream, xmap);
}

template <typename T, int CI>
void launch_stem_mf(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if (s.mf == 2) launch_stem<T, CI, 2>(s, sms, stream);
  else launch_stem<T, CI, 1>(s, sms, stream);
}

template <typename T>
void launch_stem_ci(const ConvStemParams& s, int sms, cudaStream_t stream) {
  switch (s.g.Ci) {
    case 1: launch_stem_mf<T, 1>(s, sms, stream); break;
    case 2: launch_stem_mf<T, 2>(s, sms, stream); break;
    case 3: launch_stem_mf<T, 3>(s, sms, stream); break;
    default: launch_stem_mf<T, 4>(s, sms, stream); break;
  }
}

}  // namespace

void launch_conv_stem(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if (s.g.x_type == IoType::F16) launch_stem_ci<half>(s, sms, stream);
  else launch_stem_ci<__nv_bfloat16>(s, sms, stream);
  MIXQ_CUDA_CHECK_LAUNCH("conv_stem");
}

std::string conv_stem_name(IoType x_type, bool tma) {
  return std::string(tma ? "sm90_conv_stem_tma_" : "sm80_conv_stem_") +
         (x_type == IoType::F16 ? "f16" : "bf16");
}

}  // namespace mixq::cuda
