// The routing helpers on the host (validated by core/moe_routing.cpp and core/moe_mlp.cpp): the
// gather, the weighted scatter-add and the MLP's act(gate) * up, rows or tokens split over the
// CPU threads (ExecContext::num_threads). Each output element is computed by one thread in the
// order of the single-threaded loop, so the results do not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <functional>

#include "core/float_elements.hpp"
#include "core/moe_prepared.hpp"
#include "cpu/thread_pool.hpp"

namespace mixq {

namespace {

// body(lo, hi) over [0, n) in up to 4 ranges a thread of at least `min_items` items each (one
// range, on the calling thread, where the work is too small to share).
void for_ranges(const ExecContext& ctx, int64_t n, int64_t min_items,
                const std::function<void(int64_t, int64_t)>& body) {
  const int threads = cpu::resolve_num_threads(ctx.num_threads);
  const int64_t ranges = std::min<int64_t>(int64_t(threads) * 4, n / std::max<int64_t>(min_items, 1));
  if (threads <= 1 || ranges <= 1) {
    if (n > 0) body(0, n);
    return;
  }
  const int64_t per = (n + ranges - 1) / ranges;
  cpu::parallel_for(threads, ranges, [&](int64_t r) {
    const int64_t lo = r * per, hi = std::min(n, lo + per);
    if (lo < hi) body(lo, hi);
  });
}

// about this much work (bytes copied, or additions) per range before a range is worth handing to
// the pool: waking its threads costs tens of microseconds on a small VM, as much as a decode
// step's routing (Qwen3-30B-A3B one token: 8 rows)
constexpr int64_t kMinRangeWork = 128 * 1024;

int64_t min_items_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kMinRangeWork / std::max<int64_t>(work_per_item, 1));
}

}  // namespace

void moe_gather_host(const TensorView& x, const TensorView& sorted_pairs, int64_t k,
                     const TensorView& xs, const ExecContext& ctx) {
  const int32_t* sp = sorted_pairs.ptr<const int32_t>();
  const int64_t R = xs.shape[0], eb = dtype_bytes(x.dtype, 1), row_bytes = x.shape[1] * eb;
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(xs.data);
  for_ranges(ctx, R, min_items_for(row_bytes), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      std::memcpy(dst + p * xs.ld() * eb, src + (sp[p] / k) * x.ld() * eb, size_t(row_bytes));
  });
}

void moe_scatter_add_host(const TensorView& ys, const TensorView& pair_position,
                          const TensorView& w, const TensorView& y, bool accumulate,
                          const ExecContext& ctx) {
  const int32_t* pos = pair_position.ptr<const int32_t>();
  const float* wt = w.ptr<const float>();
  const int64_t T = w.shape[0], k = w.shape[1], N = ys.shape[1];
  // Columns in pieces of kPiece sums held in a local array: the k rows are added one after the
  // other over the piece (for f32 ys, the MLP's, a loop the compiler vectorizes), each output still
  // summed in the order j = 0 .. k-1 (the per-element type switch cost ~1.6 ns an addition).
  constexpr int64_t kPiece = 256;
  const bool ys_f32 = ys.dtype == DType::F32;
  for_ranges(ctx, T, min_items_for(N * k), [&](int64_t lo, int64_t hi) {
    float acc[kPiece];
    for (int64_t t = lo; t < hi; ++t)
      for (int64_t n0 = 0; n0 < N; n0 += kPiece) {
        const int64_t nn = std::min(kPiece, N - n0);
        for (int64_t n = 0; n < nn; ++n)
          acc[n] = accumulate ? load_f32_elem(y.data, y.dtype, t * y.ld() + n0 + n) : 0.f;
        for (int64_t j = 0; j < k; ++j) {
          const float wj = wt[t * k + j];
          const int64_t row = pos[t * k + j] * ys.ld() + n0;
          if (ys_f32) {
            const float* src = ys.ptr<const float>() + row;
            for (int64_t n = 0; n < nn; ++n) acc[n] += wj * src[n];
          } else {
            for (int64_t n = 0; n < nn; ++n) acc[n] += wj * load_f32_elem(ys.data, ys.dtype, row + n);
          }
        }
        for (int64_t n = 0; n < nn; ++n) store_f32_elem(y.data, y.dtype, t * y.ld() + n0 + n, acc[n]);
      }
  });
}

void moe_activation_mul_host(const TensorView& h, const TensorView& out, MoeActivation act,
                             const ExecContext& ctx) {
  const int64_t R = out.shape[0], I = out.shape[1];
  for_ranges(ctx, R, min_items_for(I * 8), [&](int64_t lo, int64_t hi) {  // ~8 flops an exp
    for (int64_t r = lo; r < hi; ++r)
      for (int64_t i = 0; i < I; ++i) {
        const float g = load_f32_elem(h.data, h.dtype, r * h.ld() + i);
        const float u = load_f32_elem(h.data, h.dtype, r * h.ld() + I + i);
        store_f32_elem(out.data, out.dtype, r * out.ld() + i, moe_activation_f32(act, g) * u);
      }
  });
}

}  // namespace mixq
