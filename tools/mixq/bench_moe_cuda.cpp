// The CUDA driver of `mixq bench --op moe`: the grouped GEMMs and moe_mlp on the CUDA backend, and
// the cuBLAS baseline (one BF16 / F16 GEMM per active expert for gate+up, one for down, over the
// same routing), all on one stream of this process. Each figure is the median of per-call event
// timings, the L2 flushed (a memset of twice its size) before every timed call: the experts a
// small batch touches would otherwise stay in L2 between calls.
#if defined(MIXQ_WITH_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>
#include <utility>

#include "bench_moe.hpp"
#include "mixq/device.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::bench {

namespace {

#define MOE_CUDA(expr)                                                                          \
  do {                                                                                          \
    const cudaError_t e_ = (expr);                                                              \
    MIXQ_CHECK(e_ == cudaSuccess, ErrorCode::Cuda, #expr ": ", cudaGetErrorString(e_));         \
  } while (0)

// A device buffer freed with its owner.
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { MOE_CUDA(cudaMalloc(&p, std::max<size_t>(n, 256))); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p, o.p);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
};

std::vector<uint16_t> to_16bit(const float* x, size_t n, DType t) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = t == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
  return out;
}

DeviceBuffer upload(const void* host, size_t bytes) {
  DeviceBuffer d(bytes);
  MOE_CUDA(cudaMemcpy(d.p, host, bytes, cudaMemcpyHostToDevice));
  return d;
}

class CudaMoeDriver final : public MoeBenchDriver {
 public:
  CudaMoeDriver(int device, DType act, const Tuning& tuning) : device_(device), act_(act), tuning_(tuning) {
    MOE_CUDA(cudaSetDevice(device_));
    MOE_CUDA(cudaGetDeviceProperties(&prop_, device_));
    MOE_CUDA(cudaStreamCreate(&stream_));
    MOE_CUDA(cudaEventCreate(&start_));
    MOE_CUDA(cudaEventCreate(&stop_));
    MIXQ_CHECK(cublasCreate(&cublas_) == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, "cublasCreate");
    cublasSetStream(cublas_, stream_);
    flush_ = DeviceBuffer(static_cast<size_t>(std::max(prop_.l2CacheSize, 1 << 20)) * 2);
    ceiling_ = measure_read_ceiling(size_t(1) << 30, device_);
  }
  ~CudaMoeDriver() override {
    cublasDestroy(cublas_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  std::string backend() const override { return "cuda"; }
  std::string device() const override {
    std::ostringstream s;
    s << prop_.name << " (sm_" << prop_.major << prop_.minor << "), " << dtype_name(act_)
      << " activations";
    return s.str();
  }
  std::string baseline_name() const override {
    return std::string("cuBLAS ") + (act_ == DType::F16 ? "F16" : "BF16") +
           " GEMMs per active expert (cublasGemmEx, f32 accumulation)";
  }
  DType activation_dtype() const override { return act_; }
  std::vector<std::string> default_schemes() const override {
    return {"w4g128", "w8g128", "fp8b128"};
  }
  double read_ceiling_gb_s() const override { return ceiling_.tb_per_s * 1e3; }

  MoeTimes run(const MoeModel& m, const std::vector<QuantizedWeight>& gate_up,
               const std::vector<QuantizedWeight>& down, ActQuant act,
               const std::vector<std::vector<float>>& dense_gu,
               const std::vector<std::vector<float>>& dense_down, const MoeProblem& p,
               const TimingPolicy& policy) override {
    MoeTimes t;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t E = m.experts, H = m.hidden, I = m.intermediate, T = p.T, k = p.topk;
    const int64_t R = T * k, eb = 2;
    if (!prepared_ || prepared_for_ != &gate_up) {  // the stacks of one scheme serve every batch
      PrepareOptions o;
      o.backend = BackendKind::CUDA;
      o.device = device_;
      o.act = act;
      o.tuning = tuning_;
      gu_ = prepare_experts(gate_up, o);
      dn_ = prepare_experts(down, o);
      prepared_ = true;
      prepared_for_ = &gate_up;
    }
    if (dense_for_ != &dense_gu || dense_dims_ != std::make_pair(H, I)) {  // the baseline's 16-bit copies, once per model
      dgu_.clear();
      ddn_.clear();
      for (size_t c = 0; c < dense_gu.size(); ++c) {
        const auto a = to_16bit(dense_gu[c].data(), dense_gu[c].size(), act_);
        const auto b = to_16bit(dense_down[c].data(), dense_down[c].size(), act_);
        dgu_.push_back(upload(a.data(), a.size() * 2));
        ddn_.push_back(upload(b.data(), b.size() * 2));
      }
      dense_for_ = &dense_gu;
      dense_dims_ = {H, I};
    }
    const auto xh = to_16bit(p.x, T * H, act_);
    DeviceBuffer x = upload(xh.data(), xh.size() * 2);
    DeviceBuffer ids = upload(p.ids, R * 4), w = upload(p.weights, R * 4);
    DeviceBuffer offsets(4 * (E + 1)), sorted(4 * R), position(4 * R);
    DeviceBuffer xs(R * H * eb), h(R * 2 * I * eb), a(R * I * eb), ys(R * H * eb), y(T * H * eb);
    MOE_CUDA(cudaMemsetAsync(a.p, 0, a.bytes, stream_));
    DeviceBuffer rws(moe_route_workspace_size(E));
    DeviceBuffer gws(std::max(grouped_linear_workspace_size(gu_, R),
                              grouped_linear_workspace_size(dn_, R)));
    DeviceBuffer mws(moe_mlp_workspace_size(gu_, dn_, T, k, act_));
    const auto view = [&](const DeviceBuffer& b, DType dt, std::initializer_list<int64_t> dims) {
      return TensorView(b.p, dt, dims, Device::CUDA, device_);
    };
    ExecContext ctx;
    ctx.stream = stream_;
    ExecContext rctx = ctx;
    rctx.workspace = rws.p, rctx.workspace_bytes = rws.bytes;
    moe_route(view(ids, DType::I32, {T, k}), E, view(offsets, DType::I32, {E + 1}),
              view(sorted, DType::I32, {R}), view(position, DType::I32, {R}), {}, rctx);
    moe_gather(view(x, act_, {T, H}), view(sorted, DType::I32, {R}), k, view(xs, act_, {R, H}),
               ctx);
    MOE_CUDA(cudaStreamSynchronize(stream_));  // set-up, outside the timed calls
    t.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const MoeRows rows = MoeRows::contiguous(view(offsets, DType::I32, {E + 1}));
    ExecContext gctx = ctx;
    gctx.workspace = gws.p, gctx.workspace_bytes = gws.bytes;
    ExecContext mctx = ctx;
    mctx.workspace = mws.p, mctx.workspace_bytes = mws.bytes;
    const auto timer = [&](const std::function<void(int)>& call, int i) {
      MOE_CUDA(cudaMemsetAsync(flush_.p, i & 0xff, flush_.bytes, stream_));
      MOE_CUDA(cudaEventRecord(start_, stream_));
      call(i);
      MOE_CUDA(cudaEventRecord(stop_, stream_));
      MOE_CUDA(cudaEventSynchronize(stop_));
      float ms = 0;
      MOE_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
      return ms * 1e-3;
    };
    // untimed calls for policy.settle_s first (TimingPolicy::settle_s): the timed ones then run at
    // the clocks of sustained load, as the baseline's do (synchronised every 8 calls, so the
    // clock is the GPU's time, not the launches')
    const auto time = [&](const std::function<void(int)>& f) {
      const auto s0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 100000 && std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count() <
                                        policy.settle_s;) {
        for (int j = 0; j < 8; ++j) f(i++);
        MOE_CUDA(cudaStreamSynchronize(stream_));
      }
      return time_calls(f, timer, policy).median_us;
    };
    t.gate_up_us = time([&](int) {
      grouped_linear(view(xs, act_, {R, H}), gu_, view(h, act_, {R, 2 * I}), rows, {}, gctx);
    });
    t.down_us = time([&](int) {
      grouped_linear(view(a, act_, {R, I}), dn_, view(ys, act_, {R, H}), rows, {}, gctx);
    });
    t.mlp_us = time([&](int) {
      moe_mlp(view(x, act_, {T, H}), view(ids, DType::I32, {T, k}), view(w, DType::F32, {T, k}),
              gu_, dn_, view(y, act_, {T, H}), MoeActivation::Silu, {}, mctx);
    });
    // the same three calls in CUDA graphs: 10 x (flush, call) against 10 x flush, medians of 7
    // alternated replays (at a few tokens the launch gaps of eager calls are a third of moe_mlp)
    {
      FlushGraph flush(*this, nullptr);
      const auto graph_us = [&](const std::function<void()>& call) {
        FlushGraph g(*this, &call);
        std::vector<double> a, b;
        for (int r = 0; r < 7; ++r) {
          a.push_back(g.replay_us());
          b.push_back(flush.replay_us());
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        return std::max(0.0, a[3] - b[3]);
      };
      t.gate_up_graph_us = graph_us([&] {
        grouped_linear(view(xs, act_, {R, H}), gu_, view(h, act_, {R, 2 * I}), rows, {}, gctx);
      });
      t.down_graph_us = graph_us([&] {
        grouped_linear(view(a, act_, {R, I}), dn_, view(ys, act_, {R, H}), rows, {}, gctx);
      });
      t.mlp_graph_us = graph_us([&] {
        moe_mlp(view(x, act_, {T, H}), view(ids, DType::I32, {T, k}), view(w, DType::F32, {T, k}),
                gu_, dn_, view(y, act_, {T, H}), MoeActivation::Silu, {}, mctx);
      });
    }
    const cudaDataType_t dt = act_ == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.0f, zero = 0.0f;
    const auto gemm = [&](const void* W, const void* X, void* Y, int64_t n, int64_t N, int64_t K) {
      const cublasStatus_t s = cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(n),
                                            int(K), &one, W, dt, int(K), X, dt, int(K), &zero, Y,
                                            dt, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      MIXQ_CHECK(s == CUBLAS_STATUS_SUCCESS, ErrorCode::Cuda, "cublasGemmEx: status ", int(s));
    };
    const int64_t copies = static_cast<int64_t>(dgu_.size());
    char* xsp = static_cast<char*>(xs.p);
    char* hp = static_cast<char*>(h.p);
    char* ap = static_cast<char*>(a.p);
    char* ysp = static_cast<char*>(ys.p);
    t.baseline_us = time([&](int) {
      for (int64_t e = 0; e < E; ++e) {
        const int64_t r0 = p.offsets[e], n = p.offsets[e + 1] - r0;
        if (n == 0) continue;
        gemm(dgu_[e % copies].p, xsp + r0 * H * eb, hp + r0 * 2 * I * eb, n, 2 * I, H);
        gemm(ddn_[e % copies].p, ap + r0 * I * eb, ysp + r0 * H * eb, n, H, I);
      }
    });
    std::vector<uint16_t> yh(T * H);
    MOE_CUDA(cudaMemcpyAsync(yh.data(), y.p, yh.size() * 2, cudaMemcpyDeviceToHost, stream_));
    MOE_CUDA(cudaStreamSynchronize(stream_));
    for (int64_t i = 0; i < T * H; ++i)
      p.y[i] = act_ == DType::F16 ? f16_to_f32(yh[i]) : bf16_to_f32(yh[i]);
    t.kernel_gate_up = gu_.kernel_name(R, act_);
    t.kernel_down = dn_.kernel_name(R, act_);
    return t;
  }

  // An instantiated graph of kGraphCalls x (L2 flush memset, call), or of the flushes alone
  // (call null); one replay after capture, untimed.
  static constexpr int kGraphCalls = 10;
  class FlushGraph {
   public:
    FlushGraph(CudaMoeDriver& d, const std::function<void()>* call) : d_(d) {
      MOE_CUDA(cudaStreamBeginCapture(d_.stream_, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kGraphCalls; ++i) {
        MOE_CUDA(cudaMemsetAsync(d_.flush_.p, i & 0xff, d_.flush_.bytes, d_.stream_));
        if (call) (*call)();
      }
      MOE_CUDA(cudaStreamEndCapture(d_.stream_, &g_));
      MOE_CUDA(cudaGraphInstantiate(&ge_, g_, 0));
      MOE_CUDA(cudaGraphLaunch(ge_, d_.stream_));
      MOE_CUDA(cudaStreamSynchronize(d_.stream_));
    }
    ~FlushGraph() {
      if (ge_) cudaGraphExecDestroy(ge_);
      if (g_) cudaGraphDestroy(g_);
    }
    FlushGraph(const FlushGraph&) = delete;
    FlushGraph& operator=(const FlushGraph&) = delete;
    // us per call of one timed replay
    double replay_us() {
      MOE_CUDA(cudaEventRecord(d_.start_, d_.stream_));
      MOE_CUDA(cudaGraphLaunch(ge_, d_.stream_));
      MOE_CUDA(cudaEventRecord(d_.stop_, d_.stream_));
      MOE_CUDA(cudaEventSynchronize(d_.stop_));
      float ms = 0;
      MOE_CUDA(cudaEventElapsedTime(&ms, d_.start_, d_.stop_));
      return double(ms) * 1e3 / kGraphCalls;
    }

   private:
    CudaMoeDriver& d_;
    cudaGraph_t g_ = nullptr;
    cudaGraphExec_t ge_ = nullptr;
  };

  void release() override {
    gu_ = PreparedExperts();
    dn_ = PreparedExperts();
    prepared_ = false;
    prepared_for_ = nullptr;
  }

 private:
  int device_;
  DType act_;
  Tuning tuning_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer flush_;
  ReadCeiling ceiling_;
  PreparedExperts gu_, dn_;
  bool prepared_ = false;
  const void* prepared_for_ = nullptr;
  const void* dense_for_ = nullptr;
  std::pair<int64_t, int64_t> dense_dims_{0, 0};
  std::vector<DeviceBuffer> dgu_, ddn_;
};

}  // namespace

std::unique_ptr<MoeBenchDriver> make_cuda_moe_driver(int device, DType activation, const Tuning& tuning) {
  if (!cuda_available()) return nullptr;
  return std::make_unique<CudaMoeDriver>(device, activation, tuning);
}

}  // namespace mixq::bench

#endif  // MIXQ_WITH_CUDA
