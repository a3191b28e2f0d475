#include "cuda/backend/moe_block_experts.hpp"

#include <algorithm>

#include "cuda/backend/common.hpp"
#include "cuda/backend/moe_schedule_call.hpp"
#include "cuda/dispatch/moe_plan.hpp"
#include "cuda/launch/act_quant.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/device_context.hpp"
#include "mixq/error.hpp"

namespace mixq::cuda {

void CudaBlockExperts::set_device(const std::vector<int>& expert_devices) {
  MIXQ_CHECK(E <= (int64_t(1) << 20), ErrorCode::Unsupported, "prepare_experts (cuda): ", E,
             " experts is more than 2^20");
  device_ = expert_devices[0];
  for (size_t e = 1; e < expert_devices.size(); ++e)
    MIXQ_CHECK(expert_devices[e] == device_, ErrorCode::InvalidArgument, "prepare_experts (cuda): expert ",
               e, " is on device ", expert_devices[e], ", expert 0 on ", device_);
  DeviceGuard guard(device_);
  sms_ = DeviceContext::get(device_).caps().sm_count;
  l2_bytes_ = DeviceContext::get(device_).caps().l2_bytes;
}

void CudaBlockExperts::upload_maps(const std::vector<CUtensorMap>& maps) {
  DeviceGuard guard(device_);
  // 64-byte aligned descriptors: a device allocation is 256-byte aligned, a descriptor 128 bytes
  maps_ = DeviceBuffer(maps.size() * sizeof(CUtensorMap), device_);
  maps_.copy_from_host(maps.data(), maps.size() * sizeof(CUtensorMap));
  MIXQ_CUDA_CHECK(cudaDeviceSynchronize());  // prepare is not on the hot path
}

MoeBlockPlan CudaBlockExperts::plan_for(int64_t rows, bool masked) const {
  MoeCall mc;
  mc.E = E;
  mc.rows = rows;
  mc.masked = masked;
  mc.max_tokens = masked ? rows / E : 0;
  return plan_moe_block(mc, N, K, sms_, opts.tuning);
}

// The smallest token tile has the most tiles.
size_t CudaBlockExperts::schedule_bytes(int64_t rows) const {
  return moe_schedule_bytes(moe_tiles_any_layout(rows, E, 16));
}

size_t CudaBlockExperts::split_bytes(int64_t rows) const {
  return std::max(moe_block_split_bytes(plan_for(rows, false)),
                  rows % E == 0 ? moe_block_split_bytes(plan_for(rows, true)) : size_t(0));
}

SkinnyGroupedWork CudaBlockExperts::skinny_work(const Call& call, char* at) const {
  SkinnyGroupedWork w;
  w.mt = call.plan.tile_m;
  w.splits = call.plan.splits;
  if (w.splits > 1) {
    w.partial = reinterpret_cast<float*>(at);
    w.tickets = reinterpret_cast<unsigned*>(at + (size_t(call.plan.partial_floats) * 4 + 255) / 256 * 256);
    w.n_clear = call.plan.tickets;
  }
  return w;
}

size_t CudaBlockExperts::codes_bytes(int64_t rows) const {
  return int8b::align256(size_t(rows * act_row_pitch(K)));
}

CudaBlockExperts::Call CudaBlockExperts::begin_call(const GroupedCall& c, const ExecContext& ctx) const {
  for (const TensorView* v : {&c.x, &c.y})
    MIXQ_CHECK_ARG(v->device_index == device_, "grouped_linear: ", v->describe(),
                   " is not on the experts' device ", device_);
  Call call;
  call.rows = c.x.shape[0];
  MIXQ_CHECK(call.rows < (int64_t(1) << 31) - kMoeBlockTileM, ErrorCode::Unsupported,
             "grouped_linear (cuda): rows (", call.rows, ") must be < 2^31 - ", kMoeBlockTileM);
  const size_t need = workspace_size(call.rows);
  MIXQ_CHECK_ARG(ctx.workspace != nullptr && ctx.workspace_bytes >= need,
                 "grouped_linear (cuda): needs ExecContext::workspace of ", need, " bytes "
                 "(grouped_linear_workspace_size), got ", ctx.workspace_bytes, " at ", ctx.workspace);
  MIXQ_CHECK_ARG(reinterpret_cast<uintptr_t>(ctx.workspace) % 16 == 0, "grouped_linear (cuda): "
                 "ExecContext::workspace (", ctx.workspace, ") must be 16-byte aligned");
  if (call.rows == 0) return call;
  call.stream = static_cast<cudaStream_t>(ctx.stream);
  call.workspace = static_cast<char*>(ctx.workspace);
  MoeCall mc;
  mc.E = E;
  mc.rows = call.rows;
  mc.masked = c.rows.layout == MoeRows::Layout::Masked;
  mc.max_tokens = mc.masked ? c.rows.max_tokens : 0;
  call.plan = plan_moe_block(mc, N, K, sms_, opts.tuning);
  return call;
}

BlockGroupedCall CudaBlockExperts::fields(const GroupedCall& c, const Epilogue& ep, const Call& call) const {
  BlockGroupedCall g;
  g.rows = call.rows;
  g.N = N;
  g.K = K;
  g.y = c.y.data;
  g.ldy = c.y.ld();
  g.y_type = float_type_code(c.y.dtype, "grouped_linear y");
  g.bias = c.bias.empty() ? nullptr : c.bias.data;
  g.bias_type = c.bias.empty() ? 2 : float_type_code(c.bias.dtype, "grouped_linear bias");
  g.bias_stride = c.bias_per_expert ? c.bias.stride[0] : 0;
  g.clamp_lo = ep.clamp_lo;
  g.clamp_hi = ep.clamp_hi;
  g.max_tiles = call.plan.max_tiles;
  g.maps = static_cast<const CUtensorMap*>(maps_.data());
  g.num_sms = sms_;
  g.y_tma = opts.tuning.w8a8_y_tma == Toggle::Off ? 0 : -1;
  g.pdl = true;
  g.expert_major = moe_expert_major(true, N * K, l2_bytes_, opts.tuning);  // 1-byte codes
  return g;
}

BlockGroupedCall CudaBlockExperts::schedule(const GroupedCall& c, const Epilogue& ep, const Call& call) const {
  const auto [n_tiles, tiles] = launch_moe_schedule_of(c, E, call.rows, call.plan.tile_m,
                                                       call.plan.max_tiles, call.workspace, call.stream);
  BlockGroupedCall g = fields(c, ep, call);
  g.n_tiles = n_tiles;
  g.tiles = tiles;
  return g;
}

BlockGroupedCall CudaBlockExperts::routed(const GroupedCall& c, const Epilogue& ep, const Call& call) const {
  BlockGroupedCall g = fields(c, ep, call);
  const bool masked = c.rows.layout == MoeRows::Layout::Masked;
  g.offsets = masked ? nullptr : c.rows.offsets.ptr<const int32_t>();
  g.counts = masked ? c.rows.counts.ptr<const int32_t>() : nullptr;
  g.E = E;
  g.max_tokens = masked ? c.rows.max_tokens : 0;
  g.error = c.rows.error.empty() ? nullptr : c.rows.error.ptr<int32_t>();
  return g;
}

}  // namespace mixq::cuda
