// Host entry points of the grouped INT8 W8A8 block GEMM: each expert's descriptors, the argument
// checks, then the configuration for the K block and offsets (sm90_w8a8_grouped_launch.cuh).
#include "cuda/launch/sm90_w8a8_grouped.hpp"

#include "cuda/kernels/common/int8_params.hpp"
#include "cuda/runtime/tensor_map.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

// sm90_w8a8_grouped_launch.cuh, instantiated in sm90_w8a8_grouped_g{64,128}.cu
template <bool kOffset, int G>
void launch_w8a8_grouped(const Sm90Int8GroupedArgs& a, cudaStream_t stream);

const char* sm90_int8_grouped_name() { return "sm90_i8_grouped_128x128"; }

void make_sm90_int8_expert_maps(const Int8ExpertWeights& w, int64_t N, int64_t K, int g,
                                bool offset, CUtensorMap* out) {
  MIXQ_CHECK(g == 64 || g == 128, ErrorCode::Unsupported, "grouped int8 gemm: K block ", g,
             " (64 or 128)");
  const int64_t nkb = (K + g - 1) / g;
  MIXQ_CHECK(w.codes && w.sw && w.r1w && w.ldb >= K && w.ldb % 16 == 0 && w.Np >= N &&
                 w.Np % kInt8PadN == 0 && w.r1_ld == int8_rank1_pitch(nkb),
             ErrorCode::Internal, "grouped int8 gemm: an expert's prepared weight (ldb ", w.ldb,
             ", Np ", w.Np, ", r1_ld ", w.r1_ld, ") does not fit N ", N, ", K ", K, ", K block ", g);
  constexpr int kBN = kSm90Int8GroupedTileN;
  // codes: boxes of 128 K x the N tile (columns past K read as zeros: TMA fill)
  out[0] = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, w.codes, uint64_t(K), uint64_t(N),
                              uint64_t(w.ldb), 128, kBN, CU_TENSOR_MAP_SWIZZLE_128B);
  // sw: [K blocks][Np], a stage's 128 / g blocks of the N tile
  out[1] = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, w.sw, uint64_t(w.Np), uint64_t(nkb),
                              uint64_t(w.Np) * 4, kBN, uint32_t(128 / g), CU_TENSOR_MAP_SWIZZLE_NONE);
  // the rank-1 planes: 8 K blocks (32 bytes) x the N tile, the 32-byte swizzle of the tf32 MMA's B
  out[2] = make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, w.r1w, uint64_t(w.r1_ld),
                              uint64_t((offset ? 4 : 2) * w.Np), uint64_t(w.r1_ld) * 4,
                              uint32_t(kInt8Rank1Blocks), kBN, CU_TENSOR_MAP_SWIZZLE_32B);
}

void launch_sm90_int8_grouped_gemm(const Sm90Int8GroupedArgs& a, cudaStream_t stream) {
  const BlockGroupedCall& c = a.call;
  check_block_grouped_call(c, int64_t(1) << 30, "sm90 int8 grouped gemm");
  MIXQ_CHECK(a.g == 64 || a.g == 128, ErrorCode::Unsupported, "sm90 int8 grouped gemm: K block ",
             a.g, " (64 or 128)");
  MIXQ_CHECK_ARG(a.lda >= c.K && a.lda % 16 == 0 && a.ld_meta >= c.rows && a.ld_meta % 4 == 0 &&
                     a.Np >= c.N && a.Np % kInt8PadN == 0,
                 "sm90 int8 grouped gemm: lda ", a.lda, " (>= K, a multiple of 16), ld_meta ",
                 a.ld_meta, " (>= rows, a multiple of 4) or Np ", a.Np);
  MIXQ_CHECK(a.a && a.sx && a.ox && (!a.offset || a.sumx), ErrorCode::Internal,
             "sm90 int8 grouped gemm: missing activation codes or meta");
  if (c.max_tiles == 0) return;
  if (a.g == 64) {
    if (a.offset) launch_w8a8_grouped<true, 64>(a, stream);
    else launch_w8a8_grouped<false, 64>(a, stream);
  } else {
    if (a.offset) launch_w8a8_grouped<true, 128>(a, stream);
    else launch_w8a8_grouped<false, 128>(a, stream);
  }
}

}  // namespace mixq::cuda
