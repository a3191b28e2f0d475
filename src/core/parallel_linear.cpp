// Tensor-parallel linear layers (mixq/parallel.hpp, docs/decisions/tensor-parallel-linear.md).
#include "mixq/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/device_ops.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

BackendKind resolved(BackendKind b) {
  if (b != BackendKind::Auto) return b;
  return cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
}

// What every rank must agree on, exchanged once at construction.
struct ShardDescriptor {
  int64_t rank, world, axis, global_n, global_k;
  int32_t code_type, scale_type, zero_kind, has_scales, act_order, block_n, backend, act;
};

ShardDescriptor describe(const QuantizedWeight& w, const ShardSpec& s, int64_t gn, int64_t gk,
                         const PrepareOptions& o) {
  ShardDescriptor d{};
  d.rank = s.rank;
  d.world = s.world;
  d.axis = int64_t(s.axis);
  d.global_n = gn;
  d.global_k = gk;
  d.code_type = int32_t(w.code_type);
  d.scale_type = int32_t(w.scale_type);
  d.zero_kind = int32_t(w.zero_kind);
  d.has_scales = w.has_scales;
  d.act_order = !w.k_perm.empty();
  d.block_n = int32_t(w.block_n);
  d.backend = int32_t(resolved(o.backend));
  d.act = int32_t(o.act);
  return d;
}

// The first field in which `d` (rank r) differs from `d0` (rank 0), as a sentence; empty if none.
std::string difference(const ShardDescriptor& d0, const ShardDescriptor& d) {
  auto field = [](const char* what, auto a, auto b) {
    return std::string(what) + " " + std::to_string(b) + " where rank 0 has " + std::to_string(a);
  };
  if (d.world != d0.world) return field("world", d0.world, d.world);
  if (d.axis != d0.axis)
    return std::string("a ") + shard_axis_name(ShardAxis(d.axis)) + " split where rank 0 has a " +
           shard_axis_name(ShardAxis(d0.axis)) + " one";
  if (d.global_n != d0.global_n || d.global_k != d0.global_k)
    return "a global weight of " + std::to_string(d.global_n) + " x " + std::to_string(d.global_k) +
           " where rank 0 has " + std::to_string(d0.global_n) + " x " + std::to_string(d0.global_k);
  if (d.code_type != d0.code_type || d.scale_type != d0.scale_type || d.zero_kind != d0.zero_kind ||
      d.has_scales != d0.has_scales || d.act_order != d0.act_order || d.block_n != d0.block_n)
    return std::string("a weight of another scheme (") + dtype_name(DType(d.code_type)) +
           " codes, " + dtype_name(DType(d.scale_type)) + " scales, " +
           (d.act_order ? "act-order" : "no act-order") + ") where rank 0 has " +
           dtype_name(DType(d0.code_type)) + " codes, " + dtype_name(DType(d0.scale_type)) +
           " scales, " + (d0.act_order ? "act-order" : "no act-order");
  if (d.backend != d0.backend) return field("backend", d0.backend, d.backend);
  if (d.act != d0.act)
    return std::string("act ") + act_quant_name(ActQuant(d.act)) + " where rank 0 has " +
           act_quant_name(ActQuant(d0.act));
  return {};
}

TensorView rows_view(void* data, DType t, int64_t M, int64_t n, int64_t ld, Device dev, int idx) {
  return TensorView::strided(data, t, {M, n}, {ld, 1}, dev, idx);
}

// The bias entries [n0, n0 + n) of a global bias as a view of their own.
TensorView bias_slice(const TensorView& bias, int64_t n0, int64_t n) {
  if (bias.empty()) return bias;
  return TensorView::strided(static_cast<char*>(bias.data) + dtype_bytes(bias.dtype, n0), bias.dtype,
                             {n}, {1}, bias.device, bias.device_index);
}

bool has_clamp(const Epilogue& ep) { return std::isfinite(ep.clamp_lo) || std::isfinite(ep.clamp_hi); }

}  // namespace

// ---------------------------------------------------------------- device-neutral helpers

void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
               int64_t rows, Device device, int device_index, void* stream) {
  if (device == Device::CUDA)
    return cuda_copy_rows(dst, dpitch, src, spitch, width, rows, device_index, stream);
  for (int64_t r = 0; r < rows; ++r)
    std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                 width);
}

void epilogue_in_place(const TensorView& y, const Epilogue& ep, const ExecContext& ctx) {
  if (ep.bias.empty() && !has_clamp(ep)) return;
  if (y.device == Device::CUDA) return cuda_epilogue_in_place(y, ep, ctx.stream);
  const int64_t M = y.shape[0], N = y.shape[1];
  auto load = [](const void* p, DType t, int64_t i) -> float {
    switch (t) {
      case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
      case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
      default: return static_cast<const float*>(p)[i];
    }
  };
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = m * y.ld() + n;
      float v = load(y.data, y.dtype, i) + (ep.bias.empty() ? 0.f : load(ep.bias.data, ep.bias.dtype, n));
      v = std::min(std::max(v, ep.clamp_lo), ep.clamp_hi);
      switch (y.dtype) {
        case DType::F16: static_cast<uint16_t*>(y.data)[i] = f32_to_f16(v); break;
        case DType::BF16: static_cast<uint16_t*>(y.data)[i] = f32_to_bf16(v); break;
        default: static_cast<float*>(y.data)[i] = v; break;
      }
    }
}

// ---------------------------------------------------------------- ParallelLinear

// Staging of the calls that bring no workspace (gathered or strided outputs), grown on demand;
// like a prepared weight's own scratch it serves one call at a time. DeviceBuffer's release
// (cudaFree) waits for the work queued on it.
struct ParallelLinear::Staging {
  std::mutex mutex;
  size_t bytes = 0;
  std::unique_ptr<DeviceBuffer> device;
  std::unique_ptr<HostBuffer> host;
};

ParallelLinear::ParallelLinear(const QuantizedWeight& local, const ShardSpec& spec, int64_t global_n,
                               int64_t global_k, std::shared_ptr<Collectives> comm,
                               const ParallelLinearOptions& opts)
    : spec_(spec), global_n_(global_n), global_k_(global_k), comm_(std::move(comm)), opts_(opts),
      staging_(std::make_shared<Staging>()) {
  MIXQ_CHECK_ARG(comm_ != nullptr, "ParallelLinear: comm is null");
  MIXQ_CHECK_ARG(global_n >= 1 && global_k >= 1, "ParallelLinear: global_n (", global_n,
                 ") and global_k (", global_k, ") must be >= 1");
  const bool column = spec.axis == ShardAxis::Column;
  range_ = shard_range(column ? global_n : global_k, spec);  // validates rank / world / granularity
  slot_ = 0;
  for (int64_t r = 0; r < spec.world; ++r) {
    const auto rg = shard_range(column ? global_n : global_k, {r, spec.world, spec.axis, spec.granularity});
    slot_ = std::max(slot_, rg.second - rg.first);
  }
  const int64_t width = range_.second - range_.first;
  MIXQ_CHECK_ARG(column ? (local.N == width && local.K == global_k) : (local.K == width && local.N == global_n),
                 "ParallelLinear: rank ", spec.rank, " of ", spec.world, " (", shard_axis_name(spec.axis),
                 ") must hold a ", column ? width : global_n, " x ", column ? global_k : width,
                 " shard of the ", global_n, " x ", global_k, " weight, got ", local.N, " x ", local.K);
  MIXQ_CHECK_ARG(comm_->world() == spec.world && comm_->rank() == spec.rank, "ParallelLinear: the ",
                 comm_->name(), " communicator is rank ", comm_->rank(), " of ", comm_->world(),
                 ", the shard spec rank ", spec.rank, " of ", spec.world);
  const BackendKind backend = resolved(opts.prepare.backend);
  if (backend == BackendKind::CUDA) {
    MIXQ_CHECK_ARG(comm_->device() == Device::CUDA && comm_->device_index() == opts.prepare.device,
                   "ParallelLinear: the ", comm_->name(), " communicator is on ",
                   device_name(comm_->device()), " device ", comm_->device_index(),
                   ", the shard is prepared for cuda device ", opts.prepare.device,
                   " (PrepareOptions::device)");
  } else {
    MIXQ_CHECK_ARG(comm_->device() == Device::CPU, "ParallelLinear: the ", comm_->name(),
                   " communicator is on ", device_name(comm_->device()), " device ",
                   comm_->device_index(), ", the shard is prepared for the host (backend ",
                   backend_name(backend), ")");
  }
  if (opts.check_shards) {
    const ShardDescriptor mine = describe(local, spec, global_n, global_k, opts.prepare);
    std::vector<ShardDescriptor> all(size_t(spec.world));
    comm_->all_gather_host(&mine, all.data(), sizeof(ShardDescriptor));
    for (int64_t r = 0; r < spec.world; ++r) {
      MIXQ_CHECK_ARG(all[size_t(r)].rank == r, "ParallelLinear: communicator rank ", r,
                     " holds the shard of rank ", all[size_t(r)].rank, " (ShardSpec::rank)");
      const std::string diff = difference(all[0], all[size_t(r)]);
      MIXQ_CHECK_ARG(diff.empty(), "ParallelLinear: rank ", r, " holds ", diff);
    }
  }
  local_ = prepare(local, opts.prepare);
}

int64_t ParallelLinear::in_features() const {
  return spec_.axis == ShardAxis::Column ? global_k_ : range_.second - range_.first;
}
int64_t ParallelLinear::out_features() const {
  return spec_.axis == ShardAxis::Row || opts_.gather_output ? global_n_ : range_.second - range_.first;
}

size_t ParallelLinear::workspace_size(int64_t M) const {
  const size_t own = align_up(linear_workspace_size(local_, M));
  // staging of 4-byte outputs at most: the gather slots, or a row-parallel sum of a strided y
  const size_t staging = spec_.axis == ShardAxis::Column
                             ? (opts_.gather_output ? size_t(spec_.world * M * slot_) * 4 : 0)
                             : size_t(M * global_n_) * 4;
  return own + align_up(staging);
}

void ParallelLinear::forward(const TensorView& x, const TensorView& y, const Epilogue& ep,
                             const ExecContext& ctx) const {
  const bool column = spec_.axis == ShardAxis::Column;
  check_view(x, "x", 2, x.device);
  check_view(y, "y", 2, y.device);
  const int64_t M = x.shape[0];
  MIXQ_CHECK_ARG(x.shape[1] == in_features(), "ParallelLinear.forward: x has ", x.shape[1],
                 " columns, this ", shard_axis_name(spec_.axis), " rank takes ", in_features());
  MIXQ_CHECK_ARG(y.shape[0] == M && y.shape[1] == out_features(), "ParallelLinear.forward: y is ",
                 y.describe(), ", expected [", M, ", ", out_features(), "]");
  MIXQ_CHECK_ARG(ep.bias.empty() || (ep.bias.rank == 1 && ep.bias.shape[0] == global_n_),
                 "ParallelLinear.forward: bias must be the global [", global_n_, "] bias, got ",
                 ep.bias.describe());
  MIXQ_CHECK_ARG(y.dtype == DType::F32 || y.dtype == DType::F16 || y.dtype == DType::BF16,
                 "ParallelLinear.forward: y must be f32, f16 or bf16, got ", y.describe());
  const int64_t n0 = range_.first, width = range_.second - range_.first;
  const size_t eb = size_t(dtype_bytes(y.dtype, 1));

  // Scratch: the shard's own product workspace, then the staging.
  const size_t own = align_up(linear_workspace_size(local_, M));
  char* staging = nullptr;
  ExecContext inner = ctx;
  if (ctx.workspace) {
    MIXQ_CHECK_ARG(ctx.workspace_bytes >= workspace_size(M), "ParallelLinear.forward: workspace of ",
                   ctx.workspace_bytes, " bytes is smaller than the ", workspace_size(M),
                   " this call needs (workspace_size(", M, "))");
    inner.workspace_bytes = own;
    staging = static_cast<char*>(ctx.workspace) + own;
  }
  auto take_staging = [&](size_t bytes) -> char* {
    if (staging) return staging;
    Staging& st = *staging_;
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.bytes < bytes) {
      if (y.device == Device::CUDA) {
        st.device.reset();
        st.device = std::make_unique<DeviceBuffer>(bytes, y.device_index);
      } else {
        st.host = std::make_unique<HostBuffer>(bytes);
      }
      st.bytes = bytes;
    }
    return static_cast<char*>(st.device ? st.device->data() : st.host->data());
  };

  if (column) {
    Epilogue local_ep = ep;
    local_ep.bias = bias_slice(ep.bias, n0, width);
    if (!opts_.gather_output) return linear(x, local_, y, local_ep, inner);
    const bool even = slot_ * spec_.world == global_n_;
    if (M == 1 && even) {
      // one row, equal slots: the slots are y itself; gather in place
      char* mine = static_cast<char*>(y.data) + size_t(spec_.rank * slot_) * eb;
      linear(x, local_, rows_view(mine, y.dtype, 1, width, width, y.device, y.device_index), local_ep, inner);
      comm_->all_gather(mine, y.data, slot_, y.dtype, ctx.stream);
      return;
    }
    // rank r's [M][n_r] product in slot r ([M * slot] elements), gathered, then placed at its columns
    char* slots = take_staging(size_t(spec_.world * M * slot_) * eb);
    char* mine = slots + size_t(spec_.rank * M * slot_) * eb;
    linear(x, local_, rows_view(mine, y.dtype, M, width, width, y.device, y.device_index), local_ep, inner);
    comm_->all_gather(mine, slots, M * slot_, y.dtype, ctx.stream);
    for (int64_t r = 0; r < spec_.world; ++r) {
      const auto rg = shard_range(global_n_, {r, spec_.world, spec_.axis, spec_.granularity});
      const int64_t nr = rg.second - rg.first;
      copy_rows(static_cast<char*>(y.data) + size_t(rg.first) * eb, size_t(y.ld()) * eb,
                slots + size_t(r * M * slot_) * eb, size_t(nr) * eb, size_t(nr) * eb, M, y.device,
                y.device_index, ctx.stream);
    }
    return;
  }

  // Row-parallel: every rank's partial [M][N], summed in place; the bias and clamp once. With no
  // clamp the bias rides in rank 0's product (y0 + b + y1 + ... is the sum plus the bias).
  const bool contiguous = y.ld() == global_n_ || M == 1;
  char* sum = contiguous ? static_cast<char*>(y.data) : take_staging(size_t(M * global_n_) * eb);
  const TensorView partial = rows_view(sum, y.dtype, M, global_n_, global_n_, y.device, y.device_index);
  const bool clamp = has_clamp(ep);
  Epilogue local_ep;
  if (!clamp && spec_.rank == 0) local_ep.bias = ep.bias;
  linear(x, local_, contiguous ? y : partial, local_ep, inner);
  comm_->all_reduce_sum(sum, M * global_n_, y.dtype, ctx.stream);
  if (!contiguous)
    copy_rows(y.data, size_t(y.ld()) * eb, sum, size_t(global_n_) * eb, size_t(global_n_) * eb, M,
              y.device, y.device_index, ctx.stream);
  if (clamp) epilogue_in_place(y, ep, ctx);
}

}  // namespace mixq
