// Kernel choice for the INT8 GEMMs: by compute capability, K block and M (docs/decisions/
// int8-block-gemm.md, w8a8-skinny.md); a forced family name is checked against what can run.
#include <string>

#include "cuda/launch/int8_gemm.hpp"
#include "cuda/launch/sm90_skinny_gemm.hpp"
#include "cuda/launch/sm90_w8a8_gemm.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

namespace {


constexpr Int8GemmKernel kSmall{Family::I8Sm80Small, launch_sm80_int8_small};
constexpr Int8GemmKernel kMedium{Family::I8Sm80Medium, launch_sm80_int8_medium};
constexpr Int8GemmKernel kLarge{Family::I8Sm80Large, launch_sm80_int8_large};
constexpr Int8GemmKernel kHopper{Family::I8Sm90, launch_sm90_int8_block};
constexpr Int8GemmKernel kHopperPair{Family::I8Sm90Pair, launch_sm90_int8_pair};
constexpr Int8GemmKernel kHopperTall{Family::I8Sm90Tall, launch_sm90_int8_tall};
void launch_skinny16(const Int8GemmParams& p, cudaStream_t s) { launch_sm90_int8_skinny(p, 16, s); }
void launch_skinny32(const Int8GemmParams& p, cudaStream_t s) { launch_sm90_int8_skinny(p, 32, s); }
void launch_skinny64(const Int8GemmParams& p, cudaStream_t s) { launch_sm90_int8_skinny(p, 64, s); }
void launch_skinny128(const Int8GemmParams& p, cudaStream_t s) {
  launch_sm90_int8_skinny(p, 128, s);
}
const Int8GemmKernel kHopperSkinny[4] = {{Family::I8Skinny, launch_skinny16, 16},
                                         {Family::I8Skinny, launch_skinny32, 32},
                                         {Family::I8Skinny, launch_skinny64, 64},
                                         {Family::I8Skinny, launch_skinny128, 128}};

// The Hopper kernels run block mode with one 128-wide K block per pipeline stage; the 128 x 128
// single-CTA kernel also K blocks of 64, two per stage, and the per-tensor mode (g128_only: the
// pair and 256 x 64 kernels, block mode only).
bool hopper_fits(Int8Mode mode, int kb, bool g128_only = false) {
  if (mode == Int8Mode::Tensor) return !g128_only;
  return kb == 128 || (kb == 64 && !g128_only);
}
bool hopper_ok(const DeviceCaps& caps, Int8Mode mode, int kb, bool g128_only = false) {
  return hopper_fits(mode, kb, g128_only) && caps.cc_major == 9 && caps.cc_minor == 0 && caps.sm90a;
}
// The few-token Hopper kernels run block mode with K blocks of 64 or 128 (one or two per stage);
// the 128-token tile K blocks of 128 only.
bool skinny_fits(Int8Mode mode, int kb, int mt = 64) {
  return mode == Int8Mode::Block && (kb == 128 || (kb == 64 && mt <= 64));
}
bool skinny_ok(const DeviceCaps& caps, Int8Mode mode, int kb, int mt = 64) {
  return skinny_fits(mode, kb, mt) && caps.cc_major == 9 && caps.cc_minor == 0 && caps.sm90a;
}

}  // namespace

int64_t int8_small_max_m(const DeviceCaps&) { return 16; }
int64_t int8_medium_max_m(const DeviceCaps&) { return 128; }
// The first M past the skinny kernels' reach: their 128-token tile runs K blocks of 128 only.
int64_t int8_sm90_min_m(const DeviceCaps&, int kb) { return kb == 64 ? 65 : 129; }

std::string int8_gemm_kernel_names(Int8Mode mode, int kb, bool) {
  std::string s = std::string(kSmall.name()) + ", " + kMedium.name() + ", " + kLarge.name();
  if (hopper_fits(mode, kb)) s += std::string(", ") + kHopper.name();
  if (hopper_fits(mode, kb, true))
    s += std::string(", ") + kHopperPair.name() + ", " + kHopperTall.name();
  for (const Int8GemmKernel& k : kHopperSkinny)
    if (skinny_fits(mode, kb, k.skinny_mt)) s += std::string(", ") + k.name();
  if (hopper_fits(mode, kb) || skinny_fits(mode, kb)) s += " (Hopper, sm_90a)";
  return s;
}

// INT8 g128 at M = 65-128 on Hopper: the 128 x 128 kernel up to this K, the 128-token skinny tile
// beyond. H100, docs/decisions/int8-block-gemm.md (nine layers, M = 65 / 96 / 128, one run): the
// 128 x 128 kernel took 0.72-0.94x the skinny tile's time on the layers with K = 4096 and 8192,
// 1.07-1.33x on those with K = 14336 and 28672 (whose 32-168 N tiles leave a wave partly idle for
// K-long tiles, while the skinny tile streams over every SM).
constexpr int64_t kInt8TilesOverSkinnyMaxK = 8192;

Int8GemmKernel select_int8_gemm(const DeviceCaps& caps, Int8Mode mode, int kb, bool offset,
                                int64_t M, int64_t K, const std::string& force) {
  if (!force.empty()) {
    for (const Int8GemmKernel& k : {kSmall, kMedium, kLarge})
      if (force == k.name()) return k;
    if (force == kHopper.name() || force == kHopperPair.name() || force == kHopperTall.name()) {
      const bool g128_only = force != kHopper.name();
      MIXQ_CHECK(hopper_ok(caps, mode, kb, g128_only), ErrorCode::Unsupported,
                 "int8 gemm: force_kernel '", force, "' needs ",
                 g128_only ? "block mode with K block 128" : "the per-tensor mode or block mode with K block 64 or 128",
                 " (got ", mode == Int8Mode::Tensor ? "per-tensor" : "block", ", K block ", kb,
                 "), a compute capability 9.0 device (got ", caps.cc_major, ".", caps.cc_minor,
                 ") and a library built with sm_90a");
      return force == kHopper.name() ? kHopper : force == kHopperPair.name() ? kHopperPair : kHopperTall;
    }
    for (const Int8GemmKernel& k : kHopperSkinny)
      if (force == k.name()) {
        MIXQ_CHECK(skinny_ok(caps, mode, kb, k.skinny_mt), ErrorCode::Unsupported,
                   "int8 gemm: force_kernel '", force,
                   "' needs block mode with K block 64 or 128 (128 for the 128-token tile; got ", kb,
                   "), a compute capability 9.0 device (got ", caps.cc_major, ".", caps.cc_minor,
                   ") and a library built with sm_90a");
        return k;
      }
    MIXQ_FAIL(ErrorCode::InvalidArgument, "int8 gemm: force_kernel '", force, "' is not one of ",
              int8_gemm_kernel_names(mode, kb, offset));
  }
  // Hopper, few tokens: the weights streamed over every SM as the wide wgmma operand
  // (launch/sm90_i8_skinny.cu; docs/decisions/w8a8-skinny.md).
  const int tile = M <= 16 ? 0 : M <= 32 ? 1 : M <= 64 ? 2 : 3;
  if (M <= kSm90SkinnyMaxM && skinny_ok(caps, mode, kb, kHopperSkinny[tile].skinny_mt)) {
    if (tile == 3 && K <= kInt8TilesOverSkinnyMaxK && hopper_ok(caps, mode, kb)) return kHopper;
    return kHopperSkinny[tile];
  }
  // Hopper: wgmma s8 (sm90_w8a8_gemm.cu) where a 128-row tile is mostly full; the mma.sync
  // kernels reach only 0.3-0.47x cuBLAS FP16 there (docs/decisions/int8-block-gemm.md). The
  // per-tensor mode takes the same threshold: at 4096 x 4096 its wgmma kernel beat the best
  // mma.sync tile from M = 256 up (docs/decisions/int8-requant-float-path.md; smaller layers not
  // measured).
  if (M >= int8_sm90_min_m(caps, kb) && hopper_ok(caps, mode, kb)) return kHopper;
  if (M <= int8_small_max_m(caps)) return kSmall;
  if (M <= int8_medium_max_m(caps)) return kMedium;
  return kLarge;
}

}  // namespace mixq::cuda
