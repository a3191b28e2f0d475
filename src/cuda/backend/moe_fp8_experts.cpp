// Stacked FP8 block experts on CUDA (DeepSeek-V3's e4m3 experts with one f32 scale per 128 x 128
// block, times activations quantized per token per 128 along K): the experts stay ordinary
// prepared FP8 block weights (backend/fp8_block.cpp); this adds each expert's TMA descriptors in
// device memory and runs a grouped call as three launches on the caller's stream: the quantizer
// over every row of X, the tile schedule from the device-side offsets / counts, then the grouped
// block GEMM over every (expert, 128-row token tile) x N tile (launch/sm90_fp8_grouped.hpp).
// Nothing is read back; launch shapes depend only on host-known sizes (graph-capturable).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/moe_prepared.hpp"
#include "cuda/backend/common.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/backend/moe_schedule_call.hpp"
#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/moe_kernels.hpp"
#include "cuda/launch/sm90_fp8_grouped.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

constexpr int kTileM = cuda::kSm90Fp8GroupedTileM;

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

class CudaFp8Experts final : public PreparedExpertsImpl {
 public:
  CudaFp8Experts(std::vector<PreparedWeight> w, const std::vector<cuda::Fp8ExpertView>& views,
                 const PrepareOptions& o) {
    adopt(std::move(w), o, BackendKind::CUDA);
    MIXQ_CHECK(E <= (int64_t(1) << 20), ErrorCode::Unsupported, "prepare_experts (cuda): ", E,
               " experts is more than 2^20");
    device_ = views[0].device;
    cuda::DeviceGuard guard(device_);
    sms_ = cuda::DeviceContext::get(device_).caps().sm_count;
    std::vector<CUtensorMap> maps(size_t(E) * cuda::kSm90Fp8ExpertMaps);
    for (int64_t e = 0; e < E; ++e) {
      const cuda::Fp8ExpertView& v = views[size_t(e)];
      MIXQ_CHECK(v.device == device_, ErrorCode::InvalidArgument, "prepare_experts (cuda): expert ", e,
                 " is on device ", v.device, ", expert 0 on ", device_);
      cuda::make_sm90_fp8_expert_maps(v.codes, v.ldb, v.sb, v.ld_sb, N, K,
                                      maps.data() + e * cuda::kSm90Fp8ExpertMaps);
    }
    // 64-byte aligned descriptors: a device allocation is 256-byte aligned, a descriptor 128 bytes
    maps_ = DeviceBuffer(maps.size() * sizeof(CUtensorMap), device_);
    maps_.copy_from_host(maps.data(), maps.size() * sizeof(CUtensorMap));
    MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
  }

  std::string kernel_name(int64_t, std::optional<DType>) const override {
    return std::string("grouped<") + cuda::sm90_fp8_grouped_name() + ">";
  }

  // The tile list (bounded for either layout), then X's e4m3 codes
  // [rows][act_row_pitch(K)] and their scales [K blocks][act_meta_pitch(rows)].
  size_t workspace_size(int64_t rows) const override {
    return schedule_bytes(rows) + codes_bytes(rows) + size_t(num_kb() * cuda::act_meta_pitch(rows)) * 4;
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
    const int64_t ldq = cuda::act_row_pitch(K), ld_sa = cuda::act_meta_pitch(R);
    uint8_t* q = reinterpret_cast<uint8_t*>(ws + schedule_bytes(R));
    float* sa = reinterpret_cast<float*>(reinterpret_cast<char*>(q) + codes_bytes(R));
    cuda::launch_quantize_fp8_1x128(c.x.data, cuda::float_type_code(c.x.dtype, "grouped_linear x"), c.x.ld(),
                                    R, K, q, ldq, sa, ld_sa, stream, false, cuda::act_quant_tuning(opts.tuning));

    const auto [n_tiles, tiles] = cuda::launch_moe_schedule_of(c, E, R, kTileM, max_tiles, ws, stream);

    cuda::Sm90Fp8GroupedArgs a;
    a.a = q;
    a.lda = ldq;
    a.sa = sa;
    a.ld_sa = ld_sa;
    a.rows = R;
    a.N = N;
    a.K = K;
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
    cuda::launch_sm90_fp8_grouped_gemm(a, stream);
  }

 private:
  int64_t num_kb() const { return (K + 127) / 128; }
  size_t schedule_bytes(int64_t rows) const {
    return cuda::moe_schedule_bytes(cuda::moe_tiles_any_layout(rows, E, kTileM));
  }
  size_t codes_bytes(int64_t rows) const { return align256(size_t(rows * cuda::act_row_pitch(K))); }

  int device_ = 0, sms_ = 0;
  DeviceBuffer maps_;  // [E][kSm90Fp8ExpertMaps] CUtensorMap
};

}  // namespace

// FP8 block experts (act = fp8-block, every expert prepared by prepare_fp8_block); null when the
// experts are of another kind.
std::shared_ptr<const PreparedExpertsImpl> prepare_experts_fp8_block(std::vector<PreparedWeight>& experts,
                                                                     const PrepareOptions& opts) {
  std::vector<cuda::Fp8ExpertView> views(experts.size());
  for (size_t e = 0; e < experts.size(); ++e)
    if (!cuda::fp8_block_expert_view(experts[e].impl(), views[e])) {
      MIXQ_CHECK(e == 0, ErrorCode::Internal, "prepare_experts (cuda): expert ", e,
                 " is not an FP8 block weight like expert 0");
      return nullptr;
    }
  return std::make_shared<CudaFp8Experts>(std::move(experts), views, opts);
}

}  // namespace mixq
