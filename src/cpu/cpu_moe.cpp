// Stacked experts on the host backends (CPU, Reference): a grouped call is each expert's own
// linear() on its rows, so one expert gives the bits of linear() on it. Many active experts run
// one per thread (each single-threaded: their rows are few, and one pool region at a time is
// cheaper than one per expert); few active experts run in turn, each with every thread.
#include <algorithm>
#include <vector>

#include "core/moe_prepared.hpp"
#include "cpu/thread_pool.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

class HostExperts final : public PreparedExpertsImpl {
 public:
  HostExperts(std::vector<PreparedWeight> w, const PrepareOptions& o) {
    adopt(std::move(w), o, o.backend);
  }

  std::string kernel_name(int64_t rows, std::optional<DType> activation) const override {
    const int64_t m = std::max<int64_t>(rows, 1);
    return "grouped<" + (activation ? experts[0].kernel_name(m, *activation) : experts[0].kernel_name(m)) + ">";
  }
  size_t workspace_size(int64_t) const override { return 0; }  // allocated per call

  void grouped_linear(const GroupedCall& c, const Epilogue& ep,
                      const ExecContext& ctx) const override {
    struct Range {
      int64_t e, r0, rows;
    };
    std::vector<Range> active;
    for (int64_t e = 0; e < E; ++e) {
      int64_t r0, n;
      if (c.rows.layout == MoeRows::Layout::Contiguous) {
        const int32_t* o = c.rows.offsets.ptr<const int32_t>();
        r0 = o[e];
        n = o[e + 1] - o[e];
      } else {
        r0 = e * c.rows.max_tokens;
        n = c.rows.counts.ptr<const int32_t>()[e];
      }
      if (n > 0) active.push_back({e, r0, n});
    }
    const int threads = cpu::resolve_num_threads(ctx.num_threads);
    const bool per_thread = threads > 1 && int64_t(active.size()) >= threads;
    ExecContext inner;  // the experts' linear() allocates its own staging
    inner.num_threads = per_thread ? 1 : threads;
    auto run = [&](const Range& r) {
      const size_t xb = size_t(dtype_bytes(c.x.dtype, 1)), yb = size_t(dtype_bytes(c.y.dtype, 1));
      const TensorView x = TensorView::strided(
          static_cast<char*>(c.x.data) + size_t(r.r0 * c.x.ld()) * xb, c.x.dtype, {r.rows, K},
          {c.x.ld(), 1});
      const TensorView y = TensorView::strided(
          static_cast<char*>(c.y.data) + size_t(r.r0 * c.y.ld()) * yb, c.y.dtype, {r.rows, N},
          {c.y.ld(), 1});
      Epilogue e = ep;
      if (c.bias_per_expert) {
        const size_t bb = size_t(dtype_bytes(c.bias.dtype, 1));
        e.bias = TensorView(static_cast<char*>(c.bias.data) + size_t(r.e * c.bias.stride[0]) * bb,
                            c.bias.dtype, {N});
      }
      linear(x, experts[size_t(r.e)], y, e, inner);
    };
    if (per_thread) {
      cpu::parallel_for(threads, int64_t(active.size()),
                        [&](int64_t i) { run(active[size_t(i)]); });
    } else {
      for (const Range& r : active) run(r);
    }
  }
};

}  // namespace

std::shared_ptr<const PreparedExpertsImpl> prepare_experts_host(std::vector<PreparedWeight> experts,
                                                                const PrepareOptions& opts) {
  return std::make_shared<HostExperts>(std::move(experts), opts);
}

}  // namespace mixq
