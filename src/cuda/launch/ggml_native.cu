// Launchers of the native GGUF kernels: the activation quantizer, the dequantizer, the dispatch
// over types of the q8 GEMV, the q8 tensor-core kernel (instances in ggml_gemv_*.cu) and the
// dequantizing tensor-core kernels (staged and few-token, ggml_hmma_*.cu), the split-K finalize
// pass, the plans.
#include <algorithm>

#include "cuda/kernels/ggml/ggml_hmma.cuh"
#include "cuda/kernels/ggml/ggml_mma.cuh"
#include "cuda/kernels/ggml/ggml_stream.cuh"
#include "cuda/launch/ggml_native.hpp"
#include "cuda/runtime/check.hpp"
#include "cuda/runtime/launch_config.hpp"

namespace mixq::cuda::ggml {

// Every ggml type with native kernels, for the switches below that pick a type's instantiation.
#define MIXQ_GGML_NATIVE_TYPES(X) \
  X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(IQ4_NL) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K) X(IQ4_XS)

template <GType T>
void launch_gemv_type(const GemvParams& p, int sm_count, cudaStream_t stream);  // ggml_gemv_launch.cuh
template <GType T>
void launch_mma_type(const MmaParams& p, cudaStream_t stream);
template <GType T>
void launch_hmma_type(const HmmaParams& p, int x_type, cudaStream_t stream);  // ggml_hmma_*.cu
template <GType T>
void launch_stream_type(const HmmaParams& p, int x_type, cudaStream_t stream);  // ggml_hmma_*.cu

// y[m][n] = clamp(sum over splits of partial[z][m][n] + bias[n]), in the splits' order.
namespace {
__global__ void __launch_bounds__(256) finalize_kernel(const MmaParams p) {
  grid_dependency_wait();  // the partials are the tensor-core kernel's (a no-op without PDL)
  const int64_t total = int64_t(p.M) * p.N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / p.N, n = i - m * p.N;
    float y = 0.f;
    for (int z = 0; z < p.splits; ++z) y += p.partial[int64_t(z) * total + i];
    store_output(p, m, n, y);
  }
}

void launch_finalize(const MmaParams& p, cudaStream_t stream) {
  const int64_t total = int64_t(p.M) * p.N;
  const dim3 grid(unsigned(std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, 65535))));
  WoLaunchConfig lc(grid, 256, 0, stream, p.pdl);
  MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, finalize_kernel, p));
}

// After a dequantizing kernel with K split: the finalize pass, waiting (PDL) for that grid, which
// allows it once its loop is done.
void finalize_dequantizing(const MmaParams& p, cudaStream_t stream) {
  if (!p.partial) return;
  MmaParams f = p;
  f.pdl = true;
  launch_finalize(f, stream);
}

// Steps a K split piece of the dequantizing kernels' plans: of the splits 1..max_s of `steps` into
// whole pieces, the one whose CTAs (tiles x pieces that have steps) fill the last of their waves
// over `slots` best (ties within 0.02: fewer splits, fewer partials).
int64_t fullest_split_steps(int64_t steps, int64_t tiles, int64_t slots, int64_t max_s) {
  int64_t best = 1;
  double best_fill = 0;
  for (int64_t s = 1; s <= max_s; ++s) {
    const int64_t per = (steps + s - 1) / s;
    const int64_t used = (steps + per - 1) / per;  // splits that have steps
    const int64_t ctas = tiles * used, waves = (ctas + slots - 1) / slots;
    const double fill = double(ctas) / double(waves * slots);
    if (fill > best_fill + 0.02) {
      best_fill = fill;
      best = s;
    }
  }
  return (steps + best - 1) / best;
}
}  // namespace

int mma_token_tiles(int M) { return M <= 8 ? 1 : M <= 16 ? 2 : M <= 32 ? 4 : 8; }

MmaSplit mma_split(GType t, int M, int64_t N, int64_t K, int sm_count) {
  const int64_t step = mma_step_chunks(t);
  const int64_t chunks = K / 32, steps = (chunks + step - 1) / step;
  const int64_t groups = (q8_groups(M) + mma_token_tiles(M) - 1) / mma_token_tiles(M);
  const int64_t tiles = ((N + kMmaRows - 1) / kMmaRows) * groups;
  const int64_t want = std::max<int64_t>(1, (4 * int64_t(sm_count) + tiles - 1) / tiles);
  const int64_t s = std::min<int64_t>(want, std::max<int64_t>(1, steps / 3));
  MmaSplit r;
  r.split_chunks = (steps + s - 1) / s * step;
  r.splits = int((chunks + r.split_chunks - 1) / r.split_chunks);
  return r;
}

size_t q8_meta_offset(int64_t M, int64_t K) { return (size_t(M * K) + 255) / 256 * 256; }
size_t q8_bytes(int64_t M, int64_t K) {
  return q8_meta_offset(M, K) + (size_t(M * (K / 32)) * 16 + 255) / 256 * 256;
}

int gemv_token_tile(int M) {
  if (M <= 4) return M;
  if (M <= 6) return 6;
  if (M <= 8) return 8;
  if (M <= 12) return 12;
  return 16;
}

void launch_q8_gemv(GType t, const GemvParams& p, int sm_count, cudaStream_t stream) {
  switch (t) {
#define MIXQ_GGML_GEMV_CASE(T) \
  case GType::T: return launch_gemv_type<GType::T>(p, sm_count, stream);
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_GEMV_CASE)
#undef MIXQ_GGML_GEMV_CASE
  }
}

void launch_q8_mma(GType t, const MmaParams& p, cudaStream_t stream) {
  switch (t) {
#define MIXQ_GGML_MMA_CASE(T) \
  case GType::T: launch_mma_type<GType::T>(p, stream); break;
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_MMA_CASE)
#undef MIXQ_GGML_MMA_CASE
  }
  if (p.partial) launch_finalize(p, stream);
}

void launch_hmma(GType t, const HmmaParams& p, int x_type, cudaStream_t stream) {
  switch (t) {
#define MIXQ_GGML_HMMA_CASE(T) \
  case GType::T: launch_hmma_type<GType::T>(p, x_type, stream); break;
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_HMMA_CASE)
#undef MIXQ_GGML_HMMA_CASE
  }
  finalize_dequantizing(p, stream);
}

void launch_stream(GType t, const HmmaParams& p, int x_type, cudaStream_t stream) {
  switch (t) {
#define MIXQ_GGML_STREAM_CASE(T) \
  case GType::T: launch_stream_type<GType::T>(p, x_type, stream); break;
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_STREAM_CASE)
#undef MIXQ_GGML_STREAM_CASE
  }
  finalize_dequantizing(p, stream);
}

// The split of the fullest last wave, as hmma_plan, over 16-row tiles (groups of four chunks).
StreamPlan stream_plan(GType t, int64_t N, int64_t K, int sm_count) {
  const int64_t chunks = K / 32, groups = (chunks + kStreamGroup - 1) / kStreamGroup;
  const int64_t tiles = (N + 15) / 16;
  const int64_t slots = int64_t(sm_count) * stream_ctas_per_sm(t);
  const int64_t max_s = std::max<int64_t>(1, std::min<int64_t>(16, groups / (2 * kStreamWarps)));
  StreamPlan r;
  r.split_chunks = fullest_split_steps(groups, tiles, slots, max_s) * kStreamGroup;
  r.splits = int((chunks + r.split_chunks - 1) / r.split_chunks);
  return r;
}

namespace {
template <GType T, int TN>
int hmma_smem_bytes() { return HmmaTile<T, TN>::kSmemBytes; }

template <int TN>
int hmma_smem(GType t) {
  switch (t) {
#define MIXQ_GGML_SMEM_CASE(T) \
  case GType::T: return hmma_smem_bytes<GType::T, TN>();
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_SMEM_CASE)
#undef MIXQ_GGML_SMEM_CASE
  }
  return kHmmaOneCtaBytes;
}
}  // namespace

int hmma_smem_bytes(GType t, int token_tile) {
  return token_tile == 64 ? hmma_smem<64>(t) : token_tile == 32 ? hmma_smem<32>(t) : hmma_smem<16>(t);
}

HmmaPlan hmma_plan(GType t, int M, int64_t N, int64_t K, int sm_count) {
  HmmaPlan r;
  r.token_tile = hmma_token_tile(M);
  const int smem = hmma_smem_bytes(t, r.token_tile);
  const int64_t slots = int64_t(sm_count) * (smem <= kHmmaTwoCtaBytes ? 2 : 1);
  const int64_t chunks = K / 32, steps = (chunks + kHmmaStep - 1) / kHmmaStep;
  const int64_t tiles = ((N + kHmmaRows - 1) / kHmmaRows) * ((M + r.token_tile - 1) / r.token_tile);
  // each split at least three steps (the ring's depth)
  const int64_t max_s = std::max<int64_t>(1, std::min<int64_t>(8, steps / 3));
  r.split_chunks = fullest_split_steps(steps, tiles, slots, max_s) * kHmmaStep;
  r.splits = int((chunks + r.split_chunks - 1) / r.split_chunks);
  return r;
}

void launch_quantize_x(const void* x, int x_type, int64_t ldx, int M, int64_t K, const GQ8& out,
                       int sm_count, bool pdl, cudaStream_t stream) {
  const int64_t warps = int64_t(M) * (K / 32);
  const int64_t blocks = std::min<int64_t>((warps + 7) / 8, int64_t(sm_count) * 16);
  const dim3 grid(unsigned(std::max<int64_t>(blocks, 1)));
  WoLaunchConfig lc(grid, 256, 0, stream, pdl);
  switch (x_type) {
    case 0: MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, quantize_x_kernel<half>, static_cast<const half*>(x), ldx, M, K, out)); break;
    case 1: MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, quantize_x_kernel<__nv_bfloat16>, static_cast<const __nv_bfloat16*>(x), ldx, M, K, out)); break;
    default: MIXQ_CUDA_CHECK(cudaLaunchKernelEx(&lc.cfg, quantize_x_kernel<float>, static_cast<const float*>(x), ldx, M, K, out)); break;
  }
}

namespace {
template <GType T>
void dequant_type(const GPlanes& w, int64_t n0, int64_t rows, int64_t K, int out_type, void* out,
                  int64_t ld, int sm_count, cudaStream_t stream) {
  const int64_t total = rows * (K / 32);
  const dim3 grid(unsigned(std::max<int64_t>(std::min<int64_t>((total + 255) / 256, int64_t(sm_count) * 32), 1)));
  switch (out_type) {
    case 0: dequant_kernel<T, half><<<grid, 256, 0, stream>>>(w, n0, rows, K, static_cast<half*>(out), ld); break;
    case 1: dequant_kernel<T, __nv_bfloat16><<<grid, 256, 0, stream>>>(w, n0, rows, K, static_cast<__nv_bfloat16*>(out), ld); break;
    default: dequant_kernel<T, float><<<grid, 256, 0, stream>>>(w, n0, rows, K, static_cast<float*>(out), ld); break;
  }
  MIXQ_CUDA_CHECK(cudaGetLastError());
}
}  // namespace

void launch_dequant(GType t, const GPlanes& w, int64_t n0, int64_t rows, int64_t K, int out_type,
                    void* out, int64_t ld, int sm_count, cudaStream_t stream) {
  switch (t) {
#define MIXQ_GGML_DEQUANT_CASE(T) \
  case GType::T: return dequant_type<GType::T>(w, n0, rows, K, out_type, out, ld, sm_count, stream);
    MIXQ_GGML_NATIVE_TYPES(MIXQ_GGML_DEQUANT_CASE)
#undef MIXQ_GGML_DEQUANT_CASE
  }
}

}  // namespace mixq::cuda::ggml
