// Instantiations and launcher of the few-input-channel conv kernels (kernels/conv/sm80_conv_stem.cuh):
// f16 / bf16 operands, Ci 1-4, 64- or 128-pixel tiles, the patch by the threads or (sm_90) by TMA.
#include <algorithm>
#include <mutex>
#include <vector>

#include "cuda/kernels/conv/sm80_conv_stem.cuh"
#include "cuda/kernels/conv/stem_int8_input.cuh"
#include "cuda/launch/conv_kernels.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/tensor_map.hpp"

namespace mixq::cuda {

namespace {

// Blocks of `kernel` resident on an SM with `smem` bytes of dynamic shared memory, asked of the
// driver once per (device, smem) and not at every launch; the kernel's shared-memory limit is
// raised on the way, never lowered (another thread may be launching it with more).
template <class Kernel>
int stem_blocks_per_sm(Kernel* kernel, size_t smem) {
  struct Entry {
    int device;
    size_t smem;
    int blocks;
  };
  static std::mutex mu;
  static std::vector<Entry> known;
  int device = 0;
  MIXQ_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  size_t limit = 48 * 1024;  // the largest smem this kernel was launched with on the device
  for (const Entry& e : known) {
    if (e.device != device) continue;
    if (e.smem == smem) return e.blocks;
    limit = std::max(limit, e.smem);
  }
  if (smem > limit)
    MIXQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int blocks = 0;
  MIXQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kStemThreads, smem));
  known.push_back({device, smem, blocks});
  return blocks;
}

// Persistent grid: at most the blocks resident at once (each dequantizes the weight once), split
// over the 64-channel tiles.
template <class Kernel, class... Args>
void launch_persistent(Kernel* kernel, const ConvStemParams& s, int sms, cudaStream_t stream,
                       const Args&... args) {
  const int per_sm = stem_blocks_per_sm(kernel, s.smem_bytes);
  const int64_t resident = int64_t(std::max(per_sm, 1)) * std::max(sms, 1);
  const int co_tiles = (s.g.Co + kStemBN - 1) / kStemBN;
  const int64_t grid_x = std::max<int64_t>(1, std::min<int64_t>(s.pixel_tiles, (resident + co_tiles - 1) / co_tiles));
  kernel<<<dim3(unsigned(grid_x), unsigned(co_tiles)), kStemThreads, s.smem_bytes, stream>>>(s, args...);
}

// The TMA form's map: x as [B][H][W * Ci] 16-bit elements, a warp's box [Kh][box_w].
// RQ: the INT8 stem's requantizing epilogue (f16 operands only).
template <typename T, int CI, int MF, bool RQ>
void launch_stem(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if (!s.tma) return launch_persistent(conv::conv_stem_kernel<T, CI, MF, RQ>, s, sms, stream);
  const ConvIgemmParams& g = s.g;
  const uint64_t row = uint64_t(g.W) * CI;
  const CUtensorMap xmap = make_tensor_map_3d(
      CU_TENSOR_MAP_DATA_TYPE_UINT16, g.x, row, uint64_t(g.H), uint64_t(g.B), row * 2,
      row * 2 * uint64_t(g.H), uint32_t(s.box_w), uint32_t(g.Kh), 1);
  launch_persistent(conv::conv_stem_tma_kernel<T, CI, MF, RQ>, s, sms, stream, xmap);
}

// (the INT8 stem plans 64-pixel tiles only: conv_stem_plan's max_mf)
template <typename T, int CI, bool RQ>
void launch_stem_mf(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if constexpr (!RQ) {
    if (s.mf == 2) return launch_stem<T, CI, 2, RQ>(s, sms, stream);
  }
  MIXQ_CHECK(s.mf == 1, ErrorCode::Internal, "conv stem: the INT8 stem's tiles are 64 pixels");
  launch_stem<T, CI, 1, RQ>(s, sms, stream);
}

template <typename T, bool RQ = false>
void launch_stem_ci(const ConvStemParams& s, int sms, cudaStream_t stream) {
  switch (s.g.Ci) {
    case 1:
      launch_stem_mf<T, 1, RQ>(s, sms, stream);
      break;
    case 2:
      launch_stem_mf<T, 2, RQ>(s, sms, stream);
      break;
    case 3:
      launch_stem_mf<T, 3, RQ>(s, sms, stream);
      break;
    default:
      launch_stem_mf<T, 4, RQ>(s, sms, stream);
      break;
  }
}

// A grid of at most 8 blocks of 256 an SM for the elementwise input pass.
unsigned elementwise_grid(int64_t items, int sms) {
  return unsigned(
      std::max<int64_t>(1, std::min<int64_t>((items + 255) / 256, int64_t(8) * std::max(sms, 1))));
}

}  // namespace

void launch_conv_stem(const ConvStemParams& s, int sms, cudaStream_t stream) {
  if (s.requant) {
    MIXQ_CHECK(s.g.x_type == IoType::F16 && !s.g.nchw, ErrorCode::Internal,
               "conv stem: the INT8 stem reads an f16 NHWC copy");
    launch_stem_ci<half, true>(s, sms, stream);
  } else if (s.g.x_type == IoType::F16) {
    launch_stem_ci<half>(s, sms, stream);
  } else {
    launch_stem_ci<__nv_bfloat16>(s, sms, stream);
  }
  MIXQ_CUDA_CHECK_LAUNCH("conv_stem");
}

void launch_conv_stem_i8_input(const int8_t* x, void* xc, int64_t batch, int Ci, int64_t hw,
                               bool nchw, int zero, int sms, cudaStream_t stream) {
  MIXQ_CHECK(Ci >= 1 && Ci <= kStemMaxCi, ErrorCode::Internal, "conv stem int8 input: Ci ", Ci);
  __half* dst = static_cast<__half*>(xc);
  if (!nchw || Ci == 1) {  // one channel: both layouts are the same run
    const int64_t n = batch * hw * Ci;
    conv::stem_i8_nhwc_to_f16_kernel<<<elementwise_grid(n / 8 + 1, sms), 256, 0, stream>>>(x, dst,
                                                                                           n, zero);
  } else {
    const unsigned grid = elementwise_grid(batch * hw, sms);
    switch (Ci) {
      case 2:
        conv::stem_i8_nchw_to_f16_kernel<2><<<grid, 256, 0, stream>>>(x, dst, batch, hw, zero);
        break;
      case 3:
        conv::stem_i8_nchw_to_f16_kernel<3><<<grid, 256, 0, stream>>>(x, dst, batch, hw, zero);
        break;
      default:
        conv::stem_i8_nchw_to_f16_kernel<4><<<grid, 256, 0, stream>>>(x, dst, batch, hw, zero);
        break;
    }
  }
  MIXQ_CUDA_CHECK_LAUNCH("conv_stem_i8_input");
}

std::string conv_stem_i8_name(bool tma) {
  return tma ? "sm90_conv_stem_tma_i8" : "sm80_conv_stem_i8";
}

std::string conv_stem_name(IoType x_type, bool tma) {
  return std::string(tma ? "sm90_conv_stem_tma_" : "sm80_conv_stem_") +
         (x_type == IoType::F16 ? "f16" : "bf16");
}

}  // namespace mixq::cuda
