// Tensor-parallel layers on several GPUs of this host over NCCL (mixq/parallel.hpp, mixq/nccl.hpp):
// one thread per rank, against the unsharded layer on one GPU, for every scheme, splits that cut
// groups and FP8 blocks, act-order, gathered and sharded column outputs, row sums with bias and
// clamp, a whole column -> row layer captured in a CUDA graph and replayed on new inputs, and the
// construction errors. Skipped (visibly) with fewer than two GPUs or without NCCL in the build.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/device_checks.hpp"
#include "gpu/wo_test_inputs.hpp"
#include "mixq/error.hpp"
#include "mixq/nccl.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/parallel.hpp"
#include "mixq/quantize.hpp"
#include "mixq/shard.hpp"
#include "rank_threads.hpp"

using namespace mixq;

namespace {

using test::make_weight;
using test::randn;

#define TP_CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

int gpu_count() {
  int n = 0;
  if (!cuda_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

#define SKIP_WITHOUT_GPUS(n)                                                                    \
  if (gpu_count() < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, this host has " << gpu_count(); \
  if (!nccl_available()) GTEST_SKIP() << "this build of mixq has no NCCL"

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

// A device copy of host bytes on the current device.
struct Dev {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Dev(size_t b) : bytes(b) {
    if (cudaMalloc(&p, std::max<size_t>(b, 16)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  }
  Dev(const void* host, size_t b) : Dev(b) {
    if (cudaMemcpy(p, host, b, cudaMemcpyHostToDevice) != cudaSuccess) throw std::runtime_error("copy");
  }
  ~Dev() { cudaFree(p); }
  std::vector<float> f32(size_t n) const {
    std::vector<float> h(n);
    if (cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("copy");
    return h;
  }
};

// A call context on stream s with workspace ws.
ExecContext on_stream(cudaStream_t s, const Dev& ws) {
  ExecContext c;
  c.stream = s;
  c.workspace = ws.p;
  c.workspace_bytes = ws.bytes;
  return c;
}

// Rank r's options: the CUDA backend on GPU r.
ParallelLinearOptions on_gpu(int r) {
  ParallelLinearOptions o;
  o.prepare.backend = BackendKind::CUDA;
  o.prepare.device = r;
  return o;
}

// Columns [k0, k1) of the M x K rows of x (a row-parallel rank's input), rounded to bf16.
std::vector<uint16_t> columns_bf16(const std::vector<float>& x, int64_t M, int64_t K, int64_t k0, int64_t k1) {
  std::vector<uint16_t> out;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = k0; k < k1; ++k) out.push_back(f32_to_bf16(x[size_t(m * K + k)]));
  return out;
}

// The unsharded layer on GPU 0: x bf16 [M][K], y f32 [M][N], bias and clamp.
std::vector<float> single_gpu(const QuantizedWeight& w, ActQuant act, const std::vector<float>& x,
                              int64_t M, const std::vector<float>& bias, float lo, float hi) {
  cudaSetDevice(0);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = act;
  const PreparedWeight pw = prepare(w, o);
  const std::vector<uint16_t> xb = to_bf16(x);
  Dev dx(xb.data(), xb.size() * 2), dy(size_t(M * w.N) * 4), db(bias.data(), bias.size() * 4);
  Epilogue ep;
  ep.bias = TensorView(db.p, DType::F32, {w.N}, Device::CUDA, 0);
  ep.clamp_lo = lo;
  ep.clamp_hi = hi;
  linear(TensorView(dx.p, DType::BF16, {M, w.K}, Device::CUDA, 0), pw,
         TensorView(dy.p, DType::F32, {M, w.N}, Device::CUDA, 0), ep);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) throw std::runtime_error(std::string("single gpu: ") + cudaGetErrorString(e));
  return dy.f32(size_t(M * w.N));
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return 1e30;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Runs fn(rank) on one thread per rank, each on device `rank`.
void on_ranks(int world, const std::function<void(int)>& fn, test::RankBarrier* barrier = nullptr) {
  test::on_ranks(world, [&](int64_t r) {
    cudaSetDevice(int(r));
    fn(int(r));
  }, barrier);
}

using test::RankBarrier;

// One communicator per GPU 0 .. world - 1 of this process.
std::vector<std::shared_ptr<Collectives>> first_gpus_comms(int world) {
  std::vector<int> devs(static_cast<size_t>(world));
  std::iota(devs.begin(), devs.end(), 0);
  return nccl_local_collectives(devs);
}

struct TpCase {
  const char* scheme;
  ActQuant act;
  bool act_order;
  int64_t N, K, M;
  ShardAxis axis;
  bool gather;
};

}  // namespace

// Every scheme and split against the single-GPU layer, on 2 and 4 GPUs.
TEST(CudaTensorParallel, LayersMatchOneGpu) {
  SKIP_WITHOUT_GPUS(2);
  const TpCase cases[] = {
      {"w4g128", ActQuant::None, false, 300, 1000, 1, ShardAxis::Row, false},     // cut groups
      {"w4g128", ActQuant::None, false, 256, 1000, 37, ShardAxis::Row, false},
      {"w4g128zp", ActQuant::None, true, 128, 1024, 5, ShardAxis::Row, false},   // act-order
      {"w8g128", ActQuant::None, false, 300, 512, 300, ShardAxis::Row, false},
      {"fp8b128", ActQuant::None, false, 256, 1000, 9, ShardAxis::Row, false},  // cut FP8 blocks
      {"w4g128", ActQuant::None, false, 300, 512, 1, ShardAxis::Column, true},   // uneven gather
      {"w4g128", ActQuant::None, false, 304, 512, 1, ShardAxis::Column, true},   // in place
      {"w4g128zp", ActQuant::None, true, 300, 512, 33, ShardAxis::Column, true},
      {"w8g128", ActQuant::None, false, 301, 256, 7, ShardAxis::Column, false},
      {"fp8b128", ActQuant::Fp8Block, false, 300, 512, 64, ShardAxis::Column, true},  // n_phase
      {"fp8b128", ActQuant::Fp8Block, false, 256, 1024, 64, ShardAxis::Row, false},
      {"w8g128", ActQuant::Int8Block, false, 256, 1024, 64, ShardAxis::Row, false},
  };
  for (int world : {2, 4}) {
    if (gpu_count() < world) continue;
    const auto comms = first_gpus_comms(world);
    uint32_t seed = 10;
    for (const TpCase& c : cases) {
      for (bool clamp : {false, true}) {
        SCOPED_TRACE(std::string(c.scheme) + " act " + act_quant_name(c.act) + (c.act_order ? " act-order " : " ") +
                     shard_axis_name(c.axis) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) +
                     " M " + std::to_string(c.M) + " world " + std::to_string(world) + (clamp ? " clamp" : ""));
        std::printf("[ case     ] %s act %s%s %s N %lld K %lld M %lld world %d%s\n", c.scheme,
                    act_quant_name(c.act), c.act_order ? " act-order" : "", shard_axis_name(c.axis),
                    (long long)c.N, (long long)c.K, (long long)c.M, world, clamp ? " clamp" : "");
        std::fflush(stdout);
        const QuantizedWeight w = make_weight(c.N, c.K, c.scheme, seed++, c.act_order);
        const std::vector<float> x = randn(size_t(c.M * c.K), seed++), bias = randn(size_t(c.N), seed++);
        const float lo = clamp ? -0.5f : -INFINITY, hi = clamp ? 0.5f : INFINITY;
        const std::vector<float> want = single_gpu(w, c.act, x, c.M, bias, lo, hi);
        std::vector<std::vector<float>> got(static_cast<size_t>(world));
        RankBarrier ready(world);
        on_ranks(world, [&](int r) {
          const ShardSpec spec{r, world, c.axis};
          ParallelLinearOptions o;
          o.prepare.backend = BackendKind::CUDA;
          o.prepare.device = r;
          o.prepare.act = c.act;
          o.gather_output = c.gather;
          const ParallelLinear layer(shard(w, spec), spec, c.N, c.K, comms[size_t(r)], o);
          const auto [b0, b1] = layer.range();
          std::vector<float> xl;  // this rank's input: all of x (column) or its K columns (row)
          for (int64_t m = 0; m < c.M; ++m)
            for (int64_t k = c.axis == ShardAxis::Row ? b0 : 0; k < (c.axis == ShardAxis::Row ? b1 : c.K); ++k)
              xl.push_back(x[size_t(m * c.K + k)]);
          const std::vector<uint16_t> xb = to_bf16(xl);
          cudaStream_t s;
          cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
          Dev dx(xb.data(), xb.size() * 2), dy(size_t(c.M * layer.out_features()) * 4),
              db(bias.data(), bias.size() * 4), ws(layer.workspace_size(c.M));
          ExecContext ctx = on_stream(s, ws);
          // the shard's kernels launched once before any collective (a first launch loads the
          // module), then the poisoned output
          {
            Dev scratch(size_t(c.M * layer.local().N()) * 4);
            ExecContext c0 = ctx;
            c0.workspace_bytes = linear_workspace_size(layer.local(), c.M);
            linear(TensorView(dx.p, DType::BF16, {c.M, layer.in_features()}, Device::CUDA, r), layer.local(),
                   TensorView(scratch.p, DType::F32, {c.M, layer.local().N()}, Device::CUDA, r), Epilogue{}, c0);
            cudaStreamSynchronize(s);
          }
          cudaMemset(dy.p, 0xFF, dy.bytes);  // NaN: every element must be written
          ready.wait();  // no rank allocates while another is in a collective
          Epilogue ep;
          ep.bias = TensorView(db.p, DType::F32, {c.N}, Device::CUDA, r);
          ep.clamp_lo = lo;
          ep.clamp_hi = hi;
          layer.forward(TensorView(dx.p, DType::BF16, {c.M, layer.in_features()}, Device::CUDA, r),
                        TensorView(dy.p, DType::F32, {c.M, layer.out_features()}, Device::CUDA, r), ep, ctx);
          const cudaError_t e = cudaStreamSynchronize(s);
          cudaStreamDestroy(s);
          if (e != cudaSuccess) throw std::runtime_error(std::string("rank forward: ") + cudaGetErrorString(e));
          ready.wait();  // nor frees before every rank's collective is done
          got[size_t(r)] = dy.f32(size_t(c.M * layer.out_features()));
        }, &ready);
        for (int r = 0; r < world; ++r) {
          std::vector<float> want_r = want;
          if (c.axis == ShardAxis::Column && !c.gather) {
            const auto [n0, n1] = shard_range(c.N, {r, world, c.axis});
            want_r.clear();
            for (int64_t m = 0; m < c.M; ++m)
              for (int64_t n = n0; n < n1; ++n) want_r.push_back(want[size_t(m * c.N + n)]);
          }
          // bf16 inputs; FP8 / INT8 activations are quantized per rank's own blocks
          const double tol = c.act == ActQuant::None ? 8e-3 : 2e-2;  // bf16 products
          EXPECT_LE(rel_err(got[size_t(r)], want_r), tol) << "rank " << r;
        }
      }
    }
  }
}

// A whole column -> row layer (up, then down with its all-reduce) captured in one CUDA graph per
// rank, replayed twice on new inputs written into the captured buffers.
TEST(CudaTensorParallel, GraphCapturedLayerReplaysOnNewInputs) {
  SKIP_WITHOUT_GPUS(2);
  const int world = gpu_count() >= 4 ? 4 : 2;
  const auto comms = first_gpus_comms(world);
  const int64_t H = 512, I = 1000, M = 3;  // I over 4 cuts g128 groups in the down projection
  const QuantizedWeight up = make_weight(I, H, "w4g128", 50, false);
  const QuantizedWeight down = make_weight(H, I, "w4g128", 51, false);
  std::vector<std::vector<float>> xs = {randn(size_t(M * H), 52), randn(size_t(M * H), 53)};
  // reference: up on one GPU (f32 out, rounded to bf16 as the ranks' intermediate is), then down
  std::vector<std::vector<float>> want;
  const std::vector<float> zero_bias_i(size_t(I), 0.f), bias_h = randn(size_t(H), 54);
  for (const auto& x : xs) {
    std::vector<float> h = single_gpu(up, ActQuant::None, x, M, zero_bias_i, -INFINITY, INFINITY);
    for (float& v : h) v = bf16_to_f32(f32_to_bf16(v));
    want.push_back(single_gpu(down, ActQuant::None, h, M, bias_h, -INFINITY, INFINITY));
  }
  std::vector<std::vector<std::vector<float>>> got(2, std::vector<std::vector<float>>(static_cast<size_t>(world)));
  RankBarrier done(world);
  on_ranks(world, [&](int r) {
    ParallelLinearOptions o;
    o.prepare.backend = BackendKind::CUDA;
    o.prepare.device = r;
    const ShardSpec col{r, world, ShardAxis::Column}, row{r, world, ShardAxis::Row};
    const ParallelLinear lu(shard(up, col), col, I, H, comms[size_t(r)], o);
    const ParallelLinear ld(shard(down, row), row, H, I, comms[size_t(r)], o);
    ASSERT_EQ(lu.out_features(), ld.in_features());
    cudaStream_t s;
    TP_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Dev dx(size_t(M * H) * 2), dh(size_t(M * lu.out_features()) * 2), dy(size_t(M * H) * 4),
        db(bias_h.data(), bias_h.size() * 4),
        ws(std::max(lu.workspace_size(M), ld.workspace_size(M)));
    ExecContext ctx = on_stream(s, ws);
    Epilogue ep;
    ep.bias = TensorView(db.p, DType::F32, {H}, Device::CUDA, r);
    // NCCL connects its peers on the first collective: one eager layer before the capture
    lu.forward(TensorView(dx.p, DType::BF16, {M, H}, Device::CUDA, r),
               TensorView(dh.p, DType::BF16, {M, lu.out_features()}, Device::CUDA, r), Epilogue{}, ctx);
    ld.forward(TensorView(dh.p, DType::BF16, {M, ld.in_features()}, Device::CUDA, r),
               TensorView(dy.p, DType::F32, {M, H}, Device::CUDA, r), ep, ctx);
    TP_CHECK_CUDA(cudaStreamSynchronize(s));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    TP_CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    lu.forward(TensorView(dx.p, DType::BF16, {M, H}, Device::CUDA, r),
               TensorView(dh.p, DType::BF16, {M, lu.out_features()}, Device::CUDA, r), Epilogue{}, ctx);
    ld.forward(TensorView(dh.p, DType::BF16, {M, ld.in_features()}, Device::CUDA, r),
               TensorView(dy.p, DType::F32, {M, H}, Device::CUDA, r), ep, ctx);
    TP_CHECK_CUDA(cudaStreamEndCapture(s, &g));
    TP_CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    for (size_t i = 0; i < xs.size(); ++i) {
      const std::vector<uint16_t> xb = to_bf16(xs[i]);
      TP_CHECK_CUDA(cudaMemcpyAsync(dx.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice, s));
      TP_CHECK_CUDA(cudaMemsetAsync(dy.p, 0xFF, dy.bytes, s));
      TP_CHECK_CUDA(cudaGraphLaunch(ge, s));
      TP_CHECK_CUDA(cudaStreamSynchronize(s));
      got[i][size_t(r)] = dy.f32(size_t(M * H));
      done.wait();  // the peers' sums may read dy until they end: poison it again only after
    }
    done.wait();  // every rank's collectives finished before any rank frees
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }, &done);
  for (size_t i = 0; i < xs.size(); ++i)
    for (int r = 0; r < world; ++r) {
      EXPECT_LE(rel_err(got[i][size_t(r)], want[i]), 5e-3) << "replay " << i << " rank " << r;
      EXPECT_EQ(got[i][size_t(r)], got[i][0]) << "ranks disagree, replay " << i;
    }
}

// Row-parallel sums into buffers from Collectives::alloc_collective_buffer (NCCL: a symmetric
// window, summed by NCCL's symmetric kernels) against the same layer into cudaMalloc'd outputs and
// the single-GPU layer: f32 and bf16 outputs, one and several rows, eager and graph-captured; and
// the sum cut into row chunks whose all-reduces overlap the next chunk's product.
TEST(CudaTensorParallel, RegisteredOutputsAndRowChunksSumLikePlainOnes) {
  SKIP_WITHOUT_GPUS(2);
  const int world = gpu_count() >= 4 ? 4 : 2;
  const auto comms = first_gpus_comms(world);
  const int64_t N = 512, K = 1000;  // K over 4 cuts g128 groups
  const QuantizedWeight w = make_weight(N, K, "w4g128", 70, false);
  for (const int64_t M : {int64_t(1), int64_t(8)}) {
    for (const DType yt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("M " + std::to_string(M) + " y " + dtype_name(yt) + " world " + std::to_string(world));
      const std::vector<float> x = randn(size_t(M * K), 71), bias = randn(size_t(N), 72);
      const std::vector<float> want = single_gpu(w, ActQuant::None, x, M, bias, -INFINITY, INFINITY);
      // [rank][plain, registered eager, registered replayed]
      std::vector<std::vector<std::vector<float>>> got(static_cast<size_t>(world));
      RankBarrier ready(world);
      on_ranks(world, [&](int r) {
        const ShardSpec spec{r, world, ShardAxis::Row};
        const ParallelLinearOptions o = on_gpu(r);
        const ParallelLinear layer(shard(w, spec), spec, N, K, comms[size_t(r)], o);
        // the automatic cut: 4 equal chunks from a 32 MB sum of 16-bit values (32768 x 512)
        EXPECT_EQ(layer.row_split(32767), std::vector<int64_t>{32767});
        EXPECT_EQ(layer.row_split(32768), (std::vector<int64_t>{8192, 8192, 8192, 8192}));
        const auto [k0, k1] = layer.range();
        const std::vector<uint16_t> xb = columns_bf16(x, M, K, k0, k1);
        const size_t eb = yt == DType::F32 ? 4 : 2, ybytes = size_t(M * N) * eb;
        cudaStream_t s;
        TP_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        Dev dx(xb.data(), xb.size() * 2), plain(ybytes), db(bias.data(), bias.size() * 4),
            ws(layer.workspace_size(M));
        const std::shared_ptr<void> reg = comms[size_t(r)]->alloc_collective_buffer(ybytes);
        ExecContext ctx = on_stream(s, ws);
        Epilogue ep;
        ep.bias = TensorView(db.p, DType::F32, {N}, Device::CUDA, r);
        const TensorView xv(dx.p, DType::BF16, {M, layer.in_features()}, Device::CUDA, r);
        auto y_view = [&](void* p) { return TensorView(p, yt, {M, N}, Device::CUDA, r); };
        auto read = [&](const void* p) {
          std::vector<float> out(size_t(M * N));
          std::vector<uint16_t> h(size_t(M * N));
          if (yt == DType::F32) {
            if (cudaMemcpy(out.data(), p, ybytes, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("copy");
          } else {
            if (cudaMemcpy(h.data(), p, ybytes, cudaMemcpyDeviceToHost) != cudaSuccess) throw std::runtime_error("copy");
            for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
          }
          return out;
        };
        // the shard's kernels once before any collective (module loading), then the layers
        linear(xv, layer.local(), y_view(plain.p), Epilogue{}, ExecContext{s, ws.p, linear_workspace_size(layer.local(), M)});
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        ready.wait();
        TP_CHECK_CUDA(cudaMemsetAsync(plain.p, 0xFF, ybytes, s));
        TP_CHECK_CUDA(cudaMemsetAsync(reg.get(), 0xFF, ybytes, s));
        layer.forward(xv, y_view(plain.p), ep, ctx);
        layer.forward(xv, y_view(reg.get()), ep, ctx);
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        got[size_t(r)].push_back(read(plain.p));
        got[size_t(r)].push_back(read(reg.get()));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        TP_CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        layer.forward(xv, y_view(reg.get()), ep, ctx);
        TP_CHECK_CUDA(cudaStreamEndCapture(s, &g));
        TP_CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
        // A peer's sum may still read this rank's buffer (symmetric kernels, direct peer access)
        // after this rank's own sum is done: poison it only once every rank's sum has ended.
        ready.wait();
        TP_CHECK_CUDA(cudaMemsetAsync(reg.get(), 0xFF, ybytes, s));
        TP_CHECK_CUDA(cudaGraphLaunch(ge, s));
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        got[size_t(r)].push_back(read(reg.get()));
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        // the same sum cut into 3 row chunks (each chunk's all-reduce on a side stream, overlapping
        // the next chunk's product), eager and replayed from a capture that forks and joins it
        ParallelLinearOptions oc = o;
        oc.row_chunks = 3;
        const ParallelLinear chunked(shard(w, spec), spec, N, K, comms[size_t(r)], oc);
        Dev wsc(chunked.workspace_size(M));  // a chunk's plan may need more than the whole M's
        ctx.workspace = wsc.p;
        ctx.workspace_bytes = wsc.bytes;
        ready.wait();
        TP_CHECK_CUDA(cudaMemsetAsync(plain.p, 0xFF, ybytes, s));
        chunked.forward(xv, y_view(plain.p), ep, ctx);
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        got[size_t(r)].push_back(read(plain.p));
        TP_CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        chunked.forward(xv, y_view(plain.p), ep, ctx);
        TP_CHECK_CUDA(cudaStreamEndCapture(s, &g));
        TP_CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
        ready.wait();  // every rank's chunked sums done before this rank poisons its buffer
        TP_CHECK_CUDA(cudaMemsetAsync(plain.p, 0xFF, ybytes, s));
        TP_CHECK_CUDA(cudaGraphLaunch(ge, s));
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        got[size_t(r)].push_back(read(plain.p));
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        ready.wait();  // every rank's collectives done before any rank frees (reg is a collective free)
        cudaStreamDestroy(s);
      }, &ready);
      const double tol = yt == DType::F32 ? 3e-3 : 8e-3;
      for (int r = 0; r < world; ++r) {
        const auto& g = got[size_t(r)];
        for (size_t v = 0; v < g.size(); ++v)
          EXPECT_LE(rel_err(g[v], want), tol) << "rank " << r << " output " << v
                                              << " (plain, registered, replayed, chunked, chunked replayed)";
        EXPECT_EQ(g[1], g[2]) << "rank " << r << ": the replay differs from the eager registered sum";
        EXPECT_EQ(g[3], g[4]) << "rank " << r << ": the replay differs from the eager chunked sum";
        EXPECT_EQ(g[1], got[0][1]) << "ranks disagree (registered), rank " << r;
        if (yt == DType::F32 && world == 2) EXPECT_EQ(g[0], g[1]) << "rank " << r << ": a two-rank f32 sum is exact";
      }
    }
  }
}

// A registered (symmetric-window) sum right after the product that writes it, many times over:
// every eager forward must equal the first bit for bit. On NCCL releases whose symmetric kernels
// do not wait for the previous grid (nccl_collectives.cpp), this caught poison from before the
// product in one run of three without the stream fence.
TEST(CudaTensorParallel, RegisteredSumsReadTheWholeProduct) {
  SKIP_WITHOUT_GPUS(2);
  const int world = gpu_count() >= 4 ? 4 : 2;
  const auto comms = first_gpus_comms(world);
  const int64_t N = 512, K = 1000;
  const QuantizedWeight w = make_weight(N, K, "w4g128", 90, false);
  for (const int64_t M : {int64_t(1), int64_t(8)}) {
    SCOPED_TRACE("M " + std::to_string(M));
    const std::vector<float> x = randn(size_t(M * K), 91);
    std::vector<int> bad(static_cast<size_t>(world), 0);
    RankBarrier ready(world);
    on_ranks(world, [&](int r) {
      const ShardSpec spec{r, world, ShardAxis::Row};
      const ParallelLinear layer(shard(w, spec), spec, N, K, comms[size_t(r)], on_gpu(r));
      const auto [k0, k1] = layer.range();
      const std::vector<uint16_t> xb = columns_bf16(x, M, K, k0, k1);
      const size_t ybytes = size_t(M * N) * 4;
      cudaStream_t s;
      TP_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      Dev dx(xb.data(), xb.size() * 2), ws(layer.workspace_size(M));
      const std::shared_ptr<void> y = comms[size_t(r)]->alloc_collective_buffer(ybytes);
      const ExecContext ctx = on_stream(s, ws);
      const TensorView xv(dx.p, DType::BF16, {M, layer.in_features()}, Device::CUDA, r),
          yv(y.get(), DType::F32, {M, N}, Device::CUDA, r);
      std::vector<float> first(size_t(M * N)), now(size_t(M * N));
      for (int it = 0; it < 200; ++it) {
        ready.wait();  // every peer's previous sum has ended before this rank poisons its buffer
        TP_CHECK_CUDA(cudaMemsetAsync(y.get(), 0xFF, ybytes, s));
        layer.forward(xv, yv, Epilogue{}, ctx);
        TP_CHECK_CUDA(cudaStreamSynchronize(s));
        TP_CHECK_CUDA(cudaMemcpy((it ? now : first).data(), y.get(), ybytes, cudaMemcpyDeviceToHost));
        if (it && now != first) ++bad[size_t(r)];
      }
      ready.wait();
      cudaStreamDestroy(s);
      size_t finite = 0;
      for (float v : first) finite += std::isfinite(v) ? 1 : 0;
      EXPECT_EQ(finite, first.size()) << "rank " << r << ": the first sum holds poison";
    }, &ready);
    for (int r = 0; r < world; ++r)
      EXPECT_EQ(bad[size_t(r)], 0) << "rank " << r << ": sums that differ from the first, of 199";
  }
}

// One GPU, a one-rank NCCL communicator: a row layer cut into row chunks (each chunk's all-reduce
// on the side stream) summing into an NCCL window, eager and replayed from a graph, against the
// single-GPU product. Runs where only one GPU is present.
TEST(CudaTensorParallel, OneRankChunksIntoAWindow) {
  SKIP_WITHOUT_GPUS(1);
  const auto comms = nccl_local_collectives({0});
  const int64_t N = 384, K = 1000, M = 50;
  const QuantizedWeight w = make_weight(N, K, "w4g128", 80, false);
  const std::vector<float> x = randn(size_t(M * K), 81), bias = randn(size_t(N), 82);
  const std::vector<float> want = single_gpu(w, ActQuant::None, x, M, bias, -INFINITY, INFINITY);
  cudaSetDevice(0);
  const ShardSpec spec{0, 1, ShardAxis::Row};
  for (const int chunks : {1, 3, 16}) {
    SCOPED_TRACE("row_chunks " + std::to_string(chunks));
    ParallelLinearOptions o;
    o.prepare.backend = BackendKind::CUDA;
    o.row_chunks = chunks;
    const ParallelLinear layer(shard(w, spec), spec, N, K, comms[0], o);
    const std::vector<uint16_t> xb = to_bf16(x);
    cudaStream_t s;
    TP_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Dev dx(xb.data(), xb.size() * 2), db(bias.data(), bias.size() * 4), ws(layer.workspace_size(M));
    const std::shared_ptr<void> y = comms[0]->alloc_collective_buffer(size_t(M * N) * 4);
    ExecContext ctx = on_stream(s, ws);
    Epilogue ep;
    ep.bias = TensorView(db.p, DType::F32, {N}, Device::CUDA, 0);
    const TensorView xv(dx.p, DType::BF16, {M, K}, Device::CUDA, 0), yv(y.get(), DType::F32, {M, N}, Device::CUDA, 0);
    std::vector<float> eager(size_t(M * N)), replayed(size_t(M * N));
    TP_CHECK_CUDA(cudaMemsetAsync(y.get(), 0xFF, size_t(M * N) * 4, s));
    layer.forward(xv, yv, ep, ctx);
    TP_CHECK_CUDA(cudaStreamSynchronize(s));
    TP_CHECK_CUDA(cudaMemcpy(eager.data(), y.get(), eager.size() * 4, cudaMemcpyDeviceToHost));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    TP_CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    layer.forward(xv, yv, ep, ctx);
    TP_CHECK_CUDA(cudaStreamEndCapture(s, &g));
    TP_CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    TP_CHECK_CUDA(cudaMemsetAsync(y.get(), 0xFF, size_t(M * N) * 4, s));
    TP_CHECK_CUDA(cudaGraphLaunch(ge, s));
    TP_CHECK_CUDA(cudaStreamSynchronize(s));
    TP_CHECK_CUDA(cudaMemcpy(replayed.data(), y.get(), replayed.size() * 4, cudaMemcpyDeviceToHost));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    EXPECT_LE(rel_err(eager, want), 3e-3);
    EXPECT_EQ(eager, replayed) << "the replay differs from the eager forward";
  }
}

// Construction errors, the same on every rank: a communicator on another device than the shard.
TEST(CudaTensorParallel, CommunicatorOnAnotherDevice) {
  SKIP_WITHOUT_GPUS(2);
  const auto comms = nccl_local_collectives({0, 1});
  const QuantizedWeight w = make_weight(64, 512, "w4g128", 60, false);
  std::vector<std::string> errors(2);
  on_ranks(2, [&](int r) {
    const ShardSpec spec{r, 2, ShardAxis::Row};
    ParallelLinearOptions o;
    o.prepare.backend = BackendKind::CUDA;
    o.prepare.device = 0;  // rank 1's communicator is on device 1
    try {
      ParallelLinear(shard(w, spec), spec, 64, 512, comms[size_t(r)], o);
    } catch (const Error& e) {
      errors[size_t(r)] = e.what();
    }
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("rank 1 has a nccl communicator on cuda device 1 for a shard prepared on cuda device 0"),
              std::string::npos) << e;
}
