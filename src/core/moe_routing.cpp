// Routing helpers: top-k ids -> the contiguous layout (stable counting sort by expert), the gather
// of X into it and the weighted scatter-add back. Validation and the host routing here; the host
// gather and scatter-add in src/cpu/cpu_moe_routing.cpp (threaded), CUDA in
// src/cuda/backend/moe_routing.cpp.
#include <vector>

#include "core/moe_prepared.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

void check_i32_vector(const TensorView& v, const char* fn, const char* arg, int64_t n) {
  MIXQ_CHECK_ARG(v.rank == 1 && v.dtype == DType::I32 && v.shape[0] == n && v.stride[0] == 1,
                 fn, ": ", arg, " must be a contiguous [", n, "] i32, got ", v.describe());
}

void check_float(const TensorView& v, const char* fn, const char* arg) {
  MIXQ_CHECK_ARG(v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16, fn,
                 ": ", arg, " dtype must be f32, f16 or bf16, got ", v.describe());
}

}  // namespace

size_t moe_route_workspace_size(int64_t num_experts) {
  MIXQ_CHECK_ARG(num_experts >= 1, "moe_route_workspace_size: num_experts (", num_experts,
                 ") must be >= 1");
  return cuda_available() ? moe_route_workspace_size_cuda(num_experts) : 0;
}

void moe_route(const TensorView& ids, int64_t E, const TensorView& offsets,
               const TensorView& sorted_pairs, const TensorView& pair_position,
               const TensorView& error, const ExecContext& ctx) {
  const char* fn = "moe_route";
  MIXQ_CHECK_ARG(E >= 1 && E < (int64_t(1) << 24), fn, ": num_experts (", E,
                 ") must be in [1, 2^24)");
  MIXQ_CHECK_ARG(ids.rank == 2 && ids.dtype == DType::I32 && ids.stride[1] == 1 &&
                     ids.stride[0] == ids.shape[1],
                 fn, ": topk_ids must be a contiguous [T][k] i32, got ", ids.describe());
  const Device dev = ids.device;
  const int64_t T = ids.shape[0], k = ids.shape[1], R = T * k;
  MIXQ_CHECK_ARG(k >= 1, fn, ": topk_ids has k = ", k, " experts per token; it needs >= 1");
  MIXQ_CHECK_ARG(R < (int64_t(1) << 31), fn, ": T * k (", R, ") exceeds i32 positions");
  check_view(offsets, "offsets", 1, dev);
  check_view(sorted_pairs, "sorted_pairs", 1, dev);
  check_view(pair_position, "pair_position", 1, dev);
  check_i32_vector(offsets, fn, "offsets", E + 1);
  check_i32_vector(sorted_pairs, fn, "sorted_pairs", R);
  check_i32_vector(pair_position, fn, "pair_position", R);
  if (!error.empty()) {
    check_view(error, "error", 1, dev);
    MIXQ_CHECK_ARG(error.dtype == DType::I32, fn, ": error must be a [1] i32, got ",
                   error.describe());
  }
  if (dev == Device::CUDA)
    return moe_route_cuda(ids, E, offsets, sorted_pairs, pair_position, error, ctx);

  const int32_t* id = ids.ptr<const int32_t>();
  for (int64_t i = 0; i < R; ++i)
    MIXQ_CHECK_ARG(id[i] >= 0 && id[i] < E, fn, ": topk_ids[", i / k, "][", i % k, "] (", id[i],
                   ") is not an expert in [0, ", E, ")");
  int32_t* off = offsets.ptr<int32_t>();
  std::vector<int32_t> cursor(size_t(E) + 1, 0);
  for (int64_t i = 0; i < R; ++i) ++cursor[size_t(id[i]) + 1];
  for (int64_t e = 0; e < E; ++e) cursor[size_t(e) + 1] += cursor[size_t(e)];
  for (int64_t e = 0; e <= E; ++e) off[e] = cursor[size_t(e)];
  int32_t* sorted = sorted_pairs.ptr<int32_t>();
  int32_t* pos = pair_position.ptr<int32_t>();
  for (int64_t i = 0; i < R; ++i) {
    const int32_t p = cursor[size_t(id[i])]++;
    sorted[p] = int32_t(i);
    pos[i] = p;
  }
}

void moe_gather(const TensorView& x, const TensorView& sorted_pairs, int64_t k,
                const TensorView& xs, const ExecContext& ctx) {
  const char* fn = "moe_gather";
  const Device dev = x.device;
  check_view(x, "x", 2, dev);
  check_view(xs, "xs", 2, dev);
  check_view(sorted_pairs, "sorted_pairs", 1, dev);
  check_rows_contiguous(x, "x");
  check_rows_contiguous(xs, "xs");
  check_float(x, fn, "x");
  MIXQ_CHECK_ARG(xs.dtype == x.dtype, fn, ": xs (", xs.describe(), ") must have x's dtype (",
                 x.describe(), ")");
  MIXQ_CHECK_ARG(k >= 1, fn, ": topk (", k, ") must be >= 1");
  const int64_t T = x.shape[0], R = xs.shape[0];
  MIXQ_CHECK_ARG(R == T * k && xs.shape[1] == x.shape[1], fn, ": xs is ", xs.describe(),
                 ", expected [T * topk = ", T * k, ", ", x.shape[1], "]");
  check_i32_vector(sorted_pairs, fn, "sorted_pairs", R);
  check_apart(fn, xs, "xs", x, "x");
  check_apart(fn, xs, "xs", sorted_pairs, "sorted_pairs");
  if (dev == Device::CUDA) return moe_gather_cuda(x, sorted_pairs, k, xs, ctx);
  const int32_t* sp = sorted_pairs.ptr<const int32_t>();
  for (int64_t p = 0; p < R; ++p)  // all checked before any row is written
    MIXQ_CHECK_ARG(sp[p] >= 0 && sp[p] < R, fn, ": sorted_pairs[", p, "] (", sp[p],
                   ") is not a pair in [0, ", R, ")");
  moe_gather_host(x, sorted_pairs, k, xs, ctx);
}

void moe_scatter_add(const TensorView& ys, const TensorView& pair_position,
                     const TensorView& w, const TensorView& y, bool accumulate,
                     const ExecContext& ctx) {
  const char* fn = "moe_scatter_add";
  const Device dev = ys.device;
  check_view(ys, "ys", 2, dev);
  check_view(y, "y", 2, dev);
  check_view(w, "topk_weights", 2, dev);
  check_view(pair_position, "pair_position", 1, dev);
  check_rows_contiguous(ys, "ys");
  check_rows_contiguous(y, "y");
  check_float(ys, fn, "ys");
  check_float(y, fn, "y");
  MIXQ_CHECK_ARG(w.dtype == DType::F32 && w.stride[1] == 1 && w.stride[0] == w.shape[1], fn,
                 ": topk_weights must be a contiguous [T][k] f32, got ", w.describe());
  const int64_t T = w.shape[0], k = w.shape[1], R = T * k, N = ys.shape[1];
  MIXQ_CHECK_ARG(ys.shape[0] == R, fn, ": ys has ", ys.shape[0], " rows, expected T * k = ", T,
                 " * ", k, " = ", R, " (from topk_weights)");
  MIXQ_CHECK_ARG(y.shape[0] == T && y.shape[1] == N, fn, ": y is ", y.describe(), ", expected [",
                 T, ", ", N, "]");
  check_i32_vector(pair_position, fn, "pair_position", R);
  check_apart(fn, y, "y", ys, "ys");
  check_apart(fn, y, "y", pair_position, "pair_position");
  check_apart(fn, y, "y", w, "topk_weights");
  if (dev == Device::CUDA) return moe_scatter_add_cuda(ys, pair_position, w, y, accumulate, ctx);
  const int32_t* pos = pair_position.ptr<const int32_t>();
  for (int64_t i = 0; i < R; ++i)
    MIXQ_CHECK_ARG(pos[i] >= 0 && pos[i] < R, fn, ": pair_position[", i, "] (", pos[i],
                   ") is not a position in [0, ", R, ")");
  moe_scatter_add_host(ys, pair_position, w, y, accumulate, ctx);
}

}  // namespace mixq
