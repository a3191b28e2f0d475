// The CUDA driver of `mixq bench`: mixq::linear and the cuBLAS FP16/BF16 baseline in one process.
// Cold L2: each timed call uses the next of enough prepared copies to cover >= 4x the L2; a figure
// is the median of 7 replays of a CUDA graph of >= 10 calls (graph replay removes launch gaps, as
// in shared/bench/peers.py). A quantized run's replays alternate with replays of the cuBLAS
// baseline on the same shape and M (TimedRun::paired_baseline_us): at large M both drift with the
// GPU's clocks and power by up to 10% over a run, and alternating puts them in the same state.
// Before its timed replays every case replays its own graphs untimed for TimingPolicy::settle_s
// (--settle-ms), so that a case timed first, on a rested GPU, is not the only one at boost clocks.
// The streaming-read ceiling of the same run is part of device().
#if defined(MIXQ_WITH_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <sstream>

#include "bench_driver.hpp"
#include "mixq/act_quant.hpp"
#include "mixq/device.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::bench {

namespace {

#define BENCH_CUDA(expr)                                                                        \
  do {                                                                                          \
    const cudaError_t e_ = (expr);                                                              \
    MIXQ_CHECK(e_ == cudaSuccess, ErrorCode::Cuda, #expr ": ", cudaGetErrorString(e_));         \
  } while (0)

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Host f32 -> device 16-bit (or f32) rows.
std::vector<uint16_t> to_16bit(const float* x, size_t n, DType t) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = t == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
  return out;
}

// Device memory that grows on demand and is freed with its owner.
struct DeviceScratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() {
    if (ptr) cudaFree(ptr);
  }
  void ensure(size_t b) {
    if (b <= bytes) return;
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    BENCH_CUDA(cudaMalloc(&ptr, b));
    bytes = b;
  }
};

// Quantized activations of M rows x K columns on the device, in the tightest layout
// (act_quant_row_pitch / act_quant_meta_pitch): a chain layer's input or output.
struct ChainBuffers {
  ActQuant kind;
  int64_t block, M, K, nb, ldq, ldm;
  DeviceScratch q, scale, offset, sums;
  ChainBuffers(ActQuant k, int64_t blk, int64_t m, int64_t cols)
      : kind(k), block(blk), M(m), K(cols), nb((cols + blk - 1) / blk),
        ldq(act_quant_row_pitch(cols)), ldm(act_quant_meta_pitch(m)) {
    q.ensure(size_t(M * ldq));
    scale.ensure(size_t(nb * ldm) * 4);
    if (kind == ActQuant::Int8Block) {
      offset.ensure(scale.bytes);
      sums.ensure(scale.bytes);
    }
  }
  QuantizedActivations view() const {
    const TensorView codes = TensorView::strided(
        q.ptr, kind == ActQuant::Fp8Block ? DType::F8E4M3 : DType::I8, {M, K}, {ldq, 1},
        Device::CUDA);
    const auto meta = [&](void* p, DType t) {
      return TensorView::strided(p, t, {nb, M}, {ldm, 1}, Device::CUDA);
    };
    if (kind == ActQuant::Fp8Block)
      return QuantizedActivations::fp8_block(codes, meta(scale.ptr, DType::F32));
    return QuantizedActivations::int8_block(block, codes, meta(scale.ptr, DType::F32),
                                            meta(offset.ptr, DType::F32),
                                            meta(sums.ptr, DType::I32));
  }
};

class CudaBenchDriver final : public BenchDriver {
 public:
  explicit CudaBenchDriver(const DriverConfig& cfg)
      : device_(cfg.device), act_(cfg.cuda_activation), tuning_(cfg.tuning),
        force_kernel_(cfg.force_kernel), chain_(cfg.chain) {
    MIXQ_CHECK(act_ == DType::F16 || act_ == DType::BF16, ErrorCode::InvalidArgument,
               "bench: CUDA activations must be f16 or bf16, got ", dtype_name(act_));
    BENCH_CUDA(cudaSetDevice(device_));
    BENCH_CUDA(cudaGetDeviceProperties(&prop_, device_));
    BENCH_CUDA(cudaStreamCreate(&stream_));
    BENCH_CUDA(cudaEventCreate(&ev_start_));
    BENCH_CUDA(cudaEventCreate(&ev_stop_));
    MIXQ_CHECK(cublasCreate(&cublas_) == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, "cublasCreate");
    cublasSetStream(cublas_, stream_);
    // The read ceiling at the size of a large layer's INT4 weights (anchors.md: 154 MB).
    ceiling_ = measure_read_ceiling(size_t(154) << 20, device_);
  }
  ~CudaBenchDriver() override {
    release();
    release_dense();
    cublasDestroy(cublas_);
    cudaEventDestroy(ev_start_);
    cudaEventDestroy(ev_stop_);
    cudaStreamDestroy(stream_);
  }

  std::string backend() const override { return "cuda"; }
  std::string device() const override {
    std::ostringstream os;
    os << prop_.name << " (" << prop_.multiProcessorCount << " SMs, " << (prop_.l2CacheSize >> 20)
       << " MB L2; streaming-read ceiling " << ceiling_.tb_per_s << " TB/s on "
       << (ceiling_.bytes >> 20) << " MB, " << ceiling_.us << " us)";
    return os.str();
  }
  std::string baseline_name() const override {
    return std::string("cuBLAS ") + (act_ == DType::F16 ? "FP16" : "BF16") + " (cublasGemmEx)";
  }
  DType activation_dtype() const override { return act_; }
  std::vector<std::string> default_schemes() const override {
    return {"w4g128", "w8g128", "w4g32asym", "w4g128zp"};
  }
  int64_t cache_bytes() const override { return prop_.l2CacheSize; }
  double plain_read_us(int64_t bytes) override {
    auto it = plain_reads_.find(bytes);
    if (it == plain_reads_.end()) {
      double us = 0;  // not measured where the device cannot hold the read's copies next to the weights
      try {
        us = measure_read_ceiling(size_t(bytes), device_).us;
      } catch (const Error&) {
        cudaGetLastError();
      }
      it = plain_reads_.emplace(bytes, us).first;
    }
    return it->second;
  }

  // The prepared copies go; the dense copies of the last shape stay for the paired baseline of
  // its quantized runs (run_quantized), until a dense weight of another shape replaces them.
  void release() override {
    prepared_.clear();
    prepared_for_ = nullptr;
  }

  TimedRun run_quantized(const QuantizedWeight& w, ActQuant act, int /*copies*/,
                         const HostProblem& p, const TimingPolicy& policy) override {
    TimedRun t;
    const auto t0 = std::chrono::steady_clock::now();
    if (prepared_for_ != &w || prepared_act_ != act) {
      prepared_.clear();
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.act = act;  // Int8Block / Fp8Block quantize the activations inside the timed call
      o.device = device_;
      o.tuning = tuning_;
      o.force_kernel = force_kernel_;
      const int n = rotation(size_t(w.storage_bytes()));
      for (int i = 0; i < n; ++i) prepared_.push_back(prepare(w, o));
      prepared_for_ = &w;
      prepared_act_ = act;
    }
    upload_x(p);
    t.setup_s = seconds_since(t0);
    const TensorView xv(x_, act_, {p.M, p.K}, Device::CUDA, device_);
    // the output in the activation dtype, as cuBLAS's baseline writes it (an f32 output would be
    // twice cuBLAS's output bytes, ~10 us of a 4096 x 4096 x 4096 call)
    const TensorView yv(y_, act_, {p.M, p.N}, Device::CUDA, device_);
    // --chain: x quantized once here (the previous layer's output), the output quantized for
    // the next layer of the same kind inside the timed call
    const bool chain = chain_ && act != ActQuant::None;
    std::optional<ChainBuffers> xq, yq;
    DeviceScratch chain_ws;
    if (chain) {
      const int64_t block = act == ActQuant::Fp8Block ? QuantizedActivations::kFp8Block
                                                      : w.block_k;  // INT8: act_block
      xq.emplace(act, block, p.M, p.K);
      yq.emplace(act, block, p.M, p.N);
      ExecContext c;
      c.stream = stream_;
      const QuantizedActivations v = xq->view();
      if (act == ActQuant::Fp8Block) quantize_activations_fp8_block(xv, v.q, v.scale, c);
      else quantize_activations_int8_block(xv, block, v.q, v.scale, v.offset, v.sums, c);
      chain_ws.ensure(linear_workspace_size(prepared_[0], p.M, act, block));
    }
    Graph mixq_graph = make_graph(int(prepared_.size()), [&](int i) {
      ExecContext c;
      c.stream = stream_;
      if (chain) {
        c.workspace = chain_ws.ptr;
        c.workspace_bytes = chain_ws.bytes;
        linear(xq->view(), prepared_[i], yq->view(), {}, c);
      } else {
        linear(xv, prepared_[i], yv, {}, c);
      }
    });
    // where the dense copies of this shape are resident, replays alternate: mixq, cuBLAS, mixq, ...
    // (the 16-bit output of cuBLAS goes to y16_)
    std::optional<Graph> dense_graph;
    if (dense_n_ == p.N && dense_k_ == p.K && !dense_.empty())
      dense_graph.emplace(make_graph(int(dense_.size()), [&](int i) { dense_call(p, i); }));
    if (dense_graph) settle({&mixq_graph, &*dense_graph}, policy.settle_s);
    else settle({&mixq_graph}, policy.settle_s);
    std::vector<double> a, b;
    for (int r = 0; r < kReplays; ++r) {
      a.push_back(replay_us(mixq_graph));
      if (dense_graph) b.push_back(replay_us(*dense_graph));
    }
    finish(t, a);
    if (!b.empty()) {
      TimedRun d;
      finish(d, b);
      t.paired_baseline_us = d.median_us;
    }
    t.kernel = prepared_[0].kernel_name(p.M, act_);  // the instantiation for this activation type
    if (chain) {
      t.kernel = prepared_[0].kernel_name(p.M, act_, act, yq->block);
      // the check: the same layer's 16-bit output of x (the quantized output's bytes are the
      // quantizer's on this output: tests/gpu/test_cuda_quantized_output.cpp)
      ExecContext c;
      c.stream = stream_;
      linear(xv, prepared_[0], yv, {}, c);
      BENCH_CUDA(cudaStreamSynchronize(stream_));
      t.kernel += " (chain: xq in, yq out)";
    }
    download_y(p);
    return t;
  }

  TimedRun run_dense(const float* w, int /*copies*/, const HostProblem& p,
                     const TimingPolicy& policy) override {
    TimedRun t;
    const auto t0 = std::chrono::steady_clock::now();
    const size_t wb = size_t(p.N * p.K) * 2;
    if (dense_for_ != w || dense_n_ != p.N || dense_k_ != p.K) {
      release();
      release_dense();
      dense_n_ = p.N;
      dense_k_ = p.K;
      const std::vector<uint16_t> h = to_16bit(w, size_t(p.N * p.K), act_);
      const int n = rotation(wb);
      for (int i = 0; i < n; ++i) {
        void* d = nullptr;
        BENCH_CUDA(cudaMalloc(&d, wb));
        BENCH_CUDA(cudaMemcpy(d, h.data(), wb, cudaMemcpyHostToDevice));
        dense_.push_back(d);
      }
      dense_for_ = w;
    }
    upload_x(p);
    t.setup_s = seconds_since(t0);
    Graph g = make_graph(int(dense_.size()), [&](int i) { dense_call(p, i); });
    settle({&g}, policy.settle_s);
    std::vector<double> us;
    for (int r = 0; r < kReplays; ++r) us.push_back(replay_us(g));
    finish(t, us);
    t.kernel = baseline_name();
    download_16bit(y16_, p);
    return t;
  }

 private:
  // copies that keep the working set >= 4x the L2 (at most 16)
  int rotation(size_t bytes) const {
    const size_t want = (4 * size_t(prop_.l2CacheSize) + bytes - 1) / std::max<size_t>(bytes, 1);
    return int(std::min<size_t>(16, std::max<size_t>(1, want)));
  }

  void ensure(void** p, size_t* cap, size_t bytes) {
    if (*cap >= bytes) return;
    if (*p) cudaFree(*p);
    BENCH_CUDA(cudaMalloc(p, bytes));
    *cap = bytes;
  }

  void upload_x(const HostProblem& p) {
    ensure(&x_, &x_cap_, size_t(p.M * p.K) * 2);
    ensure(&y_, &y_cap_, size_t(p.M * p.N) * 2);
    ensure(&y16_, &y16_cap_, size_t(p.M * p.N) * 2);
    const std::vector<uint16_t> h = to_16bit(p.x, size_t(p.M * p.K), act_);
    BENCH_CUDA(cudaMemcpy(x_, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    // poison: every element the kernel fails to write shows up as NaN in the error check
    // (0xFFFF is a NaN in f16 and bf16)
    BENCH_CUDA(cudaMemset(y_, 0xFF, size_t(p.M * p.N) * 2));
  }

  // A 16-bit output of the activation dtype, widened on the host.
  void download_16bit(const void* y, const HostProblem& p) {
    std::vector<uint16_t> h(size_t(p.M * p.N));
    BENCH_CUDA(cudaMemcpy(h.data(), y, h.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i)
      p.y[i] = act_ == DType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
  }
  void download_y(const HostProblem& p) { download_16bit(y_, p); }

  static constexpr int kReplays = 7;

  // An instantiated graph of >= 10 calls (rotating over n_rot weight copies), after 3 warm-up
  // calls (module load, cuBLAS heuristics) and one untimed replay.
  struct Graph {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    int calls = 0;
    Graph() = default;
    Graph(Graph&& o) noexcept : g(o.g), ge(o.ge), calls(o.calls) { o.g = nullptr, o.ge = nullptr; }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    Graph& operator=(Graph&&) = delete;
    ~Graph() {
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
    }
  };
  Graph make_graph(int n_rot, const std::function<void(int)>& call) {
    Graph gr;
    gr.calls = std::max(n_rot, 10);
    for (int i = 0; i < 3; ++i) call(i % n_rot);
    BENCH_CUDA(cudaStreamSynchronize(stream_));
    BENCH_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < gr.calls; ++i) call(i % n_rot);
    BENCH_CUDA(cudaStreamEndCapture(stream_, &gr.g));
    BENCH_CUDA(cudaGraphInstantiate(&gr.ge, gr.g, 0));
    BENCH_CUDA(cudaGraphLaunch(gr.ge, stream_));
    BENCH_CUDA(cudaStreamSynchronize(stream_));
    return gr;
  }
  // One timed replay: us per call.
  double replay_us(const Graph& gr) {
    BENCH_CUDA(cudaEventRecord(ev_start_, stream_));
    BENCH_CUDA(cudaGraphLaunch(gr.ge, stream_));
    BENCH_CUDA(cudaEventRecord(ev_stop_, stream_));
    BENCH_CUDA(cudaEventSynchronize(ev_stop_));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev_start_, ev_stop_));
    return ms * 1e3 / gr.calls;
  }
  // Untimed replays of the graphs, in turn, until they have run for settle_s seconds
  // (TimingPolicy::settle_s): the timed replays then see the clocks of sustained load.
  void settle(std::initializer_list<const Graph*> graphs, double settle_s) {
    double spent_us = 0;
    for (int i = 0; spent_us < settle_s * 1e6 && i < 100000; ++i)
      for (const Graph* g : graphs) spent_us += replay_us(*g) * g->calls;
  }
  static void finish(TimedRun& t, std::vector<double> us) {
    std::sort(us.begin(), us.end());
    t.median_us = us[us.size() / 2];
    t.min_us = us.front();
    t.reps = int(us.size());
  }
  // Y[M][N] (row-major) = X[M][K] . W[N][K]^T, the 16-bit output of a framework's matmul
  void dense_call(const HostProblem& p, int i) {
    const cudaDataType_t dt = act_ == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float alpha = 1.f, beta = 0.f;
    const cublasStatus_t st = cublasGemmEx(
        cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(p.N), int(p.M), int(p.K), &alpha, dense_[i], dt,
        int(p.K), x_, dt, int(p.K), &beta, y16_, dt, int(p.N), CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    MIXQ_CHECK(st == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, "cublasGemmEx: status ", int(st));
  }
  void release_dense() {
    for (void* p : dense_) cudaFree(p);
    dense_.clear();
    dense_for_ = nullptr;
    dense_n_ = dense_k_ = 0;
  }

  int device_;
  DType act_;
  Tuning tuning_;
  std::string force_kernel_;
  bool chain_ = false;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ev_start_ = nullptr, ev_stop_ = nullptr;  // a timed replay's bounds
  cublasHandle_t cublas_ = nullptr;
  ReadCeiling ceiling_;
  std::map<int64_t, double> plain_reads_;  // plain_read_us by bytes
  std::vector<PreparedWeight> prepared_;
  const QuantizedWeight* prepared_for_ = nullptr;
  ActQuant prepared_act_ = ActQuant::None;
  std::vector<void*> dense_;
  const float* dense_for_ = nullptr;
  int64_t dense_n_ = 0, dense_k_ = 0;  // the shape of dense_ (kept past release(): pairing)
  void *x_ = nullptr, *y_ = nullptr, *y16_ = nullptr;
  size_t x_cap_ = 0, y_cap_ = 0, y16_cap_ = 0;
};

}  // namespace

std::unique_ptr<BenchDriver> make_cuda_bench_driver(const DriverConfig& cfg) {
  if (!cuda_available()) return nullptr;
  return std::make_unique<CudaBenchDriver>(cfg);
}

}  // namespace mixq::bench

#endif  // MIXQ_WITH_CUDA
