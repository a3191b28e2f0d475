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
// sm90_w8a8_grouped_skinny.cuh, instantiated in sm90_w8a8_grouped_skinny_g{64,128}.cu
template <int G, bool kOffset>
void launch_i8_grouped_skinny(const Sm90Int8GroupedArgs& a, const SkinnyGroupedWork& w,
                              cudaStream_t stream);

namespace {
// The checks both grouped forms make of their activations.
void check_int8_grouped_acts(const Sm90Int8GroupedArgs& a, const char* name) {
  const BlockGroupedCall& c = a.call;
  MIXQ_CHECK(a.g == 64 || a.g == 128, ErrorCode::Unsupported, name, ": K block ", a.g, " (64 or 128)");
  MIXQ_CHECK_ARG(a.lda >= c.K && a.lda % 16 == 0 && a.ld_meta >= c.rows && a.ld_meta % 4 == 0 &&
                     a.Np >= c.N && a.Np % kInt8PadN == 0,
                 name, ": lda ", a.lda, " (>= K, a multiple of 16), ld_meta ", a.ld_meta,
                 " (>= rows, a multiple of 4) or Np ", a.Np);
  MIXQ_CHECK(a.a && a.sx && a.ox && (!a.offset || a.sumx), ErrorCode::Internal, name,
             ": missing activation codes or meta");
}
}  // namespace

const char* sm90_int8_grouped_name() { return "sm90_i8_grouped_128x128"; }

void make_sm90_int8_expert_maps(const Int8ExpertWeights& w, int64_t N, int64_t K, int g,
                                bool offset, CUtensorMap* out) {
  MIXQ_CHECK(g == 64 || g == 128, ErrorCode::Unsupported, "grouped int8 gemm: K block ", g,
             " (64 or 128)");
  const int64_t nkb = (K + g - 1) / g;
  MIXQ_CHECK(w.codes && w.sw && w.dw && (w.ow || !offset) && w.r1w && w.ldb >= K && w.ldb % 16 == 0 && w.Np >= N &&
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
  // the few-token form's sw, dw, ow: the same boxes as sw's above
  const auto col_map = [&](const float* base) {
    return make_tensor_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, uint64_t(w.Np), uint64_t(nkb),
                              uint64_t(w.Np) * 4, kBN, uint32_t(128 / g), CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  static_assert(kSm90Int8SkinnyMetaMap == 3 && kSm90Int8ExpertMaps == 6, "the maps' order");
  out[3] = out[1];
  out[4] = col_map(w.dw);
  out[5] = offset ? col_map(w.ow) : out[1];  // read only with offset weights
}

void launch_sm90_int8_grouped_gemm(const Sm90Int8GroupedArgs& a, cudaStream_t stream) {
  const BlockGroupedCall& c = a.call;
  check_block_grouped_call(c, int64_t(1) << 30, "sm90 int8 grouped gemm");
  check_int8_grouped_acts(a, "sm90 int8 grouped gemm");
  if (c.max_tiles == 0) return;
  if (a.g == 64) {
    if (a.offset) launch_w8a8_grouped<true, 64>(a, stream);
    else launch_w8a8_grouped<false, 64>(a, stream);
  } else {
    if (a.offset) launch_w8a8_grouped<true, 128>(a, stream);
    else launch_w8a8_grouped<false, 128>(a, stream);
  }
}

const char* sm90_int8_grouped_skinny_name(int mt) {
  return mt == 16   ? "sm90_i8_grouped_skinny_mt16"
         : mt == 32 ? "sm90_i8_grouped_skinny_mt32"
                    : "sm90_i8_grouped_skinny_mt64";
}

void launch_sm90_int8_grouped_skinny(const Sm90Int8GroupedArgs& a, const SkinnyGroupedWork& w,
                                     cudaStream_t stream) {
  const BlockGroupedCall& c = a.call;
  const char* name = "sm90 int8 grouped skinny gemm";
  check_block_grouped_call(c, int64_t(1) << 30, name, true);
  check_int8_grouped_acts(a, name);
  check_skinny_grouped_work(w, (c.K + 127) / 128, name);
  if (c.max_tiles == 0) return;
  if (a.g == 64) {
    if (a.offset) launch_i8_grouped_skinny<64, true>(a, w, stream);
    else launch_i8_grouped_skinny<64, false>(a, w, stream);
  } else {
    if (a.offset) launch_i8_grouped_skinny<128, true>(a, w, stream);
    else launch_i8_grouped_skinny<128, false>(a, w, stream);
  }
}

}  // namespace mixq::cuda
