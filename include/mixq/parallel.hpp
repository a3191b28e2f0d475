// Tensor-parallel linear layers: one rank's shard of a global weight, its product, and the
// collective that completes it, stream-ordered and CUDA-graph capturable
// (docs/decisions/tensor-parallel-linear.md).
//
//   auto comm = mixq::nccl_collectives(my_nccl_comm);        // mixq/nccl.hpp, the caller's comm
//   mixq::ShardSpec spec{rank, world, mixq::ShardAxis::Row};
//   mixq::ParallelLinear down(mixq::shard(global, spec), spec, global.N, global.K, comm, opts);
//   down.forward(x_local, y_full, ep, ctx);   // partial product, all-reduce, then bias and clamp
//
// Construction is a collective (with check_shards): every rank's constructor must run at once.
// NCCL connects peers on a communicator's first collective, which CUDA graph capture does not
// allow: run one forward outside capture before capturing. In one process driving several GPUs,
// give forward() a workspace (its staging is otherwise allocated on first use) and allocate and
// free nothing on one rank while another may be in a collective: NCCL's kernels wait for every
// rank, and cudaFree waits for the peers' kernels.
//
// Column-parallel (spec.axis = Column): x is the full [M][K] input, y this rank's [M][N_local]
// columns, or with gather_output the full [M][N] (all-gathered; uneven splits are fine).
// Row-parallel (Row): x is this rank's [M][K_local] input columns (the output of a column-parallel
// layer before it), y the full [M][N] sum, the same on every rank. The epilogue's bias is the
// global [N] bias; it and the clamp are applied once: on the rank's own columns (column), or after
// the sum (row; with no clamp, rank 0 adds the bias inside its product and nothing runs after).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixq/ops.hpp"
#include "mixq/quantized_weight.hpp"
#include "mixq/shard.hpp"

namespace mixq {

// The collectives a parallel layer needs, for one rank, ordered on the call's stream. mixq ships
// NCCL's (mixq/nccl.hpp); any framework's can be wrapped the same way.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t world() const = 0;
  // Where the buffers live: Device::CUDA with the communicator's device ordinal, or the host.
  virtual Device device() const = 0;
  virtual int device_index() const = 0;
  // Sums `count` elements of `dtype` (F32, F16, BF16) over the ranks, in place.
  virtual void all_reduce_sum(void* buf, int64_t count, DType dtype, void* stream) = 0;
  // Every rank's `count` elements of `send` into recv[r * count ...]; send may be recv's own slot
  // (in place).
  virtual void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                          void* stream) = 0;
  // Set-up only (synchronous): every rank's `bytes` host bytes into out[r * bytes ...].
  virtual void all_gather_host(const void* send, void* out, size_t bytes) = 0;
  virtual std::string name() const = 0;  // "nccl", ...
  // `bytes` of memory on this rank's device that the collectives reach fastest: give it to the
  // buffers a forward() sums or gathers in (a row-parallel layer's y, a gathered column output,
  // a workspace). A collective: every rank asks for the same sizes in the same order, and drops
  // its handle only after its last collective on the memory has finished, at the same point of
  // its sequence as the other ranks. The default is plain device (or host) memory; NCCL's is
  // ncclMemAlloc'd and registered as a symmetric window, which its all-reduce and all-gather
  // serve with their low-latency symmetric kernels.
  virtual std::shared_ptr<void> alloc_collective_buffer(size_t bytes);
};

// One rank alone (world 1) on `device`: the sums are the values themselves and a gather is a
// copy. The TP = 1 case of code written for any world, and a baseline.
std::shared_ptr<Collectives> single_rank_collectives(Device device = Device::CPU, int device_index = 0);

struct ParallelLinearOptions {
  PrepareOptions prepare;      // backend, act, device, tuning of the shard's prepared weight
  bool gather_output = false;  // column-parallel: all-gather the full [M][N] output
  // At construction (a collective): every rank checks that all ranks hold the same split and
  // scheme of the same global weight, and names the first rank that differs.
  bool check_shards = true;
  // Row-parallel: the product and its all-reduce cut into this many row chunks of equal rows
  // (at most 16, and at most M), each chunk's sum queued on a second stream of the device so
  // that it runs while the next chunk's product does, and the caller's stream joined after the
  // last. A big-M sum is bandwidth-bound and in one piece adds its whole time to the layer.
  // 0: automatic (on CUDA, 4 chunks where there are other ranks and the sum holds >= 32 MB of
  // 16-bit values, else one piece; measured: docs/decisions/tensor-parallel-linear.md); 1: one
  // product, then one sum. The side stream and its events are the layer's own: a chunked layer
  // serves one forward at a time (as the collectives do: their order must match on every rank).
  int row_chunks = 0;
};

class ParallelLinear {
 public:
  // `local` is this rank's shard (mixq::shard or formats::load_shard with `spec`) of a global
  // global_n x global_k weight; `comm` must be rank spec.rank of spec.world ranks, on the device
  // the shard is prepared for.
  ParallelLinear(const QuantizedWeight& local, const ShardSpec& spec, int64_t global_n,
                 int64_t global_k, std::shared_ptr<Collectives> comm,
                 const ParallelLinearOptions& opts = {});

  ShardAxis axis() const { return spec_.axis; }
  const ShardSpec& spec() const { return spec_; }
  int64_t global_n() const { return global_n_; }
  int64_t global_k() const { return global_k_; }
  // This rank's range of the split dimension (N for column, K for row).
  std::pair<int64_t, int64_t> range() const { return ranges_[size_t(spec_.rank)]; }
  // The input width forward() takes (K, or K_local) and the output width it writes.
  int64_t in_features() const;
  int64_t out_features() const;
  const PreparedWeight& local() const { return local_; }
  Collectives& collectives() const { return *comm_; }

  // Row-parallel: the rows of each chunk a forward of M rows cuts (ParallelLinearOptions::
  // row_chunks), in order; {M} when it is not cut (and for column-parallel).
  std::vector<int64_t> row_split(int64_t M) const;
  // Bytes of ExecContext::workspace a forward of M rows needs (the shard's product plus the
  // staging of a gathered or strided output).
  size_t workspace_size(int64_t M) const;
  // y = (the layer's product of x) + bias, clamped; see the top of this file for shapes. With a
  // null workspace the prepared weight's scratch is used and staging is allocated per call
  // (outside graph capture only).
  void forward(const TensorView& x, const TensorView& y, const Epilogue& ep = {},
               const ExecContext& ctx = {}) const;

 private:
  ShardSpec spec_;
  int64_t global_n_ = 0, global_k_ = 0;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // every rank's range of the split dimension
  int64_t slot_ = 0;  // the widest rank's columns (column-parallel gather slots)
  std::shared_ptr<Collectives> comm_;
  ParallelLinearOptions opts_;
  PreparedWeight local_;
  struct Staging;  // the calls without a workspace: staging kept between calls
  std::shared_ptr<Staging> staging_;
  size_t product_workspace(int64_t M) const;
};

}  // namespace mixq
