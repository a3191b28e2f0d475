// Tensor-parallel layers (mixq/parallel.hpp) on the CPU backend: every rank a thread of this
// process, joined by an in-process Collectives (host buffers, a barrier). Column splits (sharded
// and gathered outputs, uneven, M = 1 and more) and row splits that cut groups (act-order too)
// against the unsharded layer; bias and clamp once; strided outputs; the construction errors, the
// same on every rank (no rank is left waiting).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mixq/error.hpp"
#include "mixq/nccl.hpp"
#include "mixq/numeric.hpp"
#include "mixq/parallel.hpp"
#include "mixq/quantize.hpp"
#include "mixq/shard.hpp"
#include "rank_threads.hpp"

using namespace mixq;

namespace {

// Host collectives of `world` threads: each call posts its buffer, waits for every rank, reads
// the others', and waits again before anyone reuses a buffer.
class ThreadGroup {
 public:
  explicit ThreadGroup(int64_t world) : world_(world), barrier_(world), ptrs_(size_t(world)) {}
  int64_t world() const { return world_; }
  void barrier() { barrier_.wait(); }
  std::vector<const void*>& ptrs() { return ptrs_; }

 private:
  int64_t world_;
  test::RankBarrier barrier_;
  std::vector<const void*> ptrs_;
};

float load(const void* p, DType t, int64_t i) {
  if (t == DType::F16) return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  if (t == DType::BF16) return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
void store(void* p, DType t, int64_t i, float v) {
  if (t == DType::F16) static_cast<uint16_t*>(p)[i] = f32_to_f16(v);
  else if (t == DType::BF16) static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
  else static_cast<float*>(p)[i] = v;
}

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(ThreadGroup& g, int64_t rank, int64_t reported_world = 0)
      : g_(g), rank_(rank), world_(reported_world ? reported_world : g.world()) {}
  int64_t rank() const override { return rank_; }
  int64_t world() const override { return world_; }
  Device device() const override { return Device::CPU; }
  int device_index() const override { return 0; }
  std::string name() const override { return "threads"; }
  void all_reduce_sum(void* buf, int64_t count, DType t, void*) override {
    g_.ptrs()[size_t(rank_)] = buf;
    g_.barrier();
    std::vector<float> sum(size_t(count), 0.f);
    for (int64_t r = 0; r < g_.world(); ++r)  // the same order on every rank
      for (int64_t i = 0; i < count; ++i) sum[size_t(i)] += load(g_.ptrs()[size_t(r)], t, i);
    g_.barrier();
    for (int64_t i = 0; i < count; ++i) store(buf, t, i, sum[size_t(i)]);
    g_.barrier();
  }
  void all_gather(const void* send, void* recv, int64_t count, DType t, void*) override {
    const size_t bytes = size_t(dtype_bytes(t, count));
    std::vector<uint8_t> mine(static_cast<const uint8_t*>(send), static_cast<const uint8_t*>(send) + bytes);
    g_.ptrs()[size_t(rank_)] = mine.data();
    g_.barrier();
    for (int64_t r = 0; r < g_.world(); ++r)
      std::memcpy(static_cast<char*>(recv) + bytes * size_t(r), g_.ptrs()[size_t(r)], bytes);
    g_.barrier();
  }
  void all_gather_host(const void* send, void* out, size_t bytes) override {
    g_.ptrs()[size_t(rank_)] = send;
    g_.barrier();
    for (int64_t r = 0; r < g_.world(); ++r)
      std::memcpy(static_cast<char*>(out) + bytes * size_t(r), g_.ptrs()[size_t(r)], bytes);
    g_.barrier();
  }

 private:
  ThreadGroup& g_;
  int64_t rank_, world_;
};

using test::on_ranks;
using test::randn;

QuantizedWeight make_weight(int64_t N, int64_t K, const char* scheme, bool act_order, uint32_t seed) {
  std::vector<float> w = randn(size_t(N * K), seed, 0.05f);
  QuantizedWeight q = quantize_weight(TensorView(w.data(), DType::F32, {N, K}), parse_scheme(scheme));
  if (act_order) {  // a GPTQ-style permutation: canonical column j reads X[:, perm[j]]
    std::mt19937 rng(seed + 1);
    q.k_perm.resize(size_t(K));
    for (int64_t k = 0; k < K; ++k) q.k_perm[size_t(k)] = int32_t(k);
    std::shuffle(q.k_perm.begin(), q.k_perm.end(), rng);
    q.validate();
  }
  return q;
}

PrepareOptions cpu_exact() {
  PrepareOptions o;
  o.backend = BackendKind::CPU;
  o.tuning.cpu_activations = Tuning::CpuActivations::Exact;
  return o;
}

// The unsharded layer's output (bias and clamp included), f32.
std::vector<float> global_output(const QuantizedWeight& w, const std::vector<float>& x, int64_t M,
                                 const std::vector<float>& bias, float lo, float hi) {
  const PreparedWeight pw = prepare(w, cpu_exact());
  std::vector<float> y(size_t(M * w.N));
  Epilogue ep;
  if (!bias.empty()) ep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {w.N});
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  linear(TensorView(const_cast<float*>(x.data()), DType::F32, {M, w.K}), pw,
         TensorView(y.data(), DType::F32, {M, w.N}), ep);
  return y;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-30;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " at " << i;
}

struct Case {
  const char* scheme;
  bool act_order;
  int64_t N, K, world, M;
};

}  // namespace

TEST(ParallelLinear, ColumnSplitsShardedAndGathered) {
  const Case cases[] = {{"w4g128", false, 301, 256, 3, 1}, {"w4g128", false, 300, 256, 3, 1},
                        {"w8g128", false, 300, 384, 4, 5}, {"w4g64", true, 97, 320, 2, 7}};
  for (const Case& c : cases)
    for (bool gather : {false, true}) {
      SCOPED_TRACE(std::string(c.scheme) + " N " + std::to_string(c.N) + " world " +
                   std::to_string(c.world) + " M " + std::to_string(c.M) + (gather ? " gathered" : ""));
      const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, c.act_order, 11);
      const std::vector<float> x = randn(size_t(c.M * c.K), 12), bias = randn(size_t(c.N), 13);
      const std::vector<float> want = global_output(w, x, c.M, bias, -0.5f, 0.75f);
      ThreadGroup g(c.world);
      std::vector<std::vector<float>> outs(size_t(c.world));
      on_ranks(c.world, [&](int64_t r) {
        const ShardSpec spec{r, c.world, ShardAxis::Column};
        ParallelLinearOptions o;
        o.prepare = cpu_exact();
        o.gather_output = gather;
        const ParallelLinear layer(shard(w, spec), spec, c.N, c.K,
                                   std::make_shared<ThreadCollectives>(g, r), o);
        std::vector<float> y(size_t(c.M * layer.out_features()));
        Epilogue ep;
        ep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {c.N});
        ep.clamp_lo = -0.5f;
        ep.clamp_hi = 0.75f;
        std::vector<uint8_t> ws(layer.workspace_size(c.M));
        ExecContext ctx;
        ctx.workspace = ws.data();
        ctx.workspace_bytes = ws.size();
        ctx.num_threads = 1;
        layer.forward(TensorView(const_cast<float*>(x.data()), DType::F32, {c.M, c.K}),
                      TensorView(y.data(), DType::F32, {c.M, layer.out_features()}), ep, ctx);
        outs[size_t(r)] = y;
      });
      for (int64_t r = 0; r < c.world; ++r) {
        const auto rg = shard_range(c.N, {r, c.world, ShardAxis::Column});
        std::vector<float> want_r;
        if (gather) {
          want_r = want;
        } else {
          for (int64_t m = 0; m < c.M; ++m)
            for (int64_t n = rg.first; n < rg.second; ++n) want_r.push_back(want[size_t(m * c.N + n)]);
        }
        expect_close(outs[size_t(r)], want_r, 1e-6, "rank " + std::to_string(r));
      }
    }
}

TEST(ParallelLinear, RowSplitsCutGroupsSumOnceWithBiasAndClamp) {
  // K = 1000 over 3 and 7 cuts g128 groups (k_phase); act-order shards list their blocks.
  const Case cases[] = {{"w4g128", false, 77, 1000, 3, 1}, {"w8g128", false, 64, 1000, 7, 4},
                        {"w4g128", true, 50, 1000, 3, 3}, {"w4g64", false, 33, 200, 2, 2}};
  for (const Case& c : cases)
    for (bool clamp : {false, true})
      for (bool strided : {false, true}) {
        SCOPED_TRACE(std::string(c.scheme) + (c.act_order ? " act-order" : "") + " K " +
                     std::to_string(c.K) + " world " + std::to_string(c.world) + " M " +
                     std::to_string(c.M) + (clamp ? " clamp" : "") + (strided ? " strided y" : ""));
        const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, c.act_order, 21);
        const std::vector<float> x = randn(size_t(c.M * c.K), 22), bias = randn(size_t(c.N), 23);
        const float lo = clamp ? -0.25f : -INFINITY, hi = clamp ? 0.5f : INFINITY;
        const std::vector<float> want = global_output(w, x, c.M, bias, lo, hi);
        ThreadGroup g(c.world);
        std::vector<std::vector<float>> outs(size_t(c.world));
        on_ranks(c.world, [&](int64_t r) {
          const ShardSpec spec{r, c.world, ShardAxis::Row};
          ParallelLinearOptions o;
          o.prepare = cpu_exact();
          const ParallelLinear layer(shard(w, spec), spec, c.N, c.K,
                                     std::make_shared<ThreadCollectives>(g, r), o);
          const auto [k0, k1] = layer.range();
          std::vector<float> xr;  // this rank's columns of X (original order)
          for (int64_t m = 0; m < c.M; ++m)
            for (int64_t k = k0; k < k1; ++k) xr.push_back(x[size_t(m * c.K + k)]);
          const int64_t ldy = strided ? c.N + 5 : c.N;
          std::vector<float> y(size_t(c.M * ldy), -7.f);
          Epilogue ep;
          ep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {c.N});
          ep.clamp_lo = lo;
          ep.clamp_hi = hi;
          ExecContext ctx;
          ctx.num_threads = 1;  // no workspace: the layer's own staging
          layer.forward(TensorView(xr.data(), DType::F32, {c.M, k1 - k0}),
                        TensorView::strided(y.data(), DType::F32, {c.M, c.N}, {ldy, 1}), ep, ctx);
          std::vector<float> packed;
          for (int64_t m = 0; m < c.M; ++m) {
            for (int64_t n = 0; n < c.N; ++n) packed.push_back(y[size_t(m * ldy + n)]);
            for (int64_t n = c.N; n < ldy; ++n) EXPECT_EQ(y[size_t(m * ldy + n)], -7.f) << "pad written";
          }
          outs[size_t(r)] = packed;
        });
        for (int64_t r = 0; r < c.world; ++r) {
          expect_close(outs[size_t(r)], want, 2e-5, "rank " + std::to_string(r));
          EXPECT_EQ(outs[size_t(r)], outs[0]) << "ranks disagree";
        }
      }
}

TEST(ParallelLinear, ConstructionErrorsAreTheSameOnEveryRank) {
  const QuantizedWeight w = make_weight(64, 512, "w4g128", false, 31);
  const QuantizedWeight other = make_weight(64, 512, "w8g128", false, 32);
  // Each scenario: what rank 1 does wrong; every rank must throw an error naming it.
  struct Scenario {
    const char* what;
    std::function<ParallelLinear(ThreadGroup&, int64_t)> build;
    const char* fragment;
  };
  auto good = [&](ThreadGroup& g, int64_t r, ShardAxis axis) {
    const ShardSpec spec{r, 2, axis};
    ParallelLinearOptions o;
    o.prepare = cpu_exact();
    return ParallelLinear(shard(w, spec), spec, 64, 512, std::make_shared<ThreadCollectives>(g, r), o);
  };
  const Scenario scenarios[] = {
      {"another scheme",
       [&](ThreadGroup& g, int64_t r) {
         if (r == 0) return good(g, r, ShardAxis::Row);
         const ShardSpec spec{r, 2, ShardAxis::Row};
         ParallelLinearOptions o;
         o.prepare = cpu_exact();
         return ParallelLinear(shard(other, spec), spec, 64, 512, std::make_shared<ThreadCollectives>(g, r), o);
       },
       "rank 1 holds a weight of another scheme (i8 codes"},
      {"another axis",
       [&](ThreadGroup& g, int64_t r) { return good(g, r, r == 0 ? ShardAxis::Row : ShardAxis::Column); },
       "rank 1 holds a column-parallel split where rank 0 has a row-parallel one"},
      {"a shard of the wrong rank",
       [&](ThreadGroup& g, int64_t r) {
         const ShardSpec spec{r, 2, ShardAxis::Row};
         ParallelLinearOptions o;
         o.prepare = cpu_exact();
         const QuantizedWeight s = shard(make_weight(64, 513, "w4g128", false, 33), {0, 2, ShardAxis::Row});
         if (r == 0) return good(g, r, ShardAxis::Row);
         return ParallelLinear(s, spec, 64, 512, std::make_shared<ThreadCollectives>(g, r), o);
       },
       "rank 1 has a 64 x 257 shard"},
  };
  for (const Scenario& sc : scenarios) {
    SCOPED_TRACE(sc.what);
    ThreadGroup g(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> ts;
    for (int64_t r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        try {
          sc.build(g, r);
        } catch (const Error& e) {
          errors[size_t(r)] = e.what();
          EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
        }
      });
    for (auto& t : ts) t.join();
    EXPECT_NE(errors[1].find(sc.fragment), std::string::npos) << errors[1];
    EXPECT_EQ(errors[0], errors[1]) << "every rank reports the same error";
  }
  // forward: x of the wrong width, a bias of the local width, a null communicator.
  ThreadGroup g1(1);
  const ShardSpec spec{0, 1, ShardAxis::Row};
  ParallelLinearOptions o;
  o.prepare = cpu_exact();
  const ParallelLinear layer(w, spec, 64, 512, std::make_shared<ThreadCollectives>(g1, 0), o);
  std::vector<float> x(512 * 2), y(64 * 2), b(32);
  try {
    layer.forward(TensorView(x.data(), DType::F32, {2, 256}), TensorView(y.data(), DType::F32, {2, 64}));
    ADD_FAILURE() << "x of 256 columns accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x has 256 columns, this row-parallel rank takes 512"), std::string::npos) << e.what();
  }
  try {
    Epilogue ep;
    ep.bias = TensorView(b.data(), DType::F32, {32});
    layer.forward(TensorView(x.data(), DType::F32, {2, 512}), TensorView(y.data(), DType::F32, {2, 64}), ep);
    ADD_FAILURE() << "a 32-entry bias accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bias must be the global [64] bias"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParallelLinear(w, spec, 64, 512, nullptr, o), Error);
  // A communicator whose world is not the spec's (checked by the rank itself).
  try {
    ThreadGroup g3(1);
    ParallelLinearOptions o1 = o;
    o1.check_shards = false;
    ParallelLinear(shard(w, {0, 2, ShardAxis::Row}), {0, 2, ShardAxis::Row}, 64, 512,
                   std::make_shared<ThreadCollectives>(g3, 0, 3), o1);
    ADD_FAILURE() << "a world-3 communicator for a world-2 spec accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("communicator of rank 0 of 3 for the shard spec rank 0 of 2"),
              std::string::npos) << e.what();
  }
  // Without NCCL in the build, its entry points say so.
  if (!nccl_available()) {
    try {
      nccl_local_collectives({0});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find("no NCCL"), std::string::npos) << e.what();
    }
  }
}

// The default collective buffer is plain memory where the collectives live, usable as a layer's
// output: a row-parallel sum into it equals the unsharded layer, in one piece or cut into row
// chunks (each chunk's product, then its sum); row_chunks out of range is refused.
TEST(ParallelLinear, RowChunksAndCollectiveBuffersHoldTheSum) {
  const std::shared_ptr<void> one = single_rank_collectives(Device::CPU)->alloc_collective_buffer(0);
  EXPECT_NE(one.get(), nullptr);
  const QuantizedWeight w = make_weight(40, 300, "w4g128", false, 41);
  const int64_t M = 5, world = 3;
  const std::vector<float> x = randn(size_t(M * 300), 42), bias = randn(40, 43);
  for (const bool clamp : {false, true})
    for (const int chunks : {0, 1, 2, 3, 16}) {
      SCOPED_TRACE("row_chunks " + std::to_string(chunks) + (clamp ? " clamp" : ""));
      const float lo = clamp ? -0.25f : -INFINITY, hi = clamp ? 0.5f : INFINITY;
      const std::vector<float> want = global_output(w, x, M, bias, lo, hi);
      ThreadGroup g(world);
      std::vector<std::vector<float>> outs(static_cast<size_t>(world));
      on_ranks(world, [&](int64_t r) {
        const ShardSpec spec{r, world, ShardAxis::Row};
        ParallelLinearOptions o;
        o.prepare = cpu_exact();
        o.row_chunks = chunks;
        auto comm = std::make_shared<ThreadCollectives>(g, r);
        const ParallelLinear layer(shard(w, spec), spec, 40, 300, comm, o);
        const std::shared_ptr<void> y = comm->alloc_collective_buffer(size_t(M * 40) * 4);
        const auto [k0, k1] = layer.range();
        std::vector<float> xr;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = k0; k < k1; ++k) xr.push_back(x[size_t(m * 300 + k)]);
        Epilogue ep;
        ep.bias = TensorView(const_cast<float*>(bias.data()), DType::F32, {40});
        ep.clamp_lo = lo;
        ep.clamp_hi = hi;
        ExecContext ctx;
        ctx.num_threads = 1;
        layer.forward(TensorView(xr.data(), DType::F32, {M, k1 - k0}), TensorView(y.get(), DType::F32, {M, 40}),
                      ep, ctx);
        const float* p = static_cast<const float*>(y.get());
        outs[size_t(r)].assign(p, p + M * 40);
      });
      for (int64_t r = 0; r < world; ++r) expect_close(outs[size_t(r)], want, 2e-5, "rank " + std::to_string(r));
    }
  ParallelLinearOptions bad;
  bad.row_chunks = 17;
  const ShardSpec one_rank{0, 1, ShardAxis::Row};
  try {
    ParallelLinear(shard(w, one_rank), one_rank, 40, 300, single_rank_collectives(), bad);
    ADD_FAILURE() << "row_chunks = 17 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_chunks is 17, must be 0 (automatic) .. 16"), std::string::npos)
        << e.what();
  }
}

// The row split: chunks of equal rows (the first ones one row longer) adding up to M, at most M
// of them; one piece for a column-parallel layer, for one rank, and automatically for host
// collectives (the automatic cut on CUDA, 4 chunks from a 32 MB sum, is checked on two GPUs in
// tests/gpu/test_cuda_tensor_parallel.cpp).
TEST(ParallelLinear, RowSplitCutsIntoEqualChunks) {
  const QuantizedWeight w = make_weight(4096, 256, "w4g128", false, 51);
  ThreadGroup g(2);
  on_ranks(2, [&](int64_t r) {
    const ShardSpec row{r, 2, ShardAxis::Row}, col{r, 2, ShardAxis::Column};
    auto comm = std::make_shared<ThreadCollectives>(g, r);
    ParallelLinearOptions o;
    o.prepare = cpu_exact();
    const ParallelLinear auto_row(shard(w, row), row, 4096, 256, comm, o);
    const ParallelLinear auto_col(shard(w, col), col, 4096, 256, comm, o);
    o.row_chunks = 4;
    const ParallelLinear four(shard(w, row), row, 4096, 256, comm, o);
    if (r != 0) return;
    // automatic: only where a second stream can overlap the sums (CUDA collectives); these are
    // host ones, so one piece however large
    EXPECT_EQ(auto_row.row_split(65536), std::vector<int64_t>{65536});
    EXPECT_EQ(auto_col.row_split(65536), std::vector<int64_t>{65536});
    EXPECT_EQ(four.row_split(4097), (std::vector<int64_t>{1025, 1024, 1024, 1024}));
    EXPECT_EQ(four.row_split(6), (std::vector<int64_t>{2, 2, 1, 1}));
    EXPECT_EQ(four.row_split(3), (std::vector<int64_t>{1, 1, 1}));
    EXPECT_EQ(four.row_split(1), std::vector<int64_t>{1});
  });
  // one rank: nothing to overlap, one piece however large
  const ShardSpec one{0, 1, ShardAxis::Row};
  ParallelLinearOptions o;
  o.prepare = cpu_exact();
  EXPECT_EQ(ParallelLinear(shard(w, one), one, 4096, 256, single_rank_collectives(), o).row_split(65536),
            std::vector<int64_t>{65536});
}
