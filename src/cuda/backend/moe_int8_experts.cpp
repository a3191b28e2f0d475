// Stacked INT8 W8A8 experts on CUDA (act = int8-block: int8 codes per block of 64 or 128 along K,
// symmetric or with offsets, times activations quantized per token per block at the call): the
// experts stay ordinary prepared INT8 block weights (backend/int8_block.cpp); this adds each
// expert's TMA descriptors in device memory and runs a grouped call as three launches on the
// caller's stream: the quantizer over every row of X, the tile schedule from the device-side
// offsets / counts, then the grouped block GEMM over every (expert, 128-row token tile) x N tile
// (launch/sm90_w8a8_grouped.hpp). Nothing is read back; launch shapes depend only on host-known
// sizes (graph-capturable).
#include <cuda_runtime.h>

#include <vector>

#include "core/moe_prepared.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/backend/moe_schedule_call.hpp"
#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/sm90_w8a8_grouped.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

constexpr int kTileM = cuda::kSm90Int8GroupedTileM;

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

class CudaInt8Experts final : public PreparedExpertsImpl {
 public:
  CudaInt8Experts(std::vector<PreparedWeight> w, const std::vector<cuda::Int8ExpertView>& views,
                  const PrepareOptions& o) {
    adopt(std::move(w), o, BackendKind::CUDA);
    MIXQ_CHECK(E <= (int64_t(1) << 20), ErrorCode::Unsupported, "prepare_experts (cuda): ", E,
               " experts is more than 2^20");
    const cuda::Int8ExpertView& first = views[0];
    device_ = first.device;
    g_ = first.g;
    offset_ = first.offset;
    Np_ = first.w.Np;
    cuda::DeviceGuard guard(device_);
    const cuda::DeviceCaps caps = cuda::DeviceContext::get(device_).caps();
    sms_ = caps.sm_count;
    MIXQ_CHECK(first.w.r1w != nullptr, ErrorCode::Unsupported, "prepare_experts (cuda): INT8 W8A8 "
               "experts run the Hopper grouped kernel (compute capability 9.0, a library built with "
               "sm_90a); device ", device_, " is ", caps.cc_major, ".", caps.cc_minor,
               caps.sm90a ? "" : " (no sm_90a image)", ": use the cpu backend");
    std::vector<CUtensorMap> maps(size_t(E) * cuda::kSm90Int8ExpertMaps);
    for (int64_t e = 0; e < E; ++e) {
      const cuda::Int8ExpertView& v = views[size_t(e)];
      MIXQ_CHECK(v.device == device_, ErrorCode::InvalidArgument, "prepare_experts (cuda): expert ", e,
                 " is on device ", v.device, ", expert 0 on ", device_);
      MIXQ_CHECK(v.g == g_ && v.offset == offset_ && v.w.Np == Np_, ErrorCode::InvalidArgument,
                 "prepare_experts (cuda): expert ", e, " has K block ", v.g,
                 v.offset ? " with offsets" : " symmetric", ", expert 0 K block ", g_,
                 offset_ ? " with offsets" : " symmetric", ": the experts must share one scheme");
      cuda::make_sm90_int8_expert_maps(v.w, N, K, g_, offset_,
                                       maps.data() + e * cuda::kSm90Int8ExpertMaps);
    }
    // 64-byte aligned descriptors: a device allocation is 256-byte aligned, a descriptor 128 bytes
    maps_ = DeviceBuffer(maps.size() * sizeof(CUtensorMap), device_);
    maps_.copy_from_host(maps.data(), maps.size() * sizeof(CUtensorMap));
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t, std::optional<DType>) const override {
    return std::string("grouped<") + cuda::sm90_int8_grouped_name() + ">";
  }

  // The tile list (bounded for either layout), then X's int8 codes [rows][act_row_pitch(K)] and
  // their scales, offsets and code sums [K blocks][act_meta_pitch(rows)] each.
  size_t workspace_size(int64_t rows) const override {
    return schedule_bytes(rows) + codes_bytes(rows) + 3 * meta_bytes(rows);
  }

  void grouped_linear(const GroupedCall& c, const Epilogue& ep, const ExecContext& ctx) const override {
    for (const TensorView* v : {&c.x, &c.y})
      MIXQ_CHECK_ARG(v->device_index == device_, "grouped_linear: ", v->describe(),
                     " is not on the experts' device ", device_);
    const int64_t R = c.x.shape[0];
    MIXQ_CHECK(R < (int64_t(1) << 31) - kTileM, ErrorCode::Unsupported,
               "grouped_linear (cuda): rows (", R, ") must be < 2^31 - 128");
    const size_t need = workspace_size(R);
    MIXQ_CHECK_ARG(ctx.workspace != nullptr && ctx.workspace_bytes >= need,
                   "grouped_linear (cuda): needs ExecContext::workspace of ", need, " bytes "
                   "(grouped_linear_workspace_size), got ", ctx.workspace_bytes, " at ", ctx.workspace);
    MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0, "grouped_linear (cuda): "
                   "ExecContext::workspace (", ctx.workspace, ") must be 16-byte aligned");
    if (R == 0) return;
    cuda::DeviceGuard guard(device_);
    cudaStream_t stream = static_cast<cudaStream_t>(ctx.stream);
    char* ws = static_cast<char*>(ctx.workspace);
    const bool masked = c.rows.layout == MoeRows::Layout::Masked;
    cuda::MoeCall mc;
    mc.E = E;
    mc.rows = R;
    mc.masked = masked;
    mc.max_tokens = masked ? c.rows.max_tokens : 0;
    const int64_t max_tiles = cuda::moe_max_tiles(mc, kTileM);

    // X quantized first: the GEMM below is the schedule kernel's dependent launch, and waits for
    // the schedule kernel alone (which started after the quantizer ended).
    const int64_t ldq = cuda::act_row_pitch(K), ld_meta = cuda::act_meta_pitch(R);
    int8_t* q = reinterpret_cast<int8_t*>(ws + schedule_bytes(R));
    char* meta = reinterpret_cast<char*>(q) + codes_bytes(R);
    float* sx = reinterpret_cast<float*>(meta);
    float* ox = reinterpret_cast<float*>(meta + meta_bytes(R));
    int32_t* sums = reinterpret_cast<int32_t*>(meta + 2 * meta_bytes(R));
    cuda::launch_quantize_int8_block(c.x.data, cuda::float_type_code(c.x.dtype, "grouped_linear x"),
                                     c.x.ld(), R, K, g_, q, ldq, sx, ox, sums, ld_meta, stream, false,
                                     cuda::act_quant_tuning(opts.tuning));

    const auto [n_tiles, tiles] = cuda::launch_moe_schedule_of(c, E, R, kTileM, max_tiles, ws, stream);

    cuda::Sm90Int8GroupedArgs a;
    a.a = q;
    a.lda = ldq;
    a.sx = sx;
    a.ox = ox;
    a.sumx = sums;
    a.ld_meta = ld_meta;
    a.rows = R;
    a.N = N;
    a.K = K;
    a.g = g_;
    a.offset = offset_;
    a.Np = Np_;
    a.y = c.y.data;
    a.ldy = c.y.ld();
    a.y_type = cuda::float_type_code(c.y.dtype, "grouped_linear y");
    a.bias = c.bias.empty() ? nullptr : c.bias.data;
    a.bias_type = c.bias.empty() ? 2 : cuda::float_type_code(c.bias.dtype, "grouped_linear bias");
    a.bias_stride = c.bias_per_expert ? c.bias.stride[0] : 0;
    a.clamp_lo = ep.clamp_lo;
    a.clamp_hi = ep.clamp_hi;
    a.n_tiles = n_tiles;
    a.tiles = tiles;
    a.max_tiles = max_tiles;
    a.maps = static_cast<const CUtensorMap*>(maps_.data());
    a.num_sms = sms_;
    a.y_tma = opts.tuning.w8a8_y_tma == Toggle::Off ? 0 : -1;
    a.pdl = true;
    cuda::launch_sm90_int8_grouped_gemm(a, stream);
  }

 private:
  size_t schedule_bytes(int64_t rows) const {
    return cuda::moe_schedule_bytes(cuda::moe_tiles_any_layout(rows, E, kTileM));
  }
  size_t codes_bytes(int64_t rows) const { return align256(size_t(rows * cuda::act_row_pitch(K))); }
  size_t meta_bytes(int64_t rows) const {
    return align256(size_t((K + g_ - 1) / g_ * cuda::act_meta_pitch(rows)) * 4);
  }

  int device_ = 0, sms_ = 0, g_ = 128;
  bool offset_ = false;
  int64_t Np_ = 0;
  DeviceBuffer maps_;  // [E][kSm90Int8ExpertMaps] CUtensorMap
};

}  // namespace

// INT8 W8A8 experts (act = int8-block, every expert prepared by prepare_int8_block).
std::shared_ptr<const PreparedExpertsImpl> prepare_experts_int8_block(std::vector<PreparedWeight>& experts,
                                                                      const PrepareOptions& opts) {
  std::vector<cuda::Int8ExpertView> views(experts.size());
  for (size_t e = 0; e < experts.size(); ++e)
    MIXQ_CHECK(cuda::int8_block_expert_view(experts[e].impl(), views[e]), ErrorCode::Internal,
               "prepare_experts (cuda): expert ", e, " is not a prepared INT8 block weight");
  return std::make_shared<CudaInt8Experts>(std::move(experts), views, opts);
}

}  // namespace mixq
