// Every TP = 2, 4, 8 split, along N and along K, of the linear layers of Llama-3-8B / 70B,
// Qwen2.5-7B / 72B, Mixtral-8x7B's experts and DeepSeek-V3's dense layers, at full size, loads and
// runs on one GPU for W4 g128, GPTQ W4 g128 with act-order, W8 g128 and FP8 128x128 blocks
// (weight-only, and with FP8 activations: row splits on whole 128-column blocks). The last
// rank's shard is the one taken: where a split cuts a group or an FP8 block, it starts inside
// one. One token; eight of the shard's output rows against the float64 reference of those rows.
// Skipped (visibly) without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/shard_rows.hpp"
#include "gpu/device_checks.hpp"
#include "gpu/per_row_scales.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/reference.hpp"
#include "mixq/shard.hpp"
#include "model_layer_shapes.hpp"

using namespace mixq;

namespace {

struct Scheme {
  const char* name;
  DType code, scale;
  int64_t block_n;
  ZeroKind zero;
  bool act_order;
};
const Scheme kSchemes[] = {
    {"w4g128", DType::I4, DType::F16, 1, ZeroKind::None, false},
    {"gptq4g128 act-order", DType::U4, DType::F16, 1, ZeroKind::ZeroPoint, true},
    {"w8g128", DType::I8, DType::F16, 1, ZeroKind::None, false},
    {"fp8b128", DType::F8E4M3, DType::F32, 128, ZeroKind::None, false},
};

// xorshift64: full-size weights are hundreds of megabytes, filled 8 bytes at a time
struct Bits {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// A random global weight of the scheme: codes of every value (e4m3: none of the NaN codes),
// scales in [0.01, 0.1), integer zero points, a random act-order permutation.
QuantizedWeight global_weight(const test::LayerShape& l, const Scheme& sc, uint64_t seed) {
  QuantizedWeight w;
  w.N = l.N;
  w.K = l.K;
  w.code_type = sc.code;
  w.has_scales = true;
  w.block_k = 128;
  w.block_n = sc.block_n;
  w.scale_type = sc.scale;
  w.zero_kind = sc.zero;
  w.allocate();
  Bits b{seed * 0x9E3779B97F4A7C15ull + 1};
  const uint64_t keep = sc.code == DType::F8E4M3 ? 0xF7F7F7F7F7F7F7F7ull : ~0ull;  // bit 3 off: never 0x7F
  size_t i = 0;
  for (; i + 8 <= w.codes.size(); i += 8) {
    const uint64_t v = b.next() & keep;
    std::memcpy(&w.codes[i], &v, 8);
  }
  for (; i < w.codes.size(); ++i) w.codes[i] = uint8_t(b.next() & keep);
  for (int64_t e = 0; e < w.n_scale_entries(); ++e) {
    const float s = 0.01f + 0.09f * float(b.next() >> 40) / float(1 << 24);
    if (sc.scale == DType::F32) {
      std::memcpy(&w.scales[size_t(e) * 4], &s, 4);
    } else {
      const uint16_t h = f32_to_f16(s);
      std::memcpy(&w.scales[size_t(e) * 2], &h, 2);
    }
    if (sc.zero == ZeroKind::ZeroPoint) {
      const int32_t z = int32_t(b.next() % 16);
      std::memcpy(&w.zeros[size_t(e) * 4], &z, 4);
    }
  }
  if (sc.act_order) {
    w.k_perm.resize(size_t(l.K));
    std::iota(w.k_perm.begin(), w.k_perm.end(), 0);
    std::shuffle(w.k_perm.begin(), w.k_perm.end(), std::mt19937(uint32_t(seed)));
  }
  w.validate();
  return w;
}

// Runs shard s (one token x, bf16) prepared for `act`; checks eight of its rows against the
// float64 reference. Returns the kernel that ran.
std::string run_and_check(const QuantizedWeight& s, ActQuant act, const std::string& what) {
  SCOPED_TRACE(what);
  PrepareOptions o;
  o.backend = BackendKind::CUDA;
  o.act = act;
  const PreparedWeight pw = prepare(s, o);
  std::mt19937 rng(uint32_t(s.N * 31 + s.K));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> xb(size_t(s.K));
  std::vector<float> xf(size_t(s.K));
  for (int64_t k = 0; k < s.K; ++k) {
    xb[size_t(k)] = f32_to_bf16(nd(rng));
    xf[size_t(k)] = bf16_to_f32(xb[size_t(k)]);
  }
  DeviceBuffer dx(xb.size() * 2), dy(size_t(s.N) * 4);
  dx.copy_from_host(xb.data(), xb.size() * 2);
  linear(dx.view(DType::BF16, {1, s.K}), pw, dy.view(DType::F32, {1, s.N}));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> y(size_t(s.N));
  dy.copy_to_host(y.data(), y.size() * 4);
  const float xmax = std::abs(*std::max_element(xf.begin(), xf.end(), [](float a, float b) {
    return std::abs(a) < std::abs(b);
  }));
  for (int i = 0; i < 8; ++i) {
    const int64_t n = i == 7 ? s.N - 1 : int64_t(rng() % uint32_t(s.N));
    const QuantizedWeight row = detail::shard_row_range(s, n, n + 1);
    double ref = 0;
    if (act == ActQuant::None) {
      ref::linear_weight_only(TensorView(xf.data(), DType::F32, {1, s.K}), row,
                              TensorView(&ref, DType::F64, {1, 1}), Epilogue{});
    } else {
      ref::linear_fp8_block(TensorView(xf.data(), DType::F32, {1, s.K}), test::with_row_scales(row),
                            TensorView(&ref, DType::F64, {1, 1}), Epilogue{});
    }
    // scale of the sum: max |x| times the row's sum of |w|
    double wsum = 0;
    for (int64_t k = 0; k < s.K; ++k) wsum += std::abs(double(row.dequant(0, k)));
    const double tol = (act == ActQuant::None ? 2e-3 : 3e-2) * xmax * wsum;
    EXPECT_NEAR(y[size_t(n)], ref, tol) << "row " << n << " of " << s.N << ", " << pw.kernel_name(1);
  }
  return pw.kernel_name(1);
}

}  // namespace

TEST(CudaShardShapes, EveryTpSplitOfRealLayersRuns) {
  SKIP_WITHOUT_GPU();
  const bool fp8_gemm = test::hopper();
  uint64_t seed = 1;
  for (const test::LayerShape& l : test::kModelLayers)
    for (const Scheme& sc : kSchemes) {
      const QuantizedWeight w = global_weight(l, sc, seed++);
      for (const int64_t tp : {2, 4, 8})
        for (const ShardAxis axis : {ShardAxis::Column, ShardAxis::Row}) {
          const ShardSpec spec{tp - 1, tp, axis};
          const QuantizedWeight s = shard(w, spec);
          const std::string what = std::string(l.name) + " " + sc.name + " TP " + std::to_string(tp) + " " +
                                   shard_axis_name(axis) + ": " + s.describe();
          std::printf("[ case     ] %s -> %s\n", what.c_str(), run_and_check(s, ActQuant::None, what).c_str());
          if (sc.code != DType::F8E4M3 || !fp8_gemm) continue;
          // FP8 activations pair their 128-column blocks with the weight's: row splits on whole
          // blocks (granularity 128), where there is one for every rank (not K = 512 over 8);
          // column splits anywhere
          if (axis == ShardAxis::Row && l.K / 128 < tp) continue;
          const ShardSpec whole{tp - 1, tp, axis, axis == ShardAxis::Row ? 128 : 1};
          const QuantizedWeight f = axis == ShardAxis::Row ? shard(w, whole) : s;
          std::printf("[ case     ] %s fp8 activations -> %s\n", what.c_str(),
                      run_and_check(f, ActQuant::Fp8Block, what + " fp8 activations").c_str());
        }
    }
}
