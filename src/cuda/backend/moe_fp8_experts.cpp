// Stacked FP8 block experts on CUDA (DeepSeek-V3's e4m3 experts with one f32 scale per 128 x 128
// block, times activations quantized per token per 128 along K): the experts stay ordinary
// prepared FP8 block weights (backend/fp8_block.cpp); this adds each expert's TMA descriptors in
// device memory and runs a grouped call on the caller's stream: the quantizer over every row of X,
// the tile schedule from the device-side offsets / counts, then the grouped block GEMM over every
// (expert, 128-row token tile) x N tile; or at decode shares the quantizer, then the few-token
// kernel's grouped form over (expert, 16-64-row tile) x 128-row weight tiles, which lists the tiles
// itself (launch/sm90_fp8_grouped.hpp; the choice: dispatch/moe_plan.hpp, plan_moe_block).
// Nothing is read back; launch shapes depend only on host-known sizes (graph-capturable).
#include <cuda_runtime.h>

#include <vector>

#include "cuda/backend/common.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/backend/moe_block_experts.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/sm90_fp8_grouped.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

static_assert(cuda::kSm90Fp8GroupedTileM == cuda::kMoeBlockTileM, "the plan's block GEMM tile");

class CudaFp8Experts final : public cuda::CudaBlockExperts {
 public:
  CudaFp8Experts(std::vector<PreparedWeight> w, const std::vector<cuda::Fp8ExpertView>& views,
                 const PrepareOptions& o) {
    adopt(std::move(w), o, BackendKind::CUDA);
    std::vector<int> devices;
    for (const cuda::Fp8ExpertView& v : views) devices.push_back(v.device);
    set_device(devices);
    std::vector<CUtensorMap> maps(size_t(E) * cuda::kSm90Fp8ExpertMaps);
    for (int64_t e = 0; e < E; ++e) {
      const cuda::Fp8ExpertView& v = views[size_t(e)];
      cuda::make_sm90_fp8_expert_maps(v.codes, v.ldb, v.sb, v.ld_sb, N, K,
                                      maps.data() + e * cuda::kSm90Fp8ExpertMaps);
    }
    upload_maps(maps);
  }

  std::string kernel_name(int64_t rows, std::optional<DType>) const override {
    return grouped_name(rows, [] { return cuda::sm90_fp8_grouped_name(); },
                        [](int mt) { return cuda::sm90_fp8_grouped_skinny_name(mt); });
  }

  // The tile list (bounded for either layout), X's e4m3 codes [rows][act_row_pitch(K)], their
  // scales [K blocks][act_meta_pitch(rows)], then the few-token form's pieces.
  size_t workspace_size(int64_t rows) const override {
    return schedule_bytes(rows) + codes_bytes(rows) + scales_bytes(rows) + split_bytes(rows);
  }

  void grouped_linear(const GroupedCall& c, const Epilogue& ep, const ExecContext& ctx) const override {
    cuda::DeviceGuard guard(device_);
    const Call call = begin_call(c, ctx);
    const int64_t R = call.rows;
    if (R == 0) return;
    const int64_t ldq = cuda::act_row_pitch(K), ld_sa = cuda::act_meta_pitch(R);
    uint8_t* q = reinterpret_cast<uint8_t*>(call.workspace + schedule_bytes(R));
    float* sa = reinterpret_cast<float*>(reinterpret_cast<char*>(q) + codes_bytes(R));
    const cuda::SkinnyGroupedWork work =
        skinny_work(call, reinterpret_cast<char*>(sa) + scales_bytes(R));
    cuda::Sm90Fp8GroupedArgs a;
    a.call = schedule_and_quantize(c, ep, call, [&] {
      cuda::launch_quantize_fp8_1x128(c.x.data, cuda::float_type_code(c.x.dtype, "grouped_linear x"),
                                      c.x.ld(), R, K, q, ldq, sa, ld_sa, call.stream, false,
                                      cuda::act_quant_tuning(opts.tuning),
                                      cuda::ActQuantClear{work.tickets, work.n_clear});
    });
    a.a = q;
    a.lda = ldq;
    a.sa = sa;
    a.ld_sa = ld_sa;
    if (call.plan.skinny) cuda::launch_sm90_fp8_grouped_skinny(a, work, call.stream);
    else cuda::launch_sm90_fp8_grouped_gemm(a, call.stream);
  }

 private:
  int64_t num_kb() const { return (K + 127) / 128; }
  size_t scales_bytes(int64_t rows) const {
    return cuda::int8b::align256(size_t(num_kb() * cuda::act_meta_pitch(rows)) * 4);
  }
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
