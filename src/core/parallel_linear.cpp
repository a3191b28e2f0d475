// Tensor-parallel linear layers (mixq/parallel.hpp, docs/decisions/tensor-parallel-linear.md).
#include "mixq/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/device_ops.hpp"
#include "core/float_elements.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq {

namespace {

constexpr size_t kAlign = 256;
std::string parallel_name(ShardAxis a) { return std::string(shard_axis_name(a)) + "-parallel"; }
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

BackendKind resolved(BackendKind b) {
  if (b != BackendKind::Auto) return b;
  return cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
}

// What every rank must agree on, exchanged once at construction before any rank checks
// anything: every rank then runs the same checks on every rank's descriptor and throws the same
// error, so a bad rank cannot leave the others waiting in a collective.
struct ShardDescriptor {
  int64_t rank, world, comm_rank, comm_world, axis, granularity, global_n, global_k, local_n, local_k;
  int32_t code_type, scale_type, zero_kind, has_scales, act_order, block_n, backend, act;
  int32_t comm_device, comm_device_index, device_index;
};

ShardDescriptor describe(const QuantizedWeight& w, const ShardSpec& s, int64_t gn, int64_t gk,
                         const PrepareOptions& o, const Collectives& c) {
  ShardDescriptor d{};
  d.rank = s.rank;
  d.world = s.world;
  d.comm_rank = c.rank();
  d.comm_world = c.world();
  d.axis = int64_t(s.axis);
  d.granularity = s.granularity;
  d.global_n = gn;
  d.global_k = gk;
  d.local_n = w.N;
  d.local_k = w.K;
  d.code_type = int32_t(w.code_type);
  d.scale_type = int32_t(w.scale_type);
  d.zero_kind = int32_t(w.zero_kind);
  d.has_scales = w.has_scales;
  d.act_order = !w.k_perm.empty();
  d.block_n = int32_t(w.block_n);
  d.backend = int32_t(resolved(o.backend));
  d.act = int32_t(o.act);
  d.comm_device = int32_t(c.device());
  d.comm_device_index = c.device_index();
  d.device_index = o.device;
  return d;
}

// What is wrong with rank r's descriptor on its own, as a sentence; empty if nothing.
std::string own_problem(const ShardDescriptor& d, const std::string& comm_name) {
  auto str = [](auto v) { return std::to_string(v); };
  if (d.comm_rank != d.rank || d.comm_world != d.world)
    return "a " + comm_name + " communicator of rank " + str(d.comm_rank) + " of " + str(d.comm_world) +
           " for the shard spec rank " + str(d.rank) + " of " + str(d.world);
  if (d.global_n < 1 || d.global_k < 1)
    return "a global weight of " + str(d.global_n) + " x " + str(d.global_k);
  const ShardAxis axis = ShardAxis(d.axis);
  const bool column = axis == ShardAxis::Column;
  const auto rg = shard_range(column ? d.global_n : d.global_k,
                              {d.rank, d.world, axis, d.granularity});
  const int64_t width = rg.second - rg.first;
  const int64_t want_n = column ? width : d.global_n, want_k = column ? d.global_k : width;
  if (d.local_n != want_n || d.local_k != want_k)
    return "a " + str(d.local_n) + " x " + str(d.local_k) + " shard where its " +
           parallel_name(axis) + " split of the " + str(d.global_n) + " x " + str(d.global_k) +
           " weight is " + str(want_n) + " x " + str(want_k);
  const bool cuda = BackendKind(d.backend) == BackendKind::CUDA;
  if (cuda && (Device(d.comm_device) != Device::CUDA || d.comm_device_index != d.device_index))
    return "a " + comm_name + " communicator on " + device_name(Device(d.comm_device)) + " device " +
           str(d.comm_device_index) + " for a shard prepared on cuda device " + str(d.device_index) +
           " (PrepareOptions::device)";
  if (!cuda && Device(d.comm_device) != Device::CPU)
    return "a " + comm_name + " communicator on " + device_name(Device(d.comm_device)) + " device " +
           str(d.comm_device_index) + " for a shard prepared for the host (backend " +
           backend_name(BackendKind(d.backend)) + ")";
  return {};
}

// The first field in which `d` (rank r) differs from `d0` (rank 0), as a sentence; empty if none.
std::string difference(const ShardDescriptor& d0, const ShardDescriptor& d) {
  auto field = [](const char* what, auto a, auto b) {
    return std::string(what) + " " + std::to_string(b) + " where rank 0 has " + std::to_string(a);
  };
  if (d.world != d0.world) return field("world", d0.world, d.world);
  if (d.axis != d0.axis)
    return std::string("a ") + parallel_name(ShardAxis(d.axis)) + " split where rank 0 has a " +
           parallel_name(ShardAxis(d0.axis)) + " one";
  if (d.granularity != d0.granularity) return field("granularity", d0.granularity, d.granularity);
  if (d.global_n != d0.global_n || d.global_k != d0.global_k)
    return "a global weight of " + std::to_string(d.global_n) + " x " + std::to_string(d.global_k) +
           " where rank 0 has " + std::to_string(d0.global_n) + " x " + std::to_string(d0.global_k);
  if (d.code_type != d0.code_type || d.scale_type != d0.scale_type || d.zero_kind != d0.zero_kind ||
      d.has_scales != d0.has_scales || d.act_order != d0.act_order || d.block_n != d0.block_n)
    return std::string("a weight of another scheme (") + dtype_name(DType(d.code_type)) +
           " codes, " + dtype_name(DType(d.scale_type)) + " scales, " +
           (d.act_order ? "act-order" : "no act-order") + ") than rank 0 (" +
           dtype_name(DType(d0.code_type)) + " codes, " + dtype_name(DType(d0.scale_type)) +
           " scales, " + (d0.act_order ? "act-order" : "no act-order") + ")";
  if (d.backend != d0.backend)
    return std::string("backend ") + backend_name(BackendKind(d.backend)) + " where rank 0 has " +
           backend_name(BackendKind(d0.backend));
  if (d.act != d0.act)
    return std::string("act ") + act_quant_name(ActQuant(d.act)) + " where rank 0 has " +
           act_quant_name(ActQuant(d0.act));
  return {};
}

TensorView rows_view(void* data, DType t, int64_t M, int64_t n, int64_t ld, Device dev, int idx) {
  return TensorView::strided(data, t, {M, n}, {ld, 1}, dev, idx);
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
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = m * y.ld() + n;
      const float v = load_f32_elem(y.data, y.dtype, i) +
                      (ep.bias.empty() ? 0.f : load_f32_elem(ep.bias.data, ep.bias.dtype, n));
      store_f32_elem(y.data, y.dtype, i, std::min(std::max(v, ep.clamp_lo), ep.clamp_hi));
    }
}

// ---------------------------------------------------------------- plain collective buffers

std::shared_ptr<void> Collectives::alloc_collective_buffer(size_t bytes) {
  if (device() == Device::CUDA) {
    auto buf = std::make_shared<DeviceBuffer>(std::max<size_t>(bytes, 1), device_index());
    return std::shared_ptr<void>(buf, buf->data());
  }
  auto buf = std::make_shared<HostBuffer>(std::max<size_t>(bytes, 1));
  return std::shared_ptr<void>(buf, buf->data());
}

// ---------------------------------------------------------------- one rank alone

namespace {
class SingleRank final : public Collectives {
 public:
  SingleRank(Device d, int idx) : device_(d), index_(idx) {}
  int64_t rank() const override { return 0; }
  int64_t world() const override { return 1; }
  Device device() const override { return device_; }
  int device_index() const override { return index_; }
  std::string name() const override { return "single-rank"; }
  void all_reduce_sum(void*, int64_t, DType, void*) override {}
  void all_gather(const void* send, void* recv, int64_t count, DType t, void* stream) override {
    if (send == recv) return;
    const size_t bytes = size_t(dtype_bytes(t, count));
    copy_rows(recv, bytes, send, bytes, bytes, 1, device_, index_, stream);
  }
  void all_gather_host(const void* send, void* out, size_t bytes) override {
    std::memmove(out, send, bytes);
  }

 private:
  Device device_;
  int index_;
};
}  // namespace

std::shared_ptr<Collectives> single_rank_collectives(Device device, int device_index) {
  return std::make_shared<SingleRank>(device, device_index);
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
  std::unique_ptr<StreamFork> fork;  // the chunked row sums' side stream, made on first use
};

namespace {
constexpr int kMaxRowChunks = 16;
// The automatic row split (ParallelLinearOptions::row_chunks = 0).
constexpr int64_t kAutoRowChunks = 4;
constexpr int64_t kAutoChunkMinSumBytes = int64_t(32) << 20;
}  // namespace

ParallelLinear::ParallelLinear(const QuantizedWeight& local, const ShardSpec& spec, int64_t global_n,
                               int64_t global_k, std::shared_ptr<Collectives> comm,
                               const ParallelLinearOptions& opts)
    : spec_(spec), global_n_(global_n), global_k_(global_k), comm_(std::move(comm)), opts_(opts),
      staging_(std::make_shared<Staging>()) {
  MIXQ_CHECK_ARG(comm_ != nullptr, "ParallelLinear: comm is null");
  MIXQ_CHECK_ARG(opts.row_chunks >= 0 && opts.row_chunks <= kMaxRowChunks,
                 "ParallelLinear: row_chunks is ", opts.row_chunks, ", must be 0 (automatic) .. ",
                 kMaxRowChunks);
  const bool column = spec.axis == ShardAxis::Column;
  const ShardDescriptor mine = describe(local, spec, global_n, global_k, opts.prepare, *comm_);
  std::vector<ShardDescriptor> all;
  if (opts.check_shards) {
    all.resize(size_t(comm_->world()));
    comm_->all_gather_host(&mine, all.data(), sizeof(ShardDescriptor));
  } else {
    all.push_back(mine);
  }
  for (size_t r = 0; r < all.size(); ++r) {
    const ShardDescriptor& d = all[r];
    const std::string who = opts.check_shards ? "rank " + std::to_string(r) : "this rank";
    std::string problem;
    try {
      problem = own_problem(d, comm_->name());
    } catch (const Error& e) {  // shard_range's own check of rank / world / granularity
      problem = std::string("a bad shard spec: ") + e.what();
    }
    MIXQ_CHECK_ARG(problem.empty(), "ParallelLinear: ", who, " has ", problem);
    if (opts.check_shards) {
      MIXQ_CHECK_ARG(d.comm_rank == int64_t(r), "ParallelLinear: communicator rank ", r,
                     " reported rank ", d.comm_rank);
      const std::string diff = difference(all[0], d);
      MIXQ_CHECK_ARG(diff.empty(), "ParallelLinear: ", who, " holds ", diff);
    }
  }
  for (int64_t r = 0; r < spec.world; ++r) {
    ranges_.push_back(shard_range(column ? global_n : global_k, {r, spec.world, spec.axis, spec.granularity}));
    slot_ = std::max(slot_, ranges_.back().second - ranges_.back().first);
  }
  // Every rank prepares its shard, then all ranks agree that all did before any returns: one
  // process driving several GPUs must not free memory on one rank (prepare's temporaries) while
  // another already waits in a collective of its first forward (NCCL: cudaFree waits for the
  // peers' kernels, which wait for this rank: a deadlock). A rank whose prepare failed makes
  // every rank throw.
  std::string failed;
  try {
    local_ = prepare(local, opts.prepare);
  } catch (const Error& e) {
    if (!opts.check_shards) throw;
    failed = e.what();
  }
  if (opts.check_shards) {
    const int32_t ok = failed.empty() ? 1 : 0;
    std::vector<int32_t> oks(size_t(comm_->world()));
    comm_->all_gather_host(&ok, oks.data(), sizeof ok);
    MIXQ_CHECK(failed.empty(), ErrorCode::InvalidArgument, "ParallelLinear: rank ", spec.rank,
               " could not prepare its shard: ", failed);
    for (size_t r = 0; r < oks.size(); ++r)
      MIXQ_CHECK(oks[r] == 1, ErrorCode::InvalidArgument, "ParallelLinear: rank ", r,
                 " could not prepare its shard (its own error says why)");
  }
}

int64_t ParallelLinear::in_features() const {
  return spec_.axis == ShardAxis::Column ? global_k_ : range().second - range().first;
}
int64_t ParallelLinear::out_features() const {
  return spec_.axis == ShardAxis::Row || opts_.gather_output ? global_n_ : range().second - range().first;
}

// The shard's product workspace for a forward of M rows: a row-parallel forward cut into chunks
// multiplies chunk by chunk, and a plan for fewer rows can need more (a K split).
size_t ParallelLinear::product_workspace(int64_t M) const {
  size_t bytes = linear_workspace_size(local_, M);
  if (spec_.axis == ShardAxis::Row && M > 0)
    for (const int64_t rows : row_split(M)) bytes = std::max(bytes, linear_workspace_size(local_, rows));
  return align_up(bytes);
}

size_t ParallelLinear::workspace_size(int64_t M) const {
  const size_t own = product_workspace(M);
  // staging of 4-byte outputs at most: the gather slots, or a row-parallel sum of a strided y
  const size_t staging = spec_.axis == ShardAxis::Column
                             ? (opts_.gather_output ? size_t(spec_.world * M * slot_) * 4 : 0)
                             : size_t(M * global_n_) * 4;
  return own + align_up(staging);
}

std::vector<int64_t> ParallelLinear::row_split(int64_t M) const {
  if (spec_.axis != ShardAxis::Row || M < 2) return {M};
  int64_t n = opts_.row_chunks;
  if (n == 0) {
    // Automatic: cut where the sum has tens of megabytes to move (two H200s: 4 chunks hid most
    // of a 64 MB sum and some of a 32 MB one, and cost more than they hid at 16 MB and below).
    // Only on a GPU: the host collectives have no second stream to overlap the sums with.
    const bool big = M * global_n_ * 2 >= kAutoChunkMinSumBytes;
    n = spec_.world > 1 && big && comm_->device() == Device::CUDA ? kAutoRowChunks : 1;
  }
  n = std::min<int64_t>(n, M);
  // equal chunks (the first ones one row longer where n does not divide M)
  std::vector<int64_t> rows;
  for (int64_t c = 0; c < n; ++c) rows.push_back(M / n + (c < M % n ? 1 : 0));
  return rows;
}

void ParallelLinear::forward(const TensorView& x, const TensorView& y, const Epilogue& ep,
                             const ExecContext& ctx) const {
  const bool column = spec_.axis == ShardAxis::Column;
  check_view(x, "x", 2, x.device);
  check_view(y, "y", 2, y.device);
  const int64_t M = x.shape[0];
  MIXQ_CHECK_ARG(x.shape[1] == in_features(), "ParallelLinear.forward: x has ", x.shape[1],
                 " columns, this ", parallel_name(spec_.axis), " rank takes ", in_features());
  MIXQ_CHECK_ARG(y.shape[0] == M && y.shape[1] == out_features(), "ParallelLinear.forward: y is ",
                 y.describe(), ", expected [", M, ", ", out_features(), "]");
  MIXQ_CHECK_ARG(ep.bias.empty() || (ep.bias.rank == 1 && ep.bias.shape[0] == global_n_),
                 "ParallelLinear.forward: bias must be the global [", global_n_, "] bias, got ",
                 ep.bias.describe());
  MIXQ_CHECK_ARG(y.dtype == DType::F32 || y.dtype == DType::F16 || y.dtype == DType::BF16,
                 "ParallelLinear.forward: y must be f32, f16 or bf16, got ", y.describe());
  const auto [n0, n1] = range();
  const int64_t width = n1 - n0;
  const size_t eb = size_t(dtype_bytes(y.dtype, 1));

  // Scratch: the shard's own product workspace, then the staging.
  const size_t own = product_workspace(M);
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
    local_ep.bias = column_slice(ep.bias, n0, width);
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
      const auto& rg = ranges_[size_t(r)];
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
  const std::vector<int64_t> split = row_split(M);
  if (split.size() == 1) {
    linear(x, local_, contiguous ? y : partial, local_ep, inner);
    comm_->all_reduce_sum(sum, M * global_n_, y.dtype, ctx.stream);
  } else {
    // Chunk c's product on the caller's stream, then its sum on the side stream (CUDA), which
    // waits for that product only: the sum of chunk c runs while chunk c + 1 multiplies. Every
    // rank cuts the same rows, so the collectives pair up in order.
    StreamFork* fork = nullptr;
    if (y.device == Device::CUDA) {
      Staging& st = *staging_;
      std::lock_guard<std::mutex> lock(st.mutex);
      if (!st.fork) st.fork = std::make_unique<StreamFork>(y.device_index, kMaxRowChunks);
      fork = st.fork.get();
    }
    const size_t xeb = size_t(dtype_bytes(x.dtype, 1));
    int64_t r0 = 0;
    for (size_t c = 0; c < split.size(); r0 += split[c], ++c) {
      const int64_t mc = split[c];
      char* part = sum + size_t(r0 * global_n_) * eb;
      linear(rows_view(static_cast<char*>(x.data) + size_t(r0 * x.ld()) * xeb, x.dtype, mc, x.shape[1],
                       x.ld(), x.device, x.device_index),
             local_, rows_view(part, y.dtype, mc, global_n_, global_n_, y.device, y.device_index),
             local_ep, inner);
      if (fork) fork->fork(int(c), ctx.stream);
      comm_->all_reduce_sum(part, mc * global_n_, y.dtype, fork ? fork->side() : ctx.stream);
    }
    if (fork) fork->join(ctx.stream);
  }
  if (!contiguous)
    copy_rows(y.data, size_t(y.ld()) * eb, sum, size_t(global_n_) * eb, size_t(global_n_) * eb, M,
              y.device, y.device_index, ctx.stream);
  if (clamp) epilogue_in_place(y, ep, ctx);
}

}  // namespace mixq
