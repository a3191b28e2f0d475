// The CPU driver of `mixq bench --op moe`: mixq::moe_mlp and its grouped GEMMs on the CPU backend,
// timed by the host clock (warm caches: the experts a batch touches are read once per call, and a
// large model's experts exceed the last-level cache anyway), against the dense f32 GEMMs
// (mixq::cpu::DenseGemmF32, packed once) run expert by expert over the same routing.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "bench_moe.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/cpu.hpp"
#include "mixq/error.hpp"

namespace mixq::bench {

namespace {

TensorView host_view(const void* p, DType t, std::initializer_list<int64_t> dims) {
  return TensorView(const_cast<void*>(p), t, dims, Device::CPU, 0);
}

class CpuMoeDriver final : public MoeBenchDriver {
 public:
  CpuMoeDriver(int threads, const Tuning& tuning)
      : threads_(cpu::resolve_num_threads(threads)),
        tuning_(tuning) {}
  std::string backend() const override { return "cpu"; }
  std::string device() const override {
    return std::string("CPU (") + cpu::isa_name() + "), " + std::to_string(threads_) + " thread(s)";
  }
  std::string baseline_name() const override {
    return "dense f32 GEMMs per active expert (mixq::cpu::DenseGemmF32)";
  }
  DType activation_dtype() const override { return DType::F32; }
  std::vector<std::string> default_schemes() const override { return {"w4g128", "w8g128"}; }
  double read_ceiling_gb_s() const override { return 0; }
  int threads() const override { return threads_; }

  MoeTimes run(const MoeModel& m, const std::vector<QuantizedWeight>& gate_up,
               const std::vector<QuantizedWeight>& down, ActQuant act,
               const std::vector<std::vector<float>>& dense_gu,
               const std::vector<std::vector<float>>& dense_down, const MoeProblem& p,
               const TimingPolicy& policy) override {
    MoeTimes t;
    const auto t0 = std::chrono::steady_clock::now();
    if (prepared_for_ != &gate_up) {  // the stacks of one scheme serve every batch
      PrepareOptions o;
      o.backend = BackendKind::CPU;
      o.act = act;
      o.tuning = tuning_;
      gu_ = prepare_experts(gate_up, o);
      dn_ = prepare_experts(down, o);
      prepared_for_ = &gate_up;
    }
    const PreparedExperts& gu = gu_;
    const PreparedExperts& dn = dn_;
    const int64_t E = m.experts, H = m.hidden, I = m.intermediate, T = p.T, k = p.topk;
    const int64_t R = T * k;
    std::vector<int32_t> offsets(E + 1), sorted(R), position(R);
    ExecContext ctx;
    ctx.num_threads = threads_;
    moe_route(host_view(p.ids, DType::I32, {T, k}), E, host_view(offsets.data(), DType::I32, {E + 1}),
              host_view(sorted.data(), DType::I32, {R}), host_view(position.data(), DType::I32, {R}),
              {}, ctx);
    std::vector<float> xs(R * H), h(R * 2 * I), a(R * I), ys(R * H);
    moe_gather(host_view(p.x, DType::F32, {T, H}), host_view(sorted.data(), DType::I32, {R}), k,
               host_view(xs.data(), DType::F32, {R, H}), ctx);
    for (size_t i = 0; i < a.size(); ++i) a[i] = xs[i % xs.size()];  // any finite input
    std::vector<std::unique_ptr<cpu::DenseGemmF32>> dgu, ddn;
    for (size_t c = 0; c < dense_gu.size(); ++c) {
      dgu.push_back(std::make_unique<cpu::DenseGemmF32>(dense_gu[c].data(), 2 * I, H, threads_));
      ddn.push_back(std::make_unique<cpu::DenseGemmF32>(dense_down[c].data(), H, I, threads_));
    }
    t.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const MoeRows rows = MoeRows::contiguous(host_view(offsets.data(), DType::I32, {E + 1}));
    std::vector<uint8_t> ws(std::max(grouped_linear_workspace_size(gu, R),
                                     grouped_linear_workspace_size(dn, R)));
    ExecContext gctx = ctx;
    gctx.workspace = ws.empty() ? nullptr : ws.data();
    gctx.workspace_bytes = ws.size();
    const auto time = [&](const std::function<void(int)>& f) {
      return time_calls(f, wall_time_call, policy).median_us;
    };
    t.gate_up_us = time([&](int) {
      grouped_linear(host_view(xs.data(), DType::F32, {R, H}), gu,
                     host_view(h.data(), DType::F32, {R, 2 * I}), rows, {}, gctx);
    });
    t.down_us = time([&](int) {
      grouped_linear(host_view(a.data(), DType::F32, {R, I}), dn,
                     host_view(ys.data(), DType::F32, {R, H}), rows, {}, gctx);
    });
    // the caller's workspace, as the CUDA driver passes it (without one each call allocates its
    // intermediates, and the first touch of fresh pages cost more than the routing itself)
    std::vector<uint8_t> mws(moe_mlp_workspace_size(gu, dn, T, k, DType::F32));
    ExecContext mctx = ctx;
    mctx.workspace = mws.data();
    mctx.workspace_bytes = mws.size();
    t.mlp_us = time([&](int) {
      moe_mlp(host_view(p.x, DType::F32, {T, H}), host_view(p.ids, DType::I32, {T, k}),
              host_view(p.weights, DType::F32, {T, k}), gu, dn,
              host_view(p.y, DType::F32, {T, H}), MoeActivation::Silu, {}, mctx);
    });
    const int64_t copies = static_cast<int64_t>(dgu.size());
    t.baseline_us = time([&](int) {
      for (int64_t e = 0; e < E; ++e) {
        const int64_t r0 = offsets[e], n = offsets[e + 1] - r0;
        if (n == 0) continue;
        dgu[e % copies]->run(xs.data() + r0 * H, n, h.data() + r0 * 2 * I);
        ddn[e % copies]->run(a.data() + r0 * I, n, ys.data() + r0 * H);
      }
    });
    t.kernel_gate_up = gu.kernel_name(R);
    t.kernel_down = dn.kernel_name(R);
    return t;
  }

  void release() override {
    gu_ = PreparedExperts();
    dn_ = PreparedExperts();
    prepared_for_ = nullptr;
  }

 private:
  int threads_;
  PreparedExperts gu_, dn_;
  const void* prepared_for_ = nullptr;
  Tuning tuning_;
};

}  // namespace

std::unique_ptr<MoeBenchDriver> make_cpu_moe_driver(int threads, const Tuning& tuning) {
  return std::make_unique<CpuMoeDriver>(threads, tuning);
}

#if !defined(MIXQ_WITH_CUDA)
std::unique_ptr<MoeBenchDriver> make_cuda_moe_driver(int, DType, const Tuning&) { return nullptr; }
#endif

}  // namespace mixq::bench
