// mixq bench --tp N,...: a tensor-parallel decoder layer's linear part (qkv and gate+up
// column-parallel, o and down row-parallel with their all-reduces) on N GPUs of this host over
// NCCL (mixq::ParallelLinear), each rank's layer captured in a CUDA graph and replayed. The ranks
// are one process per GPU (--launch procs, the default: this command starts itself once per rank
// with hidden options, ncclCommInitRank) or one thread per GPU of this process (--launch threads,
// ncclCommInitAll). Per (model, scheme, M, TP): the layer time (slowest rank), the same graph
// without its collectives, the collectives alone, their share of the layer, and the speed-up and
// scaling efficiency over TP = 1 in the same run.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "rank_processes.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/parallel.hpp"
#include "mixq/quantize.hpp"
#include "mixq/shard.hpp"

#if defined(MIXQ_WITH_CUDA)
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "mixq/nccl.hpp"

#endif

namespace mixq::cli {

namespace {

const char kHelp[] =
    "usage: mixq bench --tp N,... [options]\n\n"
    "Times the linear part of a tensor-parallel decoder layer on N GPUs of this host (NCCL, one\n"
    "CUDA graph per rank; one process per GPU, or one thread per GPU with --launch threads): qkv\n"
    "and gate+up column-parallel (outputs stay sharded), o and down row-parallel (partial sums\n"
    "all-reduced, bias after the sum). Each rank holds the shapes and split points mixq::shard\n"
    "gives (a K split may cut a group: the shard keeps its phase) with random codes and scales.\n"
    "Reported per (model, scheme, M, TP): the layer time (slowest rank, graph replays back to\n"
    "back), the same graph without collectives, the two all-reduces alone, the collectives' share\n"
    "of the layer, and the speed-up and efficiency over TP = 1 measured in the same run.\n\n"
    "options:\n"
    "  --tp N,...           tensor-parallel sizes (default 1,2,4, those this host has GPUs for)\n"
    "  --models M,...       llama3-70b (hidden 8192, qkv 10240, intermediate 28672),\n"
    "                       qwen2.5-72b (8192, 10240, 29568), llama3-8b (4096, 6144, 14336);\n"
    "                       default llama3-70b,qwen2.5-72b\n"
    "  --m M,...            tokens (default 1,16,256,4096)\n"
    "  --schemes S,...      w4g128 (default), w8g128, fp8b128, 'fp8b128:fp8' (FP8 activations)\n"
    "  --act f16|bf16       activation dtype (default bf16)\n"
    "  --reps N             graph replays per timing, at most (default 50)\n"
    "  --buffers registered|plain\n"
    "                       the row-parallel outputs (the all-reduced buffers): registered\n"
    "                       (default) takes them from Collectives::alloc_collective_buffer (NCCL:\n"
    "                       a symmetric window, summed by its symmetric kernels), plain from\n"
    "                       cudaMalloc (NCCL's channel-buffer kernels)\n"
    "  --row-chunks N       ParallelLinearOptions::row_chunks of o and down: 0 automatic\n"
    "                       (default), 1 one product then one sum, N row chunks whose sums\n"
    "                       overlap the next chunk's product\n"
    "  --launch procs|threads\n"
    "                       how TP > 1 runs: procs (default) starts this command once per GPU,\n"
    "                       the ranks joined by ncclCommInitRank, and keeps every NCCL_* variable\n"
    "                       of the environment; threads drives every GPU from this process (one\n"
    "                       thread each, ncclCommInitAll). TP = 1 always runs in this process\n"
    "  --tp-timeout S       procs: seconds the rank processes of one TP size may take, after\n"
    "                       which they are killed and the run fails (default 600)\n"
    "  --json FILE          also write the rows as JSON (with this command line)\n";

struct LayerModel {
  const char* name;
  int64_t hidden, qkv, inter, attn;  // attn: the o projection's K (heads x head dim)
};
const LayerModel kModels[] = {
    {"llama3-70b", 8192, 10240, 28672, 8192},
    {"qwen2.5-72b", 8192, 10240, 29568, 8192},
    {"llama3-8b", 4096, 6144, 14336, 4096},
};

// How each rank builds its layers: the row outputs from the collectives' own buffers
// (--buffers), and the row layers' row_chunks (--row-chunks).
struct LayerSetup {
  bool registered = true;
  int row_chunks = 0;
};

struct Row {
  std::string model, scheme;
  int64_t M = 0, tp = 0;
  double layer_us = 0, gemm_us = 0, coll_us = 0;
  double speedup = 0, efficiency = 0;
};

#if defined(MIXQ_WITH_CUDA)

#define TP_CUDA(expr)                                                                        \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    MIXQ_CHECK(e_ == cudaSuccess, ErrorCode::Cuda, #expr ": ", cudaGetErrorString(e_));     \
  } while (0)

// A shard-shaped weight of `scheme` with random codes and scales: rows [N], columns [K] that
// start k_phase columns into their first block (what mixq::shard gives a rank whose split cut a
// group), so that timing needs no global weight.
QuantizedWeight random_shard(int64_t N, int64_t K, int64_t k_phase, int64_t n_phase,
                             const QuantScheme& sc, uint32_t seed) {
  QuantizedWeight w;
  w.N = N;
  w.K = K;
  w.code_type = sc.code_type;
  w.block_k = sc.block_k ? sc.block_k : K;
  w.block_n = sc.block_n;
  w.zero_kind = sc.zero_kind;
  w.scale_type = sc.scale_type;
  if (w.block_k < K + k_phase) w.k_phase = k_phase % w.block_k;
  if (w.block_k > K + w.k_phase) w.block_k = K, w.k_phase = 0;
  if (w.block_n > 1) w.n_phase = n_phase % w.block_n;
  w.allocate();
  std::mt19937 rng(seed);
  for (size_t i = 0; i < w.codes.size(); i += 4) {
    const uint32_t r = rng();
    for (size_t j = 0; j < 4 && i + j < w.codes.size(); ++j) w.codes[i + j] = uint8_t(r >> (8 * j));
  }
  if (w.code_type == DType::F8E4M3)
    for (auto& b : w.codes)
      if ((b & 0x7F) == 0x7F) b = 0x7E;
  std::uniform_real_distribution<float> us(0.002f, 0.01f);
  const int64_t ns = w.n_scale_entries();
  const int64_t eb = dtype_bytes(w.scale_type, 1);
  for (int64_t i = 0; i < ns; ++i) {
    const float s = us(rng);
    if (w.scale_type == DType::F32) std::memcpy(&w.scales[size_t(i * 4)], &s, 4);
    else {
      const uint16_t h = w.scale_type == DType::F16 ? f32_to_f16(s) : f32_to_bf16(s);
      std::memcpy(&w.scales[size_t(i * eb)], &h, 2);
    }
    if (w.zero_kind == ZeroKind::ZeroPoint) {
      const int32_t z = (code_min(w.code_type) + code_max(w.code_type)) / 2;
      std::memcpy(&w.zeros[size_t(i * 4)], &z, 4);
    } else if (w.zero_kind == ZeroKind::Offset) {
      const float o = -s * 4;
      if (w.scale_type == DType::F32) std::memcpy(&w.zeros[size_t(i * 4)], &o, 4);
      else {
        const uint16_t h = w.scale_type == DType::F16 ? f32_to_f16(o) : f32_to_bf16(o);
        std::memcpy(&w.zeros[size_t(i * eb)], &h, 2);
      }
    }
  }
  w.origin = "bench tp";
  w.validate();
  return w;
}

// Where the ranks of one layer meet (around allocations, before each timing). share() returns
// once every rank has called it, with the value rank 0 passed: one decision of rank 0 (how many
// replays to time) that every rank must follow, since the collectives pair up.
class RankBarrier {
 public:
  virtual ~RankBarrier() = default;
  virtual int share(int rank, int value) = 0;
  void wait(int rank) { share(rank, 0); }
};

// The rank threads of one process (--launch threads). A rank that fails aborts it, so the
// others stop waiting (and throw) instead of hanging.
class ThreadBarrier final : public RankBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  int share(int rank, int value) override {
    std::unique_lock<std::mutex> l(m_);
    if (rank == 0) next_ = value;
    const uint64_t g = gen_;
    if (++count_ == n_) {
      // published only when the last rank arrives: rank 0 may already be writing the next
      // round's value while a slow rank still reads this one
      count_ = 0;
      ++gen_;
      shared_ = next_;
      cv_.notify_all();
    } else {
      cv_.wait(l, [&] { return gen_ != g || aborted_; });
    }
    MIXQ_CHECK(!aborted_, ErrorCode::Internal, "bench --tp: another rank failed");
    return shared_;
  }
  void abort() {
    std::lock_guard<std::mutex> l(m_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  int n_, count_ = 0, next_ = 0, shared_ = 0;
  uint64_t gen_ = 0;
  bool aborted_ = false;
  std::mutex m_;
  std::condition_variable cv_;
};

// One rank per process (--launch procs): the ranks meet in a set-up all-gather of one int on
// their communicator, which every rank calls the same number of times. A rank that dies leaves
// the others waiting here; the parent process kills them.
class CollectiveBarrier final : public RankBarrier {
 public:
  explicit CollectiveBarrier(Collectives& comm) : comm_(comm), all_(size_t(comm.world())) {}
  int share(int, int value) override {
    comm_.all_gather_host(&value, all_.data(), sizeof value);
    return all_[0];
  }

 private:
  Collectives& comm_;
  std::vector<int> all_;
};

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) { TP_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 256))); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// One rank's timings (microseconds per replay) of the three graphs.
struct RankTimes {
  double layer = 0, gemm = 0, coll = 0;
};

void take_slowest(RankTimes& worst, const RankTimes& t) {
  worst.layer = std::max(worst.layer, t.layer);
  worst.gemm = std::max(worst.gemm, t.gemm);
  worst.coll = std::max(worst.coll, t.coll);
}

// A --schemes entry: the weight scheme and the activation quantization after its ':'.
struct SchemeCase {
  std::string name;
  QuantScheme scheme;
  ActQuant act = ActQuant::None;
};

// Rank r of tp (on device r) of one (model, scheme) layer at every M: the shards prepared once,
// then per M an eager pass, three captured graphs and their timings. The same body serves a rank
// thread (--launch threads) and a rank process (--launch procs); `comm` is this rank's
// communicator and `barrier` meets the other ranks. Returns this rank's times per M.
std::vector<RankTimes> rank_main(const LayerModel& lm, const SchemeCase& sc, DType xt,
                                 const std::vector<int64_t>& ms, int r, int tp, int reps, const LayerSetup& setup,
                                 const std::shared_ptr<Collectives>& comm, RankBarrier& barrier) {
  std::vector<RankTimes> times(ms.size());
  TP_CUDA(cudaSetDevice(r));
  cudaStream_t s;
  TP_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Lin {
    const char* name;
    ShardAxis axis;
    int64_t N, K;
  };
  const Lin lins[4] = {{"qkv", ShardAxis::Column, lm.qkv, lm.hidden},
                       {"o", ShardAxis::Row, lm.hidden, lm.attn},
                       {"gate_up", ShardAxis::Column, 2 * lm.inter, lm.hidden},
                       {"down", ShardAxis::Row, lm.hidden, lm.inter}};
  std::vector<std::unique_ptr<ParallelLinear>> layers;
  for (int i = 0; i < 4; ++i) {
    const Lin& l = lins[i];
    const ShardSpec spec{r, tp, l.axis};
    // gate+up: this rank's gate rows and up rows held as one weight, the width of its split of
    // the fused 2I rows
    const int64_t gn = i == 2 ? 2 * lm.inter : l.N;
    QuantizedWeight w;
    if (l.axis == ShardAxis::Column) {
      const auto [n0, n1] = shard_range(gn, spec);
      w = random_shard(n1 - n0, l.K, 0, n0, sc.scheme, uint32_t(100 + 10 * r + i));
    } else {
      const auto [k0, k1] = shard_range(l.K, spec);
      w = random_shard(l.N, k1 - k0, k0, 0, sc.scheme, uint32_t(100 + 10 * r + i));
    }
    ParallelLinearOptions o;
    o.prepare.backend = BackendKind::CUDA;
    o.prepare.device = r;
    o.prepare.act = sc.act;
    o.check_shards = false;  // random shards, not one global weight's
    o.row_chunks = setup.row_chunks;
    layers.push_back(std::make_unique<ParallelLinear>(w, spec, gn, l.K, comm, o));
  }
  for (size_t mi = 0; mi < ms.size(); ++mi) {
    const int64_t M = ms[mi];
    size_t ws_bytes = 0;
    for (const auto& l : layers) ws_bytes = std::max(ws_bytes, l->workspace_size(M));
    const size_t eb = size_t(dtype_bytes(xt, 1));
    Buf ws(ws_bytes);
    std::vector<std::unique_ptr<Buf>> ins;
    std::vector<std::shared_ptr<void>> outs;  // every rank allocates alike (collective buffers)
    for (const auto& l : layers) {
      ins.push_back(std::make_unique<Buf>(size_t(M * l->in_features()) * eb));
      const size_t out_bytes = size_t(M * l->out_features()) * eb;
      if (setup.registered && l->axis() == ShardAxis::Row) {
        outs.push_back(comm->alloc_collective_buffer(out_bytes));
      } else {
        auto b = std::make_shared<Buf>(out_bytes);
        outs.push_back(std::shared_ptr<void>(b, b->p));
      }
      TP_CUDA(cudaMemsetAsync(ins.back()->p, 0, size_t(M * l->in_features()) * eb, s));
    }
    Buf bias(size_t(lm.hidden) * eb);
    TP_CUDA(cudaMemsetAsync(bias.p, 0, size_t(lm.hidden) * eb, s));
    ExecContext ctx;
    ctx.stream = s;
    ctx.workspace = ws.p;
    ctx.workspace_bytes = ws_bytes;
    auto x_of = [&](int i) { return TensorView(ins[size_t(i)]->p, xt, {M, layers[size_t(i)]->in_features()}, Device::CUDA, r); };
    auto y_of = [&](int i) { return TensorView(outs[size_t(i)].get(), xt, {M, layers[size_t(i)]->out_features()}, Device::CUDA, r); };
    // 0: the layer; 1: its products alone (each shard's own linear); 2: the two all-reduces alone
    auto record = [&](int what) {
      for (int i = 0; i < 4; ++i) {
        const ParallelLinear& l = *layers[size_t(i)];
        Epilogue ep;
        if (l.axis() == ShardAxis::Row) ep.bias = TensorView(bias.p, xt, {lm.hidden}, Device::CUDA, r);
        if (what == 0) {
          l.forward(x_of(i), y_of(i), ep, ctx);
        } else if (what == 1) {
          ExecContext c = ctx;
          c.workspace_bytes = linear_workspace_size(l.local(), M);
          linear(x_of(i), l.local(), y_of(i), Epilogue{}, c);
        } else if (l.axis() == ShardAxis::Row) {
          l.collectives().all_reduce_sum(outs[size_t(i)].get(), M * lm.hidden, xt, s);
        }
      }
    };
    // Every kernel of this M launched once on every rank before any collective (a first launch
    // loads its module, which must not wait behind a peer's collective), then one eager layer:
    // NCCL connects its peers on the first collective, which capture does not allow.
    record(1);
    TP_CUDA(cudaStreamSynchronize(s));
    barrier.wait(r);
    record(0);
    TP_CUDA(cudaStreamSynchronize(s));
    barrier.wait(r);
    cudaGraphExec_t graphs[3];
    for (int what = 0; what < 3; ++what) {
      cudaGraph_t g;
      TP_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      record(what);
      TP_CUDA(cudaStreamEndCapture(s, &g));
      TP_CUDA(cudaGraphInstantiate(&graphs[what], g, 0));
      TP_CUDA(cudaGraphDestroy(g));
    }
    cudaEvent_t e0, e1;
    TP_CUDA(cudaEventCreate(&e0));
    TP_CUDA(cudaEventCreate(&e1));
    double* slots[3] = {&times[mi].layer, &times[mi].gemm, &times[mi].coll};
    for (int what = 0; what < 3; ++what) {
      // warm-up and a first estimate, then as many replays as fit in ~150 ms (at most reps)
      barrier.wait(r);
      TP_CUDA(cudaEventRecord(e0, s));
      for (int i = 0; i < 2; ++i) TP_CUDA(cudaGraphLaunch(graphs[what], s));
      TP_CUDA(cudaEventRecord(e1, s));
      TP_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      TP_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      // every rank must replay the same count (the collectives pair up): rank 0's estimate; the
      // exchange is also the barrier that starts the timing on every rank together
      const int estimate = int(std::min<double>(reps, std::max(3.0, 150.0 / std::max(ms / 2, 1e-3f))));
      const int n = barrier.share(r, estimate);
      TP_CUDA(cudaEventRecord(e0, s));
      for (int i = 0; i < n; ++i) TP_CUDA(cudaGraphLaunch(graphs[what], s));
      TP_CUDA(cudaEventRecord(e1, s));
      TP_CUDA(cudaEventSynchronize(e1));
      TP_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      *slots[what] = 1e3 * double(ms) / n;
    }
    for (auto& g : graphs) cudaGraphExecDestroy(g);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    TP_CUDA(cudaStreamSynchronize(s));
    barrier.wait(r);  // every rank's collectives done before any rank frees this M's buffers
  }
  cudaStreamDestroy(s);
  return times;
}

// --launch threads: one (model, scheme, TP) layer on the ranks of `comms`, one thread each;
// returns the slowest rank's times per M.
std::vector<RankTimes> run_layer_threads(const LayerModel& lm, const SchemeCase& sc, DType xt,
                                         const std::vector<int64_t>& ms, int tp, int reps, const LayerSetup& setup,
                                         const std::vector<std::shared_ptr<Collectives>>& comms) {
  std::vector<std::vector<RankTimes>> times(static_cast<size_t>(tp));
  std::vector<std::exception_ptr> errs(static_cast<size_t>(tp));
  ThreadBarrier barrier(tp);
  std::mutex first_mutex;
  int first = -1;  // the rank that failed first: the others only report that it did
  std::vector<std::thread> ts;
  for (int r = 0; r < tp; ++r)
    ts.emplace_back([&, r] {
      try {
        times[size_t(r)] = rank_main(lm, sc, xt, ms, r, tp, reps, setup, comms[size_t(r)], barrier);
      } catch (...) {
        errs[size_t(r)] = std::current_exception();
        {
          std::lock_guard<std::mutex> l(first_mutex);
          if (first < 0) first = r;
        }
        barrier.abort();
      }
    });
  for (auto& t : ts) t.join();
  if (first >= 0) std::rethrow_exception(errs[size_t(first)]);
  std::vector<RankTimes> worst(ms.size());
  for (const std::vector<RankTimes>& rank_times : times)
    for (size_t mi = 0; mi < ms.size(); ++mi) take_slowest(worst[mi], rank_times[mi]);
  return worst;
}

// A rank process's result file: one line per (model, scheme, M), in the order of the runs,
// "MODEL SCHEME M LAYER_US GEMM_US ALLREDUCE_US".
std::string result_line(const LayerModel& lm, const SchemeCase& sc, int64_t M, const RankTimes& t) {
  char nums[128];
  std::snprintf(nums, sizeof nums, " %lld %.6f %.6f %.6f\n", (long long)M, t.layer, t.gemm, t.coll);
  return std::string(lm.name) + " " + sc.name + nums;
}

// Reads rank `rank`'s result file: exactly the rows of `models` x `schemes` x `ms`, in order.
std::vector<RankTimes> read_result(const std::string& path, int rank,
                                   const std::vector<const LayerModel*>& models,
                                   const std::vector<SchemeCase>& schemes, const std::vector<int64_t>& ms) {
  std::ifstream in(path);
  MIXQ_CHECK(in.good(), ErrorCode::Io, "bench --tp: rank ", rank, " exited with status 0 but left no "
             "result file ", path);
  std::vector<RankTimes> out;
  std::string line;
  for (const LayerModel* lm : models)
    for (const SchemeCase& sc : schemes)
      for (const int64_t M : ms) {
        MIXQ_CHECK(static_cast<bool>(std::getline(in, line)), ErrorCode::Format, "bench --tp: rank ", rank,
                   "'s result file ", path, " ends after ", out.size(), " rows");
        std::istringstream ls(line);
        std::string model, scheme, rest;
        long long m = 0;
        RankTimes t;
        const bool ok = static_cast<bool>(ls >> model >> scheme >> m >> t.layer >> t.gemm >> t.coll) &&
                        !(ls >> rest) && model == lm->name && scheme == sc.name && m == M;
        MIXQ_CHECK(ok, ErrorCode::Format, "bench --tp: rank ", rank, "'s result file ", path, " row ",
                   out.size() + 1, " is '", line, "', expected ", lm->name, " ", sc.name, " ", M,
                   " and three times");
        out.push_back(t);
      }
  return out;
}

// One rank process of --launch procs (the hidden options --tp-rank, --tp-world, --tp-id,
// --tp-result): rank `rank` of `world` on device `rank`, every (model, scheme) layer in turn,
// the times written to the result file at the end. Prints nothing to stdout.
void run_rank_process(int rank, int world, const std::string& id_hex, const std::string& result,
                      const std::vector<const LayerModel*>& models, const std::vector<SchemeCase>& schemes,
                      const std::vector<int64_t>& ms, DType xt, int reps, const LayerSetup& setup) {
  // Gone with the parent (a parent killed from outside cannot kill its ranks itself, and they
  // would wait for each other in NCCL forever)
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  try {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    MIXQ_CHECK(world <= gpus, ErrorCode::Unsupported, "TP ", world, " needs ", world,
               " GPUs, this process sees ", gpus);
    const std::shared_ptr<Collectives> comm = nccl_rank_collectives(id_hex, rank, world, rank);
    CollectiveBarrier barrier(*comm);
    std::string text;
    for (const LayerModel* lm : models)
      for (const SchemeCase& sc : schemes) {
        const std::vector<RankTimes> per_m = rank_main(*lm, sc, xt, ms, rank, world, reps, setup, comm, barrier);
        for (size_t mi = 0; mi < ms.size(); ++mi) text += result_line(*lm, sc, ms[mi], per_m[mi]);
      }
    formats::OutputFile f(result);
    f.write(text.data(), text.size());
    f.commit();
  } catch (const Error& e) {
    MIXQ_FAIL(e.code(), "bench --tp: rank ", rank, " of ", world, ": ", error_message_body(e));
  }
}

#endif  // MIXQ_WITH_CUDA

[[maybe_unused]] std::string device_line() {
#if defined(MIXQ_WITH_CUDA)
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) return p.name;
#endif
  return "none";
}

}  // namespace

int run_bench_tp(int argc, char** argv) {
#if defined(MIXQ_WITH_CUDA)
  // Every kernel's module loaded when the context starts (before any CUDA call of this process):
  // a lazily loaded module on one rank's first launch could wait for a peer's collective. Set
  // before the rank processes start, so that they inherit it (they set it again themselves).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
#endif
  Args a("bench", argc, argv,
         {{"--tp", "", true}, {"--models", "", true}, {"--m", "", true}, {"--schemes", "", true},
          {"--act", "", true}, {"--reps", "", true}, {"--json", "", true}, {"--no-progress", "", false},
          {"--launch", "", true}, {"--tp-timeout", "", true}, {"--buffers", "", true}, {"--row-chunks", "", true},
          // hidden: one rank process of --launch procs, started by this command itself
          {"--tp-rank", "", true}, {"--tp-world", "", true}, {"--tp-id", "", true}, {"--tp-result", "", true}});
  if (a.help()) return print_help(kHelp);
  const char* const hidden[] = {"--tp-rank", "--tp-world", "--tp-id", "--tp-result"};
  int n_hidden = 0;
  for (const char* h : hidden) n_hidden += a.has(h) ? 1 : 0;
  if (n_hidden != 0 && n_hidden != 4)
    usage_fail("bench", "--tp-rank, --tp-world, --tp-id and --tp-result go together (they start one "
                        "rank process of --launch procs)");
  const bool rank_process = n_hidden == 4;
  const std::string launch = a.get("--launch", "procs");
  if (launch != "procs" && launch != "threads")
    usage_fail("bench", "--launch must be procs or threads, got '" + launch + "'");
  const int64_t timeout_s = a.get_int("--tp-timeout", 600, 1, 7 * 24 * 3600);
  const std::string buffers = a.get("--buffers", "registered");
  if (buffers != "registered" && buffers != "plain")
    usage_fail("bench", "--buffers must be registered or plain, got '" + buffers + "'");
  LayerSetup setup;
  setup.registered = buffers == "registered";
  setup.row_chunks = int(a.get_int("--row-chunks", 0, 0, 16));
  // the parent checked --json; a rank process writes none
  if (a.has("--json") && !rank_process) check_outputs("bench", {{"--json", a.get("--json")}}, {});
#if !defined(MIXQ_WITH_CUDA)
  (void)timeout_s;
  (void)setup;
  MIXQ_FAIL(ErrorCode::Unsupported, "bench --tp: this build of mixq has no CUDA support");
#else
  std::vector<const LayerModel*> models;
  for (const std::string& name : split(a.get("--models", "llama3-70b,qwen2.5-72b"), ',')) {
    const LayerModel* found = nullptr;
    for (const LayerModel& m : kModels)
      if (name == m.name) found = &m;
    if (!found) usage_fail("bench", "--models: unknown model '" + name + "' (llama3-70b, qwen2.5-72b, llama3-8b)");
    models.push_back(found);
  }
  const std::vector<int64_t> ms = parse_int_list("bench", "--m", a.get("--m", "1,16,256,4096"), 1, 65536);
  const std::string act_name = a.get("--act", "bf16");
  if (act_name != "f16" && act_name != "bf16") usage_fail("bench", "--act must be f16 or bf16, got '" + act_name + "'");
  const DType xt = act_name == "f16" ? DType::F16 : DType::BF16;
  const int reps = int(a.get_int("--reps", 50, 1, 100000));
  std::vector<SchemeCase> schemes;
  for (const std::string& sname : split(a.get("--schemes", "w4g128"), ',')) {
    const size_t colon = sname.find(':');
    SchemeCase sc{sname, parse_scheme(sname.substr(0, colon)), ActQuant::None};
    if (colon != std::string::npos) {
      const std::string an = sname.substr(colon + 1);
      if (an == "fp8") sc.act = ActQuant::Fp8Block;
      else if (an == "int8") sc.act = ActQuant::Int8Block;
      else usage_fail("bench", "--schemes: unknown activation quantization '" + an + "' in '" + sname + "'");
    }
    schemes.push_back(sc);
  }

  if (rank_process) {
    const int world = int(a.get_int("--tp-world", 0, 2, 64));
    const int rank = int(a.get_int("--tp-rank", 0, 0, 63));
    if (rank >= world)
      usage_fail("bench", "--tp-rank " + std::to_string(rank) + " is not below --tp-world " + std::to_string(world));
    run_rank_process(rank, world, a.get("--tp-id"), a.get("--tp-result"), models, schemes, ms, xt, reps,
                     setup);
    return 0;
  }

  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  MIXQ_CHECK(gpus >= 1, ErrorCode::Unsupported, "bench --tp: no CUDA device");
  std::vector<int64_t> tps = parse_int_list("bench", "--tp", a.get("--tp", "1,2,4"), 1, 64);
  if (!a.has("--tp")) {
    std::vector<int64_t> fit;
    for (int64_t t : tps)
      if (t <= gpus) fit.push_back(t);
    tps = fit;
  }
  for (int64_t t : tps) {
    MIXQ_CHECK(t <= gpus, ErrorCode::Unsupported, "bench --tp: TP ", t, " needs ", t,
               " GPUs, this host has ", gpus);
    MIXQ_CHECK(t == 1 || nccl_available(), ErrorCode::Unsupported,
               "bench --tp: TP ", t, " needs NCCL, and this build of mixq has none");
  }

  std::vector<Row> rows;
  std::printf("# mixq bench --tp: %s, %d GPU(s), activations %s, launch %s, %s collective buffers, "
              "row chunks %s\n", device_line().c_str(), gpus, act_name.c_str(), launch.c_str(), buffers.c_str(),
              setup.row_chunks ? std::to_string(setup.row_chunks).c_str() : "auto");
  std::printf("%-12s %-12s %6s %3s %11s %11s %11s %7s %8s %6s\n", "model", "scheme", "M", "tp", "layer_us",
              "gemm_us", "allred_us", "coll%", "speedup", "eff");
  // One (model, scheme, TP) layer's slowest-rank times per M, as rows (speed-up over the TP = 1
  // row of the same run).
  auto report = [&](const LayerModel& lm, const SchemeCase& sc, int64_t tp, const std::vector<RankTimes>& per_m) {
    for (size_t mi = 0; mi < ms.size(); ++mi) {
      const int64_t M = ms[mi];
      const RankTimes& t = per_m[mi];
      Row row;
      row.model = lm.name;
      row.scheme = sc.name;
      row.M = M;
      row.tp = tp;
      row.layer_us = t.layer;
      row.gemm_us = t.gemm;
      row.coll_us = t.coll;
      for (const Row& base : rows)
        if (base.tp == 1 && base.model == row.model && base.scheme == row.scheme && base.M == M) {
          row.speedup = base.layer_us / row.layer_us;
          row.efficiency = row.speedup / double(tp);
        }
      rows.push_back(row);
      std::printf("%-12s %-12s %6lld %3lld %11.1f %11.1f %11.1f %6.1f%% %7.2fx %5.0f%%\n",
                  row.model.c_str(), row.scheme.c_str(), (long long)M, (long long)tp, row.layer_us,
                  row.gemm_us, row.coll_us, 100.0 * std::max(0.0, 1.0 - row.gemm_us / row.layer_us),
                  row.speedup, 100.0 * row.efficiency);
      std::fflush(stdout);
    }
  };
  for (int64_t tp : tps) {
    if (tp > 1 && launch == "procs") {
      // One process per GPU: this process makes the communicator's id (its bootstrap listens
      // here until every rank joined) and starts rank r of the same command on device r; each
      // rank runs every (model, scheme) layer and writes its times, and a row's time is the
      // slowest rank's.
      const std::string id = nccl_unique_id();
      const ResultDir dir;
      RankProcesses procs(tp);
      std::fflush(stdout);
      for (int r = 0; r < int(tp); ++r) {
        std::vector<std::string> args = {"mixq", argv[0], "--tp-rank", std::to_string(r),
                                         "--tp-world", std::to_string(tp), "--tp-id", id,
                                         "--tp-result", dir.file(r)};
        // the hidden options first: a "--" among the user's arguments would make them positionals
        for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
        procs.spawn(r, args);
      }
      procs.wait_all(timeout_s);
      std::vector<RankTimes> worst;
      for (int r = 0; r < int(tp); ++r) {
        const std::vector<RankTimes> t = read_result(dir.file(r), r, models, schemes, ms);
        if (worst.empty()) worst.resize(t.size());
        for (size_t i = 0; i < t.size(); ++i) take_slowest(worst[i], t[i]);
      }
      size_t row = 0;
      for (const LayerModel* lm : models)
        for (const SchemeCase& sc : schemes) {
          report(*lm, sc, tp, std::vector<RankTimes>(worst.begin() + std::ptrdiff_t(row),
                                                     worst.begin() + std::ptrdiff_t(row + ms.size())));
          row += ms.size();
        }
      continue;
    }
    // TP = 1, or --launch threads: every rank a thread of this process
    std::vector<int> devices;
    for (int d = 0; d < tp; ++d) devices.push_back(d);
    const std::vector<std::shared_ptr<Collectives>> comms =
        tp == 1 ? std::vector<std::shared_ptr<Collectives>>{single_rank_collectives(Device::CUDA, 0)}
                : nccl_local_collectives(devices);
    for (const LayerModel* lm : models)
      for (const SchemeCase& sc : schemes)
        report(*lm, sc, tp, run_layer_threads(*lm, sc, xt, ms, int(tp), reps, setup, comms));
  }
  if (a.has("--json")) {
    std::string cmd = "mixq";
    for (int i = 0; i < argc; ++i) cmd += std::string(" ") + argv[i];
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::string j = "{\n  \"command\": \"" + cmd + "\",\n  \"device\": \"" + device_line() +
                    "\",\n  \"gpus\": " + std::to_string(gpus) + ",\n  \"date\": \"" + date +
                    "\",\n  \"activations\": \"" + act_name + "\",\n  \"launch\": \"" + launch +
                    "\",\n  \"buffers\": \"" + buffers + "\",\n  \"row_chunks\": " +
                    std::to_string(setup.row_chunks) + ",\n  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "    {\"model\": \"%s\", \"scheme\": \"%s\", \"M\": %lld, \"tp\": %lld, "
                    "\"layer_us\": %.2f, \"gemm_us\": %.2f, \"allreduce_us\": %.2f, "
                    "\"speedup\": %.3f, \"efficiency\": %.3f}%s\n",
                    r.model.c_str(), r.scheme.c_str(), (long long)r.M, (long long)r.tp, r.layer_us,
                    r.gemm_us, r.coll_us, r.speedup, r.efficiency, i + 1 < rows.size() ? "," : "");
      j += buf;
    }
    j += "  ]\n}\n";
    std::ofstream(a.get("--json")) << j;
  }
  return 0;
#endif
}

}  // namespace mixq::cli
