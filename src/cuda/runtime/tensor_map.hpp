// Host-side TMA tensor maps (CUtensorMap) for the Hopper kernels. cuTensorMapEncodeTiled is a
// driver API function; it is looked up through the runtime (cudaGetDriverEntryPointByVersion) so
// the library does not link libcuda. Encoding is a pure host computation (no GPU work, no sync),
// so maps are built per launch and passed as __grid_constant__ kernel parameters, which keeps
// launches CUDA-graph capturable.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/common/im2col_conv.hpp"
#include "cuda/runtime/check.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

using TensorMapEncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                          const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                          const cuuint32_t*, CUtensorMapInterleave,
                                          CUtensorMapSwizzle, CUtensorMapL2promotion,
                                          CUtensorMapFloatOOBfill);

// A driver API function looked up once through the runtime (no libcuda link).
template <class Fn>
Fn driver_function(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  MIXQ_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  MIXQ_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr, ErrorCode::Cuda, name,
             " is not available from the CUDA driver (status ", int(q), ")");
  return reinterpret_cast<Fn>(p);
}

inline TensorMapEncodeTiled tensor_map_encoder() {
  static const TensorMapEncodeTiled fn = driver_function<TensorMapEncodeTiled>("cuTensorMapEncodeTiled");
  return fn;
}

// 2-D map over a row-major matrix: dim0 elements contiguous, dim1 rows `row_bytes` apart.
// Reads outside [0, dim0) x [0, dim1) return zeros.
inline CUtensorMap make_tensor_map_2d(CUtensorMapDataType type, const void* base, uint64_t dim0,
                                      uint64_t dim1, uint64_t row_bytes, uint32_t box0,
                                      uint32_t box1, CUtensorMapSwizzle swizzle) {
  MIXQ_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0 && row_bytes % 16 == 0 && dim0 > 0 &&
                 dim1 > 0,
             ErrorCode::InvalidArgument, "tensor map: base ", base, " and row pitch ", row_bytes,
             " must be 16-byte aligned, dims (", dim0, ", ", dim1, ") positive");
  CUtensorMap map;
  const cuuint64_t dims[2] = {dim0, dim1};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box0, box1};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, type, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MIXQ_CHECK(r == CUDA_SUCCESS, ErrorCode::Cuda, "cuTensorMapEncodeTiled failed (", int(r),
             ") for dims (", dim0, ", ", dim1, "), pitch ", row_bytes, ", box (", box0, ", ", box1,
             ")");
  return map;
}

// Whether TMA can store a [rows][N] matrix of 16-bit values at `base`, rows `ld` elements apart,
// element for element: a 16-byte aligned base, a pitch that is a multiple of 16 bytes (below the
// 2^40-byte stride limit), and rows that end on a 16-byte boundary (N % 8 == 0). On the H100 a
// store clipped at N inside a 16-byte chunk wrote the whole chunk, columns past N included
// (docs/decisions/wo-wgmma-tma-store-epilogue.md). The TMA-store epilogues (weight-only wgmma kernel, block GEMMs)
// and the planner that counts on one ask this.
inline bool tma_stores_16bit_rows(const void* base, int64_t ld, int64_t N) {
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && ld % 8 == 0 && N % 8 == 0 && ld < (int64_t(1) << 39);
}

// 3-D map, no swizzle: dim0 elements contiguous, dim1 / dim2 strides in bytes (16-byte multiples).
// Reads outside the dims return zeros (and still count in the transaction bytes).
inline CUtensorMap make_tensor_map_3d(CUtensorMapDataType type, const void* base, uint64_t dim0,
                                      uint64_t dim1, uint64_t dim2, uint64_t stride1,
                                      uint64_t stride2, uint32_t box0, uint32_t box1, uint32_t box2) {
  MIXQ_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0 && stride1 % 16 == 0 && stride2 % 16 == 0 &&
                 dim0 > 0 && dim1 > 0 && dim2 > 0,
             ErrorCode::InvalidArgument, "tensor map: base ", base, " and strides (", stride1, ", ",
             stride2, ") must be 16-byte aligned, dims (", dim0, ", ", dim1, ", ", dim2, ") positive");
  CUtensorMap map;
  const cuuint64_t dims[3] = {dim0, dim1, dim2};
  const cuuint64_t strides[2] = {stride1, stride2};
  const cuuint32_t box[3] = {box0, box1, box2};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MIXQ_CHECK(r == CUDA_SUCCESS, ErrorCode::Cuda, "cuTensorMapEncodeTiled failed (", int(r),
             ") for dims (", dim0, ", ", dim1, ", ", dim2, "), box (", box0, ", ", box1, ", ", box2, ")");
  return map;
}

using TensorMapEncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                           const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                                           cuuint32_t, cuuint32_t, const cuuint32_t*,
                                           CUtensorMapInterleave, CUtensorMapSwizzle,
                                           CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline TensorMapEncodeIm2col tensor_map_im2col_encoder() {
  static const TensorMapEncodeIm2col fn = driver_function<TensorMapEncodeIm2col>("cuTensorMapEncodeIm2col");
  return fn;
}

// Whether a 4-D im2col map can describe the convolution: the box corners of a rank-4 map lie in
// [-128, 127] and a load's filter-tap offsets in [0, 256) (the offsets are 16 bits shared by the
// two spatial dimensions), traversal strides are at most 8, rows 16-byte aligned.
// elem_bytes: 2 (16-bit images) or 1 (int8).
inline bool im2col_map_fits(const Im2colConv& g, int elem_bytes = 2) {
  auto corners_fit = [](int pad, int dil, int k) {
    const int reach = dil * (k - 1);
    return pad <= 127 && pad - reach >= -128 && reach < 256;
  };
  return corners_fit(g.pad_w, g.dil_w, g.Kw) && corners_fit(g.pad_h, g.dil_h, g.Kh) &&
         g.stride_h >= 1 && g.stride_h <= 8 && g.stride_w >= 1 && g.stride_w <= 8 &&
         (g.Ci * elem_bytes) % 16 == 0;
}

// im2col map over x [B][H][W][C] (16-bit, contiguous): a load at coordinates (c, w, h, n) with
// tap offsets (s * dil_w, r * dil_h) brings `pixels` consecutive output pixels (W fastest, then
// H, then the image), each `channels` channels from c on, of the input at (h + r dil_h, w + s dil_w),
// where (h, w) = (ho stride_h - pad_h, wo stride_w - pad_w); positions in the padding and pixels
// past the last image read as zeros. The box's starting positions run over exactly Ho x Wo.
// type: CU_TENSOR_MAP_DATA_TYPE_UINT16 (16-bit images) or UINT8 (int8 images).
inline CUtensorMap make_tensor_map_im2col_nhwc(const void* x, const Im2colConv& g, uint32_t channels,
                                               uint32_t pixels, CUtensorMapSwizzle swizzle,
                                               CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT16) {
  const uint64_t e = type == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2;
  MIXQ_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0 && im2col_map_fits(g, int(e)), ErrorCode::InvalidArgument,
             "im2col tensor map: x ", x, " must be 16-byte aligned, Ci (", g.Ci, ") 16 bytes of channels, "
             "padding / dilation / stride within the map's ranges");
  CUtensorMap map;
  const cuuint64_t dims[4] = {uint64_t(g.Ci), uint64_t(g.W), uint64_t(g.H), uint64_t(g.B)};
  const cuuint64_t strides[3] = {uint64_t(g.Ci) * e, uint64_t(g.W) * uint64_t(g.Ci) * e,
                                 uint64_t(g.H) * uint64_t(g.W) * uint64_t(g.Ci) * e};
  const int lower[2] = {-g.pad_w, -g.pad_h};
  const int upper[2] = {g.pad_w - g.dil_w * (g.Kw - 1), g.pad_h - g.dil_h * (g.Kh - 1)};
  const cuuint32_t elem_strides[4] = {1, uint32_t(g.stride_w), uint32_t(g.stride_h), 1};
  const CUresult r = tensor_map_im2col_encoder()(
      &map, type, 4, const_cast<void*>(x), dims, strides, lower, upper,
      channels, pixels, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MIXQ_CHECK(r == CUDA_SUCCESS, ErrorCode::Cuda, "cuTensorMapEncodeIm2col failed (", int(r), ") for x [",
             g.B, "][", g.H, "][", g.W, "][", g.Ci, "], ", channels, " channels x ", pixels, " pixels");
  return map;
}

}  // namespace mixq::cuda
