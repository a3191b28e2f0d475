// Stacked INT8 W8A8 experts on CUDA (act = int8-block: int8 codes per block of 64 or 128 along K,
// symmetric or with offsets, times activations quantized per token per block at the call): the
// experts stay ordinary prepared INT8 block weights (backend/int8_block.cpp); this adds each
// expert's TMA descriptors in device memory and runs a grouped call on the caller's stream: the
// quantizer over every row of X, the tile schedule from the device-side offsets / counts, then the
// grouped block GEMM over every (expert, 128-row token tile) x N tile; or at decode shares the
// quantizer, then the few-token kernel's grouped form over (expert, 16-64-row tile) x 128-row
// weight tiles, which lists the tiles itself (launch/sm90_w8a8_grouped.hpp; the choice:
// dispatch/moe_plan.hpp, plan_moe_block).
// Nothing is read back; launch shapes depend only on host-known sizes (graph-capturable).
#include <cuda_runtime.h>

#include <vector>

#include "cuda/backend/common.hpp"
#include "cuda/backend/factories.hpp"
#include "cuda/backend/moe_block_experts.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/launch/sm90_w8a8_grouped.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

static_assert(cuda::kSm90Int8GroupedTileM == cuda::kMoeBlockTileM, "the plan's block GEMM tile");

class CudaInt8Experts final : public cuda::CudaBlockExperts {
 public:
  CudaInt8Experts(std::vector<PreparedWeight> w, const std::vector<cuda::Int8ExpertView>& views,
                  const PrepareOptions& o) {
    adopt(std::move(w), o, BackendKind::CUDA);
    std::vector<int> devices;
    for (const cuda::Int8ExpertView& v : views) devices.push_back(v.device);
    set_device(devices);
    const cuda::Int8ExpertView& first = views[0];
    g_ = first.g;
    offset_ = first.offset;
    Np_ = first.w.Np;
    if (first.w.r1w == nullptr) {
      cuda::DeviceGuard guard(device_);
      const cuda::DeviceCaps caps = cuda::DeviceContext::get(device_).caps();
      MIXQ_FAIL(ErrorCode::Unsupported, "prepare_experts (cuda): INT8 W8A8 experts run the Hopper "
                "grouped kernel (compute capability 9.0, a library built with sm_90a); device ",
                device_, " is ", caps.cc_major, ".", caps.cc_minor, caps.sm90a ? "" : " (no sm_90a image)",
                ": use the cpu backend");
    }
    std::vector<CUtensorMap> maps(size_t(E) * cuda::kSm90Int8ExpertMaps);
    for (int64_t e = 0; e < E; ++e) {
      const cuda::Int8ExpertView& v = views[size_t(e)];
      MIXQ_CHECK(v.g == g_ && v.offset == offset_ && v.w.Np == Np_, ErrorCode::InvalidArgument,
                 "prepare_experts (cuda): expert ", e, " has K block ", v.g,
                 v.offset ? " with offsets" : " symmetric", ", expert 0 K block ", g_,
                 offset_ ? " with offsets" : " symmetric", ": the experts must share one scheme");
      cuda::make_sm90_int8_expert_maps(v.w, N, K, g_, offset_,
                                       maps.data() + e * cuda::kSm90Int8ExpertMaps);
    }
    upload_maps(maps);
  }

  std::string kernel_name(int64_t rows, std::optional<DType>) const override {
    return grouped_name(rows, [] { return cuda::sm90_int8_grouped_name(); },
                        [](int mt) { return cuda::sm90_int8_grouped_skinny_name(mt); });
  }

  // The tile list (bounded for either layout), X's int8 codes [rows][act_row_pitch(K)], their
  // scales, offsets and code sums [K blocks][act_meta_pitch(rows)] each, then the few-token form's
  // pieces.
  size_t workspace_size(int64_t rows) const override {
    return schedule_bytes(rows) + codes_bytes(rows) + 3 * meta_bytes(rows) + split_bytes(rows);
  }

  void grouped_linear(const GroupedCall& c, const Epilogue& ep, const ExecContext& ctx) const override {
    cuda::DeviceGuard guard(device_);
    const Call call = begin_call(c, ctx);
    const int64_t R = call.rows;
    if (R == 0) return;
    const int64_t ldq = cuda::act_row_pitch(K), ld_meta = cuda::act_meta_pitch(R);
    int8_t* q = reinterpret_cast<int8_t*>(call.workspace + schedule_bytes(R));
    char* meta = reinterpret_cast<char*>(q) + codes_bytes(R);
    float* sx = reinterpret_cast<float*>(meta);
    float* ox = reinterpret_cast<float*>(meta + meta_bytes(R));
    int32_t* sums = reinterpret_cast<int32_t*>(meta + 2 * meta_bytes(R));
    const cuda::SkinnyGroupedWork work = skinny_work(call, meta + 3 * meta_bytes(R));
    cuda::Sm90Int8GroupedArgs a;
    a.call = schedule_and_quantize(c, ep, call, [&] {
      cuda::launch_quantize_int8_block(c.x.data, cuda::float_type_code(c.x.dtype, "grouped_linear x"),
                                       c.x.ld(), R, K, g_, q, ldq, sx, ox, sums, ld_meta, call.stream,
                                       false, cuda::act_quant_tuning(opts.tuning),
                                       cuda::ActQuantClear{work.tickets, work.n_clear});
    });
    a.a = q;
    a.lda = ldq;
    a.sx = sx;
    a.ox = ox;
    a.sumx = sums;
    a.ld_meta = ld_meta;
    a.g = g_;
    a.offset = offset_;
    a.Np = Np_;
    if (call.plan.skinny) cuda::launch_sm90_int8_grouped_skinny(a, work, call.stream);
    else cuda::launch_sm90_int8_grouped_gemm(a, call.stream);
  }

 private:
  size_t meta_bytes(int64_t rows) const {
    return cuda::int8b::align256(size_t((K + g_ - 1) / g_ * cuda::act_meta_pitch(rows)) * 4);
  }

  int g_ = 128;
  bool offset_ = false;
  int64_t Np_ = 0;
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
