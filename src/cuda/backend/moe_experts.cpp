// Stacked experts on CUDA (weight-only): the experts stay ordinary prepared weights; this adds the
// device tables of their repacked buffers that the grouped kernel indexes by expert, and runs a
// grouped call as two launches on the caller's stream: the tile schedule from the device-side
// offsets / counts, then the grouped streaming kernel over every (expert, token tile) pair.
// Nothing is read back; launch shapes depend only on host-known sizes (graph-capturable).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/moe_prepared.hpp"
#include "mixq/numeric.hpp"
#include "cuda/backend/moe_schedule_call.hpp"
#include "cuda/backend/moe_wo_view.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/dispatch/wo_plan.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/launch/sm90_wo_ws_maps.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

using cuda::IoType;

int io_code(DType t) { return t == DType::F16 ? 0 : t == DType::BF16 ? 1 : 2; }

class CudaExperts final : public PreparedExpertsImpl {
 public:
  CudaExperts(std::vector<PreparedWeight> w, const PrepareOptions& o) {
    adopt(std::move(w), o, BackendKind::CUDA);
    MIXQ_CHECK(o.act == ActQuant::None || o.act == ActQuant::Fp8Block, ErrorCode::Unsupported,
               "prepare_experts (cuda): the grouped path runs weight-only, W4A8, FP8 block and "
               "INT8 W8A8 experts; act = ", act_quant_name(o.act), " is not one of them (use the "
               "cpu backend)");
    MIXQ_CHECK(E <= (int64_t(1) << 20), ErrorCode::Unsupported, "prepare_experts (cuda): ", E,
               " experts is more than 2^20");
    std::vector<cuda::WoExpertView> views;
    for (const PreparedWeight& p : experts) views.push_back(cuda::weight_only_expert_view(p.impl()));
    first_ = views[0];
    device_ = first_.device;
    // act = fp8-block here: W4A8 experts (FP8 block weights took moe_fp8_experts.cpp)
    MIXQ_CHECK(o.act == ActQuant::None || first_.w.L.fp8_act, ErrorCode::Internal, "prepare_experts (cuda): "
               "act = fp8-block experts that are neither W4A8 nor FP8 block");
    cuda::DeviceGuard guard(device_);
    caps_ = cuda::DeviceContext::get(device_).caps();
    // tables: codes [E], pairs [E], k_perm [E] (8-byte pointers), pair_f32 [E] bytes
    const size_t ptrs = size_t(E) * 8;
    std::vector<uint8_t> host(3 * ptrs + size_t(E), 0);
    for (int64_t e = 0; e < E; ++e) {
      const cuda::WoExpertView& v = views[size_t(e)];
      MIXQ_CHECK(v.w.group_shift == first_.w.group_shift && v.w.L.Kp == first_.w.L.Kp &&
                     v.w.L.bits == first_.w.L.bits && v.w.L.e4m3 == first_.w.L.e4m3 &&
                     v.w.L.fp8_act == first_.w.L.fp8_act &&
                     v.w.int_zero == first_.w.int_zero && v.w.gather == first_.w.gather &&
                     v.w.bf16_zero_pairs == first_.w.bf16_zero_pairs && v.device == device_,
                 ErrorCode::Internal, "prepare_experts (cuda): expert ", e,
                 " was repacked differently from expert 0");
      std::memcpy(host.data() + size_t(e) * 8, &v.codes, 8);
      std::memcpy(host.data() + ptrs + size_t(e) * 8, &v.pairs_stream, 8);
      std::memcpy(host.data() + 2 * ptrs + size_t(e) * 8, &v.k_perm, 8);
      host[3 * ptrs + size_t(e)] = v.pair_f32 ? 1 : 0;
      // W4A8: one launch quantizes for every expert, so only a zero point they all share goes into
      // the activation factors
      if (v.w.L.a8_zero != first_.w.L.a8_zero) first_.w.L.a8_zero = -1;
    }
    tables_ = DeviceBuffer(host.size(), device_);
    tables_.copy_from_host(host.data(), host.size());
    build_wgmma_maps(views);
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  // The grouped wgmma kernel's descriptors of every expert (its weight tiles, its pairs and their
  // bf16 integer-zero copy), in device memory for the kernel to read by expert: on sm_90a where
  // every expert has the group-major pairs and no act-order gather (the kernel reads X in place).
  // The kernel reads every expert's pairs with the launch's one element size, but an expert
  // stores half pairs where all of its values are exact in f16 and f32 pairs otherwise (data
  // dependent: zero-point offsets s (cmin - z) often are not): where the experts differ, the half
  // ones get an f32 group-major copy for their descriptors. (With the sizes mixed, an expert's
  // pair loads brought more bytes than its stage expected: the kernel faulted.)
  void build_wgmma_maps(std::vector<cuda::WoExpertView>& views) {
    if (!caps_.sm90a || first_.w.gather || first_.w.group_shift < 4) return;
    bool wide = false;
    for (const cuda::WoExpertView& v : views) {
      if (!v.pairs_gm || v.pairs_gm_ld % 128 != 0) return;
      wide = wide || v.pair_f32;
    }
    for (cuda::WoExpertView& v : views)
      if (wide && !v.pair_f32) {
        wide_pairs_.push_back(widened_pairs(v));
        v.pairs_gm = wide_pairs_.back().data();
        v.pair_f32 = true;
      }
    first_.pair_f32 = wide;
    first_.w.L.pair_f32 = wide;
    std::vector<CUtensorMap> maps(size_t(E) * cuda::kMoeMapsPerExpert);
    std::memset(maps.data(), 0, maps.size() * sizeof(CUtensorMap));
    for (int64_t e = 0; e < E; ++e) {
      const cuda::WoExpertView& v = views[size_t(e)];
      CUtensorMap* m = maps.data() + e * cuda::kMoeMapsPerExpert;
      for (int cps : {1, 2}) {  // stages of one chunk (token tiles 128, 256) and two (16, 64)
        m[cuda::moe_ws_map(cuda::kMoeMapWeight, cps)] = cuda::ws_weight_map(v.codes, v.w.L.bits, v.w.L.Kp, N, cps);
        m[cuda::moe_ws_map(cuda::kMoeMapPairs, cps)] =
            cuda::ws_pair_map(v.pairs_gm, v.pairs_gm_ld, v.w.L.groups, v.pair_f32, cps, v.w.group_shift);
        if (v.pairs_gm_bz)
          m[cuda::moe_ws_map(cuda::kMoeMapPairsBf16Zero, cps)] =
              cuda::ws_pair_map(v.pairs_gm_bz, v.pairs_gm_ld, v.w.L.groups, false, cps, v.w.group_shift);
      }
    }
    // 64-byte aligned descriptors: a device allocation is 256-byte aligned, a descriptor 128 bytes
    maps_ = DeviceBuffer(maps.size() * sizeof(CUtensorMap), device_);
    maps_.copy_from_host(maps.data(), maps.size() * sizeof(CUtensorMap));
  }

  // An expert's half group-major pairs as f32 pairs (the same values: f16 converts exactly).
  DeviceBuffer widened_pairs(const cuda::WoExpertView& v) const {
    const size_t n = size_t(v.w.L.groups * v.pairs_gm_ld);
    std::vector<uint16_t> half(2 * n);
    MIXQ_CUDA_CHECK(cudaMemcpy(half.data(), v.pairs_gm, half.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> wide(2 * n);
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = f16_to_f32(half[i]);
    DeviceBuffer b(wide.size() * 4, device_);
    b.copy_from_host(wide.data(), wide.size() * 4);
    return b;
  }

  // x_aligned: X's rows are 16-byte aligned (the wgmma kernel's TMA loads)
  cuda::MoeWoPlan plan(const GroupedCall* c, int64_t rows, int x_type, bool x_aligned) const {
    cuda::MoeCall mc;
    mc.E = E;
    mc.rows = rows;
    mc.x_type = x_type;
    mc.ws_maps = maps_.size() > 0 && x_aligned;
    mc.y_tma = c && (c->y.dtype == DType::F16 || c->y.dtype == DType::BF16) &&
               cuda::tma_stores_16bit_rows(c->y.data, c->y.ld(), N);
    if (c && c->rows.layout == MoeRows::Layout::Masked) {
      mc.masked = true;
      mc.max_tokens = c->rows.max_tokens;
    }
    return cuda::plan_moe_weight_only(mc, first_.w, caps_, opts.tuning);
  }

  std::string kernel_name(int64_t rows, std::optional<DType> activation) const override {
    const int x = activation ? io_code(*activation) : 0;
    return "grouped<" + plan(nullptr, std::max<int64_t>(rows, 1), x, true).id.name() + ">";
  }

  // Enough for either layout and any token tile: the smallest tile's bound of both layouts; W4A8:
  // then the rows' e4m3 codes and block scales (wo_a8_act_bytes).
  size_t workspace_size(int64_t rows) const override {
    return schedule_bytes(rows) + (first_.w.L.fp8_act ? cuda::wo_a8_act_bytes(rows, K) : 0);
  }
  size_t schedule_bytes(int64_t rows) const {
    return cuda::moe_schedule_bytes((rows + cuda::kMoeTileSmall - 1) / cuda::kMoeTileSmall + 2 * E);
  }

  void grouped_linear(const GroupedCall& c, const Epilogue& ep,
                      const ExecContext& ctx) const override {
    for (const TensorView* v : {&c.x, &c.y})
      MIXQ_CHECK_ARG(v->device_index == device_, "grouped_linear: ", v->describe(),
                     " is not on the experts' device ", device_);
    const int64_t R = c.x.shape[0];
    MIXQ_CHECK(R < (int64_t(1) << 31) && N < (int64_t(1) << 30), ErrorCode::Unsupported,
               "grouped_linear (cuda): rows (", R, ") must be < 2^31");
    const int elem = c.x.dtype == DType::F32 ? 4 : 2;
    const bool x_aligned = reinterpret_cast<uintptr_t>(c.x.data) % 16 == 0 && (c.x.ld() * elem) % 16 == 0;
    const bool a8 = first_.w.L.fp8_act;
    // W4A8 reads its own quantized copy of X (aligned rows)
    const cuda::MoeWoPlan p = plan(&c, R, io_code(c.x.dtype), x_aligned || a8);
    const size_t need = a8 ? workspace_size(R) : cuda::moe_schedule_bytes(p.max_tiles);
    MIXQ_CHECK_ARG(ctx.workspace != nullptr && ctx.workspace_bytes >= need,
                   "grouped_linear (cuda): needs ExecContext::workspace of ", need, " bytes "
                   "(grouped_linear_workspace_size), got ", ctx.workspace_bytes, " at ", ctx.workspace);
    MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0, "grouped_linear (cuda): "
                   "ExecContext::workspace (", ctx.workspace, ") must be 16-byte aligned");
    cuda::DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    char* ws = static_cast<char*>(ctx.workspace);
    // the GEMM below may be the schedule's dependent launch (p.pdl)
    const auto [n_tiles, tiles] =
        cuda::launch_moe_schedule_of(c, E, R, p.id.tile_m, p.max_tiles, ws, stream);

    cuda::WoStreamParams k{};
    k.x = c.x.data;
    k.ldx = c.x.ld();
    k.x_type = IoType(io_code(c.x.dtype));
    k.N = int(N);
    k.K = int(K);
    k.x_rows = p.x_rows;
    k.pairs_gm_ld = 0;
    k.int_zero = first_.w.int_zero;
    k.Kp = int(first_.w.L.Kp);
    k.group_shift = first_.w.group_shift;
    k.groups = int(first_.w.L.groups);
    k.chunks_per_split = p.chunks_per_split;
    k.chunks_per_stage = p.chunks_per_stage;
    k.splits = p.splits;
    k.cluster = p.splits > 1;  // the splits of a tile reduce in one cluster (no partials)
    k.pdl = p.pdl;
    k.y = c.y.data;
    k.ldy = c.y.ld();
    k.y_type = IoType(io_code(c.y.dtype));
    k.bias = c.bias.empty() ? nullptr : c.bias.data;
    k.bias_type = c.bias.empty() ? IoType::F32 : IoType(io_code(c.bias.dtype));
    k.clamp_lo = ep.clamp_lo;
    k.clamp_hi = ep.clamp_hi;

    if (a8) {  // X quantized to e4m3 per row per 128 after the schedule's part of the workspace
      const int64_t ldq = cuda::act_row_pitch(K), ld_meta = cuda::act_meta_pitch(R);
      uint8_t* q = reinterpret_cast<uint8_t*>(ws + schedule_bytes(R));
      float* f = reinterpret_cast<float*>(reinterpret_cast<char*>(q) + cuda::wo_a8_factors_offset(R, K));
      // a zero point shared by every group of every expert goes into the factors
      const int zero = cuda::w4a8_factor_zero(first_.w.L, opts.tuning);
      cuda::launch_quantize_fp8_w4a8(c.x.data, io_code(c.x.dtype), c.x.ld(), R, K, q, ldq, f, ld_meta,
                                     zero >= 0 ? float(zero) : 1.f, stream,
                                     cuda::act_quant_tuning(opts.tuning));
      k.x = q;
      k.ldx = ldq;  // bytes
      k.x_factors = f;
      k.ld_x_factors = ld_meta;
      k.a8_zero_in_factors = zero >= 0 ? 1 : 0;
    }
    if (p.id.family == cuda::Family::WoWgmma) {
      k.M = int(R);
      k.pairs_gm_ld = first_.pairs_gm_ld;
      k.pair_f32 = first_.pair_f32;
      cuda::MoeWsGroup g{};
      g.n_tiles = n_tiles;
      g.tiles = tiles;
      g.maps = static_cast<const CUtensorMap*>(maps_.data());
      g.maps_per_expert = cuda::kMoeMapsPerExpert;
      g.w_map = p.w_map;
      g.p_map = p.p_map;
      g.n_blocks = p.n_blocks;
      const int64_t expert_bytes = first_.w.L.N * first_.w.L.Kp * first_.w.L.bits / 8;
      g.expert_major = cuda::moe_expert_major(false, expert_bytes, caps_.l2_bytes, opts.tuning);
      g.bias_stride = c.bias_per_expert ? c.bias.stride[0] : 0;
      cuda::launch_moe_wo_wgmma(k, g, p, stream);
      return;
    }
    const char* t = static_cast<const char*>(tables_.data());
    const size_t ptrs = size_t(E) * 8;
    cuda::MoeWoExperts g{};
    g.n_tiles = n_tiles;
    g.tiles = tiles;
    g.codes = reinterpret_cast<const uint4* const*>(t);
    g.pairs_stream = reinterpret_cast<const void* const*>(t + ptrs);
    g.k_perm = reinterpret_cast<const int32_t* const*>(t + 2 * ptrs);
    g.pair_f32 = reinterpret_cast<const uint8_t*>(t + 3 * ptrs);
    g.bias_stride = c.bias_per_expert ? c.bias.stride[0] : 0;
    cuda::launch_moe_wo_stream(k, g, p, stream);
  }

 private:
  cuda::WoExpertView first_;
  int device_ = 0;
  cuda::DeviceCaps caps_;
  DeviceBuffer tables_;
  DeviceBuffer maps_;  // [E][kMoeMapsPerExpert] CUtensorMap (empty: the streaming kernel only)
  std::vector<DeviceBuffer> wide_pairs_;  // f32 copies of half experts' pairs (build_wgmma_maps)
};

}  // namespace

std::shared_ptr<const PreparedExpertsImpl> prepare_experts_fp8_block(std::vector<PreparedWeight>& experts,
                                                                     const PrepareOptions& opts);
std::shared_ptr<const PreparedExpertsImpl> prepare_experts_int8_block(std::vector<PreparedWeight>& experts,
                                                                      const PrepareOptions& opts);

std::shared_ptr<const PreparedExpertsImpl> prepare_experts_cuda(std::vector<PreparedWeight> experts,
                                                                const PrepareOptions& opts) {
  if (opts.act == ActQuant::Fp8Block)  // FP8 block experts (moe_fp8_experts.cpp), else W4A8 below
    if (auto fp8 = prepare_experts_fp8_block(experts, opts)) return fp8;
  if (opts.act == ActQuant::Int8Block)  // INT8 W8A8 experts (moe_int8_experts.cpp)
    return prepare_experts_int8_block(experts, opts);
  return std::make_shared<CudaExperts>(std::move(experts), opts);
}

}  // namespace mixq
