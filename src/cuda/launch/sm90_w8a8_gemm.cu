// Host entry points of the Hopper INT8 W8A8 per-block GEMM: argument checks, then the
// configuration of the kernel family for the weight's K block and offsets
// (sm90_w8a8_gemm_launch.cuh, one file per configuration).
#include "cuda/launch/sm90_w8a8_gemm.hpp"

#include "cuda/runtime/check.hpp"
#include "cuda/launch/sm90_w8a8_gemm_configs.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {

// The per-tensor mode: its codes, pitches and output (no metadata).
void check_tensor_params(const Int8GemmParams& a, const char* name) {
  MIXQ_CHECK_ARG(a.M >= 1 && a.N >= 1 && a.K >= 1 && a.K <= kInt8TensorMaxK && a.Np >= a.N && a.Np % 128 == 0,
                 name, ": bad sizes M ", a.M, ", N ", a.N, ", K ", a.K, ", Np ", a.Np);
  MIXQ_CHECK_ARG((a.conv_on || (a.lda >= a.K && a.lda % 16 == 0)) && a.ldb >= a.K && a.ldb % 16 == 0, name,
                 ": pitches lda ", a.lda, ", ldb ", a.ldb, " must cover K and be 16-byte multiples (TMA)");
  if (a.conv_on) {
    const Im2colConv& g = a.conv;
    MIXQ_CHECK_ARG(im2col_taps_fit(g, 128, a.K) && g.Kh * g.Kw <= 64 &&
                       int64_t(g.B) * g.Ho * g.Wo == a.M &&
                       (a.in_zero == 0 || a.wsum_tap != nullptr),
                   name, ": convolution Ci ", g.Ci, " with ", im2col_tap_columns(g),
                   " columns a tap (Ci rounded up to a multiple of 128), K ", a.K,
                   " = Kh Kw times that (", g.Kh, " x ", g.Kw, " taps, at most 64), M ", a.M,
                   " = B Ho Wo, per-tap sums for Z_I ", a.in_zero);
  }
  MIXQ_CHECK_ARG(a.wsum != nullptr && a.wscale != nullptr, name, ": the weight's code sums / scales are missing");
  MIXQ_CHECK_ARG(a.ldy >= a.N && (a.y_type == 2 || a.y_type == 3) && a.bias_type >= 0 && a.bias_type <= 2,
                 name, ": bad output (ldy ", a.ldy, ", type ", a.y_type, ": f32 or int8) or bias type ",
                 a.bias_type);
}

// g64: the kernel also runs K blocks of 64.
void check_params(const Int8GemmParams& a, const char* name, bool g64) {
  MIXQ_CHECK(a.mode == Int8Mode::Block && (a.kb == 128 || (g64 && a.kb == 64)),
             ErrorCode::Unsupported, name, " runs the block mode with K block ",
             g64 ? "64 or 128" : "128", " only (K block ", a.kb, ")");
  MIXQ_CHECK_ARG(a.M >= 1 && a.N >= 1 && a.K >= 1 && a.n_kblocks == (a.K + a.kb - 1) / a.kb &&
                     a.Np >= a.N && a.Np % 128 == 0,
                 name, ": bad sizes M ", a.M, ", N ", a.N, ", K ", a.K, ", K blocks ",
                 a.n_kblocks, ", Np ", a.Np);
  MIXQ_CHECK_ARG(a.lda >= a.K && a.lda % 16 == 0 && a.ldb >= a.K && a.ldb % 16 == 0 &&
                     a.ld_meta >= a.M && a.ld_meta % 4 == 0,
                 name, ": pitches lda ", a.lda, ", ldb ", a.ldb, ", ld_meta ", a.ld_meta,
                 " must cover K / M and be 16-byte multiples (TMA)");
  MIXQ_CHECK_ARG(a.r1w != nullptr && a.r1_ld == int8_rank1_pitch(a.n_kblocks), name,
                 ": the rank-1 weight planes (r1w ", static_cast<const void*>(a.r1w), ", r1_ld ",
                 a.r1_ld, ") are missing or not int8_rank1_pitch(", a.n_kblocks, ") = ",
                 int8_rank1_pitch(a.n_kblocks), " wide");
  MIXQ_CHECK_ARG((a.quant.kind != 0 || a.ldy >= a.N) && a.y_type >= 0 && a.y_type <= 2 &&
                     a.bias_type >= 0 &&
                     a.bias_type <= 2,
                 name, ": bad output (ldy ", a.ldy, ", type ", a.y_type, ") or bias type ",
                 a.bias_type);
}

}  // namespace

void launch_sm90_int8_block(const Int8GemmParams& a, cudaStream_t stream) {
  if (a.mode == Int8Mode::Tensor) {
    check_tensor_params(a, kSm90Int8BlockName);
    launch_w8a8_tensor(a, stream, kSm90Int8BlockName);
    return;
  }
  check_params(a, kSm90Int8BlockName, true);
  if (a.kb == 64) {
    if (a.ow) launch_w8a8<true, 1, 1, 64>(a, stream, kSm90Int8BlockName);
    else launch_w8a8<false, 1, 1, 64>(a, stream, kSm90Int8BlockName);
  } else {
    if (a.ow) launch_w8a8<true, 1, 1, 128>(a, stream, kSm90Int8BlockName);
    else launch_w8a8<false, 1, 1, 128>(a, stream, kSm90Int8BlockName);
  }
}

void launch_sm90_int8_pair(const Int8GemmParams& a, cudaStream_t stream) {
  check_params(a, kSm90Int8PairName, false);
  if (a.ow) launch_w8a8<true, 2, 1, 128>(a, stream, kSm90Int8PairName);
  else launch_w8a8<false, 2, 1, 128>(a, stream, kSm90Int8PairName);
}

void launch_sm90_int8_tall(const Int8GemmParams& a, cudaStream_t stream) {
  check_params(a, kSm90Int8TallName, false);
  if (a.ow) launch_w8a8<true, 1, 2, 128>(a, stream, kSm90Int8TallName);
  else launch_w8a8<false, 1, 2, 128>(a, stream, kSm90Int8TallName);
}

}  // namespace mixq::cuda
