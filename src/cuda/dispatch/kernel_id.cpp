#include "cuda/dispatch/kernel_id.hpp"

#include <tuple>

#include "cuda/dispatch/fp8_plan.hpp"
#include "cuda/kernels/common/wo_layout.hpp"

namespace mixq::cuda {

namespace {

// 3: e4m3 activations (W4A8, quantized per call)
const char* io_name(int t) { return t == 0 ? "f16" : t == 1 ? "bf16" : t == 2 ? "f32" : "e4m3"; }
const char* codes_name(int c) {
  return c == kCodesU4 ? "u4" : c == kCodesU8 ? "u8" : c == kCodesU4F8 ? "u4f8" : "e4m3";
}
const char* pairs_name(PairKind p) {
  return p == PairKind::Half ? "half" : p == PairKind::Bf16Zero ? "bf16zero" : "f32";
}

const char* skinny_name(const char* const (&names)[4], int mt) {
  return mt <= 16 ? names[0] : mt <= 32 ? names[1] : mt <= 64 ? names[2] : names[3];
}

}  // namespace

const char* KernelId::family_name() const {
  static const char* const kI8Skinny[4] = {"sm90_i8_skinny_mt16", "sm90_i8_skinny_mt32",
                                           "sm90_i8_skinny_mt64", "sm90_i8_skinny_mt128"};
  static const char* const kFp8Skinny[4] = {"sm90_fp8_block_skinny_mt16", "sm90_fp8_block_skinny_mt32",
                                            "sm90_fp8_block_skinny_mt64", "sm90_fp8_block_skinny_mt128"};
  switch (family) {
    case Family::WoStream: return "sm80_wo_stream";
    case Family::WoWgmma: return "sm90_wo_ws";
    case Family::WoDequantCublas: return "wo_dequant_cublas";
    case Family::I8Sm80Small: return "sm80_i8_16x32";
    case Family::I8Sm80Medium: return "sm80_i8_64x64";
    case Family::I8Sm80Large: return "sm80_i8_128x128";
    case Family::I8Sm90: return "sm90_i8_128x128";
    case Family::I8Sm90Pair: return "sm90_i8_128x128_c2";
    case Family::I8Sm90Tall: return "sm90_i8_256x64";
    case Family::I8Skinny: return skinny_name(kI8Skinny, tile_m);
    case Family::Fp8Gemm: return sm90_fp8_gemm_name({tile_n, ctas, tile_m == 256 ? 256 : 128});
    case Family::Fp8Skinny: return skinny_name(kFp8Skinny, tile_m);
  }
  return "?";
}

std::string KernelId::name() const {
  std::string s = family_name();
  std::string args;
  auto add = [&](const std::string& a) { args += (args.empty() ? "" : ",") + a; };
  switch (family) {
    case Family::WoStream:
      add(io_name(act));
      add(codes_name(codes));
      add("mt" + std::to_string(tile_m));
      if (fine) add("fine");
      break;
    case Family::WoWgmma:
      add(io_name(act));
      add(codes_name(codes));
      add("mt" + std::to_string(tile_m));
      add("cta" + std::to_string(ctas));
      if (wide) add("k128");
      add(std::string("pairs=") + pairs_name(pairs));
      if (fold) add("fold");
      break;
    case Family::WoDequantCublas:
      add(io_name(act));
      break;
    case Family::I8Sm80Small:
    case Family::I8Sm80Medium:
    case Family::I8Sm80Large:
      add(tensor ? "per_tensor" : "g" + std::to_string(codes));
      break;
    case Family::I8Sm90:
    case Family::I8Sm90Pair:
    case Family::I8Sm90Tall:
    case Family::I8Skinny:
      add(tensor ? "per_tensor" : "g" + std::to_string(codes));
      if (offset) add("offset");
      break;
    case Family::Fp8Gemm:
    case Family::Fp8Skinny:
      break;
  }
  return args.empty() ? s : s + "<" + args + ">";
}

bool KernelId::operator==(const KernelId& o) const {
  return std::tie(family, act, codes, tile_m, tile_n, ctas, pairs, fold, wide, fine, offset,
                  tensor) == std::tie(o.family, o.act, o.codes, o.tile_m, o.tile_n, o.ctas, o.pairs,
                                      o.fold, o.wide, o.fine, o.offset, o.tensor);
}

}  // namespace mixq::cuda
