// Mixture-of-experts on CUDA against the CPU backend and float64: the grouped weight-only linear
// (contiguous and masked layouts, rows per expert 0, 1, 7, 300, E = 1, odd N / K, bias per expert),
// the routing kernels against the host routing (bit for bit: the layout is a function of the ids),
// moe_mlp, graph capture with the routing changing between replays, and the in-kernel refusal of
// bad offsets / counts / ids (error bits set, outputs untouched). Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/backend/moe_wo_view.hpp"
#include "device_checks.hpp"
#include "device_vectors.hpp"
#include "test_tuning.hpp"
#include "mixq/error.hpp"
#include "mixq/moe.hpp"
#include "moe_test_data.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"

namespace mixq {
namespace {

using moe_test::randn;

std::vector<QuantizedWeight> make_experts(const std::string& scheme, int64_t E, int64_t N,
                                          int64_t K, uint32_t seed) {
  return moe_test::make_experts(scheme, E, N, K, seed, 131u);
}

PrepareOptions on(BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  if (b == BackendKind::CPU) o.force_kernel = "cpu_f32";  // f32 activations at every M
  return o;
}

// The fused gate+up and the down experts of an MLP of `scheme`, prepared on CUDA and on the CPU
// (gate, up and down weights from seeds seed, seed + 100, seed + 200).
struct MlpExperts {
  PreparedExperts cuda_gate_up, cuda_down, cpu_gate_up, cpu_down;
};
MlpExperts mlp_experts(const std::string& scheme, int64_t E, int64_t H, int64_t I, uint32_t seed) {
  std::vector<QuantizedWeight> gu;
  const auto gate = make_experts(scheme, E, I, H, seed), up = make_experts(scheme, E, I, H, seed + 100);
  for (int64_t e = 0; e < E; ++e) gu.push_back(fuse_gate_up(gate[size_t(e)], up[size_t(e)]));
  const auto down = make_experts(scheme, E, H, I, seed + 200);
  return {prepare_experts(gu, on(BackendKind::CUDA)), prepare_experts(down, on(BackendKind::CUDA)),
          prepare_experts(gu, on(BackendKind::CPU)), prepare_experts(down, on(BackendKind::CPU))};
}

using test::download;
using test::upload;

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_bf16(v[i]);
  return o;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_to_f32(v[i]);
  return o;
}

// values of a 16-bit type t (F16 or BF16) and back
std::vector<uint16_t> to_16bit(const std::vector<float>& v, DType t) {
  if (t == DType::BF16) return to_bf16(v);
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f32_to_f16(v[i]);
  return o;
}
std::vector<float> from_16bit(const std::vector<uint16_t>& v, DType t) {
  if (t == DType::BF16) return from_bf16(v);
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = f16_to_f32(v[i]);
  return o;
}

// Contiguous layout, bf16 activations and outputs, every weight-only scheme family; CUDA against
// the CPU backend on the same bf16 activations (both f32 accumulation; one bf16 output ulp plus
// the accumulation-order difference).
TEST(CudaMoe, GroupedContiguousMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<int32_t> counts = {0, 1, 7, 0, 300, 2, 0, 33};
  const int64_t E = int64_t(counts.size());
  for (const char* scheme : {"w4g128", "w4g32asym", "w8g64asym", "w4g128zp", "fp8b128"}) {
    const int64_t N = std::string(scheme) == "fp8b128" ? 200 : 72, K = 384;
    const auto experts = make_experts(scheme, E, N, K, 5);
    const PreparedExperts gpu = prepare_experts(experts, on(BackendKind::CUDA));
    const PreparedExperts cpu = prepare_experts(experts, on(BackendKind::CPU));
    std::vector<int32_t> off(size_t(E + 1), 0);
    for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
    const int64_t R = off.back();
    const std::vector<uint16_t> xb = to_bf16(randn(size_t(R * K), 7));
    std::vector<float> bias = randn(size_t(E * N), 3);
    std::vector<uint16_t> yh(size_t(R * N));
    std::vector<float> yc(size_t(R * N));
    Epilogue ep;
    ep.bias = TensorView(bias.data(), DType::F32, {E, N});
    grouped_linear(TensorView(const_cast<uint16_t*>(xb.data()), DType::BF16, {R, K}), cpu,
                   TensorView(yc.data(), DType::F32, {R, N}),
                   MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})), ep);
    DeviceBuffer dx = upload(xb), doff = upload(off), dbias = upload(bias),
                 dy(size_t(R * N) * 2), ws(grouped_linear_workspace_size(gpu, R));
    Epilogue dep;
    dep.bias = TensorView(dbias.data(), DType::F32, {E, N}, Device::CUDA);
    ExecContext ctx;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    grouped_linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), gpu,
                   TensorView(dy.data(), DType::BF16, {R, N}, Device::CUDA),
                   MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)),
                   dep, ctx);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = from_bf16(download<uint16_t>(dy, size_t(R * N)));
    for (int64_t i = 0; i < R * N; ++i)
      ASSERT_NEAR(y[size_t(i)], yc[size_t(i)], 1e-2 * (1 + std::fabs(yc[size_t(i)])))
          << scheme << " row " << i / N << " n " << i % N;
  }
}

// W4A8 experts (4-bit weights in groups of 128, activations quantized to e4m3 per row per 128 on
// the device): the grouped wgmma kernel's e4m3 instances at token tiles 16, 64 and 128 over experts
// with 0, 1, 7, 127..129, 300 rows (contiguous layout; experts starting at odd rows), symmetric and
// zero-point codes,
// K past the last group; against the CPU backend's W4A8 (the same e4m3 codes and scales).
TEST(CudaMoe, W4A8GroupedMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {0, 1, 7, 128, 0, 300, 127, 129, 2, 0};
  const int64_t E = int64_t(counts.size());
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  for (const char* scheme : {"w4g128", "w4g128zp"}) {
    const int64_t N = 264, K = 640 + 64;
    const auto experts = make_experts(scheme, E, N, K, 23);
    PrepareOptions co;
    co.backend = BackendKind::CPU;
    co.act = ActQuant::Fp8Block;
    const PreparedExperts cpu = prepare_experts(experts, co);
    const std::vector<float> xf = randn(size_t(R * K), 9);
    std::vector<uint16_t> xb(xf.size());
    std::vector<float> xr(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) {
      xb[i] = f32_to_bf16(xf[i]);
      xr[i] = bf16_to_f32(xb[i]);
    }
    std::vector<float> yc(size_t(R * N));
    grouped_linear(TensorView(xr.data(), DType::F32, {R, K}), cpu, TensorView(yc.data(), DType::F32, {R, N}),
                   MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})));
    const DeviceBuffer doff = upload(off), dx = upload(xb);
    // and the fold's two forms: a zero point shared by every group, the rows' own zero points
    for (const char* form : {"", ",wo_a8_shared_zero=off"})
    for (const char* tile : {"16", "64", "128"}) {
      SCOPED_TRACE(std::string(scheme) + " tile " + tile + form);
      PrepareOptions go = test::with_tuning(on(BackendKind::CUDA), std::string("moe_token_tile=") + tile + form);
      go.act = ActQuant::Fp8Block;
      const PreparedExperts gpu = prepare_experts(experts, go);
      ASSERT_NE(gpu.kernel_name(R).find("sm90_wo_ws<e4m3,u4f8,mt" + std::string(tile)), std::string::npos)
          << gpu.kernel_name(R);
      DeviceBuffer dy(size_t(R * N) * 4), ws(grouped_linear_workspace_size(gpu, R));
      ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);  // NaN: rows never written show
      ASSERT_EQ(cudaMemset(ws.data(), 0x5c, ws.size()), cudaSuccess);
      ExecContext ctx;
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
      grouped_linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), gpu,
                     TensorView(dy.data(), DType::F32, {R, N}, Device::CUDA),
                     MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), Epilogue{}, ctx);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> y = download<float>(dy, size_t(R * N));
      // the FP8 MMA keeps ~14 bits within a 128-wide block; the row RMS bounds what a cancelling
      // sum keeps of its terms' rounding
      for (int64_t r = 0; r < R; ++r) {
        double rms = 0;
        for (int64_t n = 0; n < N; ++n) rms += double(yc[size_t(r * N + n)]) * yc[size_t(r * N + n)];
        rms = std::sqrt(rms / double(N));
        for (int64_t n = 0; n < N; ++n) {
          const double want = yc[size_t(r * N + n)];
          ASSERT_NEAR(y[size_t(r * N + n)], want, 4e-3 * (std::fabs(want) + rms) + 1e-30)
              << scheme << " tile " << tile << " row " << r << " n " << n;
        }
      }
    }
  }
}

// The grouped Hopper wgmma kernel, forced on small calls by its knobs: token tiles of 16 (one
// and two CTAs per SM, the f16x2 fold), 64, 128, 192 and 256 over experts with 0, 1, 7, 127..129, 300 rows (partial, exact and
// straddling tiles), f16 and bf16 activations and outputs, f32 outputs, odd N, K past the last
// 64-chunk, every weight-only code kind; against the CPU backend on the same activations.
TEST(CudaMoe, WgmmaGroupedMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {0, 1, 7, 128, 0, 300, 127, 129, 2, 0};
  const int64_t E = int64_t(counts.size());
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  struct Case {
    const char* scheme;
    int64_t N, K;
  };
  for (const Case& cs : {Case{"w4g128", 200, 384}, Case{"w4g32asym", 72, 352}, Case{"w8g64asym", 136, 320},
                         Case{"w4g128zp", 264, 256}, Case{"fp8b128", 200, 384}}) {
    const auto experts = make_experts(cs.scheme, E, cs.N, cs.K, 21);
    const PreparedExperts cpu = prepare_experts(experts, on(BackendKind::CPU));
    const std::vector<float> xf = randn(size_t(R * cs.K), 8);
    std::vector<float> bias = randn(size_t(E * cs.N), 4);
    DeviceBuffer doff = upload(off), dbias = upload(bias);
    // moe_expert_major=on: an expert's token tiles innermost (the order of experts larger than L2)
    // 192: a partly empty tile's MMAs over its rows rounded up to 64 tokens (wo_ragged_tiles)
    for (const char* tile : {"16,wo_ctas_per_sm=1", "16,wo_ctas_per_sm=2,wo_fold_half=on", "64", "128", "192",
                             "192,wo_ragged_tiles=off", "256",
                             "16,wo_ctas_per_sm=2,moe_expert_major=on", "64,moe_expert_major=on"})
      for (DType xt : {DType::F16, DType::BF16})
        for (DType yt : {xt, DType::F32}) {
          const PreparedExperts gpu = prepare_experts(
              experts, test::with_tuning(on(BackendKind::CUDA),
                                         std::string("moe_wgmma_min_rows=1,moe_token_tile=") + tile));
          ASSERT_NE(gpu.kernel_name(R).find("sm90_wo_ws"), std::string::npos) << gpu.kernel_name(R);
          // the activations both backends see: rounded to the 16-bit type
          std::vector<uint16_t> x16(xf.size());
          std::vector<float> xr(xf.size());
          for (size_t i = 0; i < xf.size(); ++i) {
            x16[i] = xt == DType::F16 ? f32_to_f16(xf[i]) : f32_to_bf16(xf[i]);
            xr[i] = xt == DType::F16 ? f16_to_f32(x16[i]) : bf16_to_f32(x16[i]);
          }
          std::vector<float> yc(size_t(R * cs.N));
          Epilogue ep;
          ep.bias = TensorView(bias.data(), DType::F32, {E, cs.N});
          grouped_linear(TensorView(xr.data(), DType::F32, {R, cs.K}), cpu,
                         TensorView(yc.data(), DType::F32, {R, cs.N}),
                         MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})), ep);
          const size_t ybytes = yt == DType::F32 ? 4 : 2;
          DeviceBuffer dx = upload(x16), dy(size_t(R * cs.N) * ybytes), ws(grouped_linear_workspace_size(gpu, R));
          ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);  // NaN: rows never written show
          Epilogue dep;
          dep.bias = TensorView(dbias.data(), DType::F32, {E, cs.N}, Device::CUDA);
          ExecContext ctx;
          ctx.workspace = ws.data();
          ctx.workspace_bytes = ws.size();
          grouped_linear(TensorView(dx.data(), xt, {R, cs.K}, Device::CUDA), gpu,
                         TensorView(dy.data(), yt, {R, cs.N}, Device::CUDA),
                         MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), dep, ctx);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<float> y(size_t(R * cs.N));
          if (yt == DType::F32) {
            y = download<float>(dy, y.size());
          } else {
            const auto h = download<uint16_t>(dy, y.size());
            for (size_t i = 0; i < y.size(); ++i) y[i] = yt == DType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
          }
          // the weights enter the MMA rounded to the activations' 16-bit type
          const double tol = xt == DType::BF16 ? 1e-2 : 3e-3;
          for (int64_t i = 0; i < R * cs.N; ++i)
            ASSERT_NEAR(y[size_t(i)], yc[size_t(i)], tol * (1 + std::fabs(yc[size_t(i)])))
                << cs.scheme << " tile " << tile << " x " << dtype_name(xt) << " y " << dtype_name(yt) << " row "
                << i / cs.N << " n " << i % cs.N;
        }
  }
}

// The ragged arms of the 128-, 192- and 256-token tiles (MMAs over a partly empty tile's first 64
// or 128 tokens) give the same bits as the MMAs over the whole tile: each output's dot product is the same sequence of k16
// MMAs either way. Counts around the arms' bounds (64 / 65, 128 / 129, 192 / 193, 300: a full tile
// then a ragged one), N not a multiple of 128, K of several groups.
TEST(CudaMoe, RaggedTilesMatchFullTilesBitForBit) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {64, 65, 1, 128, 0, 129, 191, 192, 193, 300, 63};
  const int64_t E = int64_t(counts.size());
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  for (const char* scheme : {"w4g128", "w8g64asym", "fp8b128"})
    for (const char* tile : {"128", "192", "256"}) {
      const int64_t N = 200, K = 640;
      const auto experts = make_experts(scheme, E, N, K, 33);
      const std::vector<uint16_t> x = to_bf16(randn(size_t(R * K), 9));
      DeviceBuffer dx = upload(x), doff = upload(off);
      std::vector<std::vector<float>> y;
      for (const char* ragged : {"on", "off"}) {
        const PreparedExperts gpu = prepare_experts(
            experts, test::with_tuning(on(BackendKind::CUDA),
                                       std::string("moe_wgmma_min_rows=1,moe_token_tile=") + tile +
                                           ",wo_ragged_tiles=" + ragged));
        ASSERT_NE(gpu.kernel_name(R).find(std::string("mt") + tile), std::string::npos) << gpu.kernel_name(R);
        DeviceBuffer dy(size_t(R * N) * 4), ws(grouped_linear_workspace_size(gpu, R));
        ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);  // NaN: rows never written show
        ExecContext ctx;
        ctx.workspace = ws.data();
        ctx.workspace_bytes = ws.size();
        grouped_linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), gpu,
                       TensorView(dy.data(), DType::F32, {R, N}, Device::CUDA),
                       MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), {}, ctx);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        y.push_back(download<float>(dy, size_t(R * N)));
      }
      for (int64_t i = 0; i < R * N; ++i) {
        ASSERT_FALSE(std::isnan(y[0][size_t(i)])) << scheme << " tile " << tile << " row " << i / N << " n " << i % N;
        ASSERT_EQ(y[0][size_t(i)], y[1][size_t(i)]) << scheme << " tile " << tile << " row " << i / N << " n " << i % N;
      }
    }
}

// The TMA-store epilogue of the grouped wgmma kernel (16-bit Y whose rows TMA can store) gives the
// bits of the direct stores (wo_y_rows=0): rounds wholly inside an expert are TMA-stored, a round
// that crosses an expert's last row is copied out by hand (its rows only), one past them is
// skipped. Counts around the rounds' bounds (64 tokens at 192-token tiles, 128 at 128 and 256),
// N not a multiple of 64 (the last box clipped at N), rows of Y padded (ld > N), bias per expert
// and a clamp; Y poisoned, so a row no path writes shows, and the padding must stay untouched.
TEST(CudaMoe, TmaStoreEpilogueMatchesDirectStores) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {64, 65, 1, 128, 0, 129, 191, 192, 193, 300, 63, 127, 513};
  const int64_t E = int64_t(counts.size());
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back(), N = 200, K = 640, ldy = 216;
  const std::vector<float> bias = randn(size_t(E * N), 5);
  DeviceBuffer dbias = upload(bias), doff = upload(off);
  Epilogue ep;
  ep.bias = TensorView(dbias.data(), DType::F32, {E, N}, Device::CUDA);
  ep.clamp_lo = -3.f;
  ep.clamp_hi = 3.f;
  for (const char* scheme : {"w4g128", "w8g64asym"})
    for (const DType yt : {DType::BF16, DType::F16})
      for (const char* tile : {"128", "192", "256"}) {
        const auto experts = make_experts(scheme, E, N, K, 34);
        const std::vector<uint16_t> x = to_bf16(randn(size_t(R * K), 10));
        DeviceBuffer dx = upload(x);
        std::vector<std::vector<uint16_t>> y;
        for (const char* y_rows : {"-1", "0"}) {
          const PreparedExperts gpu = prepare_experts(
              experts, test::with_tuning(on(BackendKind::CUDA), std::string("moe_wgmma_min_rows=1,moe_token_tile=") +
                                                                    tile + ",wo_y_rows=" + y_rows));
          ASSERT_NE(gpu.kernel_name(R).find(std::string("mt") + tile), std::string::npos) << gpu.kernel_name(R);
          DeviceBuffer dy(size_t(R * ldy) * 2), ws(grouped_linear_workspace_size(gpu, R));
          ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);  // NaN in both types
          ExecContext ctx;
          ctx.workspace = ws.data();
          ctx.workspace_bytes = ws.size();
          grouped_linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), gpu,
                         TensorView::strided(dy.data(), yt, {R, N}, {ldy, 1}, Device::CUDA),
                         MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), ep, ctx);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          y.push_back(download<uint16_t>(dy, size_t(R * ldy)));
        }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t n = 0; n < ldy; ++n) {
            const uint16_t v = y[0][size_t(r * ldy + n)];
            if (n >= N) {
              ASSERT_EQ(v, 0xffff) << scheme << " tile " << tile << ": padding of row " << r << " written at " << n;
              continue;
            }
            ASSERT_NE(v, 0xffff) << scheme << " tile " << tile << " row " << r << " n " << n << " not written";
            ASSERT_EQ(v, y[1][size_t(r * ldy + n)]) << scheme << " tile " << tile << " row " << r << " n " << n;
          }
      }
}

// Experts whose pairs are stored at different widths: zero-point experts whose weights are all
// non-negative have zero points 0, so their (s, -z s) pairs are exact in half; the others' are
// not. The grouped wgmma kernel reads every expert at the launch's one width, so the half experts
// get f32 copies for its descriptors (backend/moe_experts.cpp).
TEST(CudaMoe, WgmmaExpertsWithMixedPairWidths) {
  SKIP_WITHOUT_HOPPER();
  const std::vector<int32_t> counts = {70, 3, 0, 130};
  const int64_t E = int64_t(counts.size()), N = 136, K = 512;
  std::vector<int32_t> off(size_t(E + 1), 0);
  for (int64_t e = 0; e < E; ++e) off[size_t(e + 1)] = off[size_t(e)] + counts[size_t(e)];
  const int64_t R = off.back();
  std::vector<QuantizedWeight> experts;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<float> w = randn(size_t(N * K), 40 + uint32_t(e), 0.05f);
    if (e % 2 == 0)
      for (float& v : w) v = std::fabs(v);
    experts.push_back(quantize_weight(TensorView(w.data(), DType::F32, {N, K}), parse_scheme("w4g128zp")));
  }
  auto half_pairs = [&](int64_t e) {
    return !cuda::weight_only_expert_view(prepare(experts[size_t(e)], on(BackendKind::CUDA)).impl()).pair_f32;
  };
  ASSERT_TRUE(half_pairs(0) && !half_pairs(1)) << "the experts' pair widths do not differ: the test misses its case";
  const PreparedExperts cpu = prepare_experts(experts, on(BackendKind::CPU));
  const std::vector<uint16_t> x16 = [&] {
    const std::vector<float> xf = randn(size_t(R * K), 6);
    std::vector<uint16_t> h(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) h[i] = f32_to_f16(xf[i]);
    return h;
  }();
  std::vector<float> xr(x16.size()), yc(size_t(R * N));
  for (size_t i = 0; i < x16.size(); ++i) xr[i] = f16_to_f32(x16[i]);
  grouped_linear(TensorView(xr.data(), DType::F32, {R, K}), cpu, TensorView(yc.data(), DType::F32, {R, N}),
                 MoeRows::contiguous(TensorView(off.data(), DType::I32, {E + 1})));
  DeviceBuffer doff = upload(off), dx = upload(x16);
  for (const char* tile : {"16", "64", "128"}) {
    const PreparedExperts gpu = prepare_experts(
        experts, test::with_tuning(on(BackendKind::CUDA), std::string("moe_wgmma_min_rows=1,moe_token_tile=") + tile));
    ASSERT_NE(gpu.kernel_name(R).find("sm90_wo_ws"), std::string::npos) << gpu.kernel_name(R);
    DeviceBuffer dy(size_t(R * N) * 4), ws(grouped_linear_workspace_size(gpu, R));
    ASSERT_EQ(cudaMemset(dy.data(), 0xff, dy.size()), cudaSuccess);
    ExecContext ctx;
    ctx.workspace = ws.data();
    ctx.workspace_bytes = ws.size();
    grouped_linear(TensorView(dx.data(), DType::F16, {R, K}, Device::CUDA), gpu,
                   TensorView(dy.data(), DType::F32, {R, N}, Device::CUDA),
                   MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), Epilogue{}, ctx);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = download<float>(dy, size_t(R * N));
    for (int64_t i = 0; i < R * N; ++i)
      ASSERT_NEAR(y[size_t(i)], yc[size_t(i)], 3e-3 * (1 + std::fabs(yc[size_t(i)])))
          << "tile " << tile << " row " << i / N << " n " << i % N;
  }
}

// E = 1: the grouped kernel on one expert against linear() on CUDA (same f32 accumulation per
// K chunk; the streaming kernel's single split is the grouped one's, so equal up to the split-K
// order of linear()'s plan: compared to one bf16 ulp).
TEST(CudaMoe, OneExpertMatchesLinear) {
  SKIP_WITHOUT_GPU();
  const int64_t N = 136, K = 256, R = 9;
  const auto experts = make_experts("w4g128", 1, N, K, 9);
  const PreparedExperts pe = prepare_experts(experts, on(BackendKind::CUDA));
  const PreparedWeight pw = prepare(experts[0], on(BackendKind::CUDA));
  const std::vector<uint16_t> xb = to_bf16(randn(size_t(R * K), 2));
  std::vector<int32_t> off = {0, int32_t(R)};
  DeviceBuffer dx = upload(xb), doff = upload(off), a(size_t(R * N) * 4), b(size_t(R * N) * 4),
               ws(grouped_linear_workspace_size(pe, R)), lws(std::max<size_t>(linear_workspace_size(pw, R), 16));
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  grouped_linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), pe,
                 TensorView(a.data(), DType::F32, {R, N}, Device::CUDA),
                 MoeRows::contiguous(TensorView(doff.data(), DType::I32, {2}, Device::CUDA)), {}, ctx);
  ExecContext lctx;
  lctx.workspace = lws.data();
  lctx.workspace_bytes = lws.size();
  linear(TensorView(dx.data(), DType::BF16, {R, K}, Device::CUDA), pw,
         TensorView(b.data(), DType::F32, {R, N}, Device::CUDA), {}, lctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto ya = download<float>(a, size_t(R * N)), yb = download<float>(b, size_t(R * N));
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_NEAR(ya[i], yb[i], 1e-4 * (1 + std::fabs(yb[i]))) << i;
}

// The masked layout under a CUDA graph: captured once, replayed with new counts; rows past each
// count keep their sentinel; then counts over max_tokens set the error bit and write nothing.
TEST(CudaMoe, MaskedLayoutGraphReplaysWithChangingCounts) {
  SKIP_WITHOUT_GPU();
  const int64_t E = 6, max = 8, N = 64, K = 128;
  const auto experts = make_experts("w4g32", E, N, K, 13);
  const PreparedExperts gpu = prepare_experts(experts, on(BackendKind::CUDA));
  const PreparedExperts cpu = prepare_experts(experts, on(BackendKind::CPU));
  const std::vector<float> x = randn(size_t(E * max * K), 1);
  const std::vector<float> sentinel(size_t(E * max * N), -3.f);
  DeviceBuffer dx = upload(x), dy = upload(sentinel), dcounts(E * 4), derr(16),
               ws(grouped_linear_workspace_size(gpu, E * max));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ExecContext ctx = test::on_stream(s, ws);
  MoeRows rows = MoeRows::masked(TensorView(dcounts.data(), DType::I32, {E}, Device::CUDA), max);
  rows.error = TensorView(derr.data(), DType::I32, {1}, Device::CUDA);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  grouped_linear(TensorView(dx.data(), DType::F32, {E, max, K}, Device::CUDA), gpu,
                 TensorView(dy.data(), DType::F32, {E, max, N}, Device::CUDA), rows, {}, ctx);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (const std::vector<int32_t>& counts :
       {std::vector<int32_t>{1, 0, 8, 3, 0, 5}, std::vector<int32_t>{0, 0, 0, 0, 0, 1},
        std::vector<int32_t>{8, 8, 8, 8, 8, 8}}) {
    dcounts.copy_from_host(counts.data(), E * 4);
    dy.copy_from_host(sentinel.data(), sentinel.size() * 4);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    std::vector<float> yc(sentinel);
    grouped_linear(TensorView(const_cast<float*>(x.data()), DType::F32, {E, max, K}), cpu,
                   TensorView(yc.data(), DType::F32, {E, max, N}),
                   MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max));
    const auto y = download<float>(dy, sentinel.size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], yc[i], 2e-3 * (1 + std::fabs(yc[i]))) << "element " << i;
    ASSERT_EQ(download<int32_t>(derr, 1)[0], 0);
  }
  const std::vector<int32_t> bad = {1, 9, 0, 0, 0, 0};
  dcounts.copy_from_host(bad.data(), E * 4);
  dy.copy_from_host(sentinel.data(), sentinel.size() * 4);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorCounts);
  EXPECT_EQ(download<float>(dy, sentinel.size()), sentinel);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Decode shares (at most 8 rows an expert) on the streaming kernel's 8-token tile with K split over
// a cluster of blocks (forced: the plan keeps experts this small on the wgmma kernel) (a deep K of 46 chunks, 6 experts of one 200-row block: 10 splits of 5
// chunks, the last of 1): contiguous and masked layouts, every activation type, the masked one
// under a CUDA graph (a dependent launch of the schedule kernel) with counts changing between
// replays; against the CPU backend on the same activations.
TEST(CudaMoe, DecodeSharesSplitKMatchCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t E = 6, max = 8, N = 200, K = 2944;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (const char* scheme : {"w4g128", "w4g32asym", "w8g64asym", "fp8b128"}) {
    const auto experts = make_experts(scheme, E, N, K, 21);
    // the streaming kernel for every decode share (the plan keeps experts this small on the wgmma
    // kernel where it can)
    const PreparedExperts gpu =
        prepare_experts(experts, test::with_tuning(on(BackendKind::CUDA), "moe_wgmma_min_rows=9"));
    const PreparedExperts cpu = prepare_experts(experts, on(BackendKind::CPU));
    EXPECT_NE(gpu.kernel_name(5, DType::BF16).find("mt8"), std::string::npos) << gpu.kernel_name(5, DType::BF16);
    for (DType act : {DType::BF16, DType::F16, DType::F32}) {
      // the activations both backends see: rounded to the 16-bit type
      std::vector<float> x = randn(size_t(E * max * K), 4);
      for (float& v : x) v = act == DType::BF16 ? bf16_to_f32(f32_to_bf16(v)) : act == DType::F16 ? f16_to_f32(f32_to_f16(v)) : v;
      std::vector<uint16_t> x16(x.size());
      for (size_t i = 0; i < x.size(); ++i) x16[i] = act == DType::BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
      DeviceBuffer dx = act == DType::F32 ? upload(x) : upload(x16);
      const std::vector<float> sentinel(size_t(E * max * N), -3.f);
      DeviceBuffer dy = upload(sentinel), dcounts(E * 4), doff((E + 1) * 4),
                   ws(grouped_linear_workspace_size(gpu, E * max));
      ExecContext ctx;
      ctx.stream = s;
      ctx.workspace = ws.data();
      ctx.workspace_bytes = ws.size();
      // contiguous: rows 1, 0, 3, 8, 0, 2
      const std::vector<int32_t> off = {0, 1, 1, 4, 12, 12, 14};
      doff.copy_from_host(off.data(), off.size() * 4);
      const int64_t R = off.back();
      grouped_linear(TensorView(dx.data(), act, {R, K}, Device::CUDA), gpu,
                     TensorView(dy.data(), DType::F32, {R, N}, Device::CUDA),
                     MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA)), {}, ctx);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      std::vector<float> yc(size_t(R * N));
      grouped_linear(TensorView(x.data(), DType::F32, {R, K}), cpu, TensorView(yc.data(), DType::F32, {R, N}),
                     MoeRows::contiguous(TensorView(const_cast<int32_t*>(off.data()), DType::I32, {E + 1})));
      std::vector<float> y = download<float>(dy, yc.size());
      for (size_t i = 0; i < yc.size(); ++i)
        ASSERT_NEAR(y[i], yc[i], 2e-3 * (1 + std::fabs(yc[i]))) << scheme << " contiguous row " << i / N << " n " << i % N;
      // masked, captured once and replayed with new counts
      const MoeRows rows = MoeRows::masked(TensorView(dcounts.data(), DType::I32, {E}, Device::CUDA), max);
      cudaGraph_t graph;
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      grouped_linear(TensorView(dx.data(), act, {E, max, K}, Device::CUDA), gpu,
                     TensorView(dy.data(), DType::F32, {E, max, N}, Device::CUDA), rows, {}, ctx);
      ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (const std::vector<int32_t>& counts :
           {std::vector<int32_t>{1, 0, 8, 3, 0, 5}, std::vector<int32_t>{0, 0, 0, 0, 0, 1}}) {
        dcounts.copy_from_host(counts.data(), E * 4);
        dy.copy_from_host(sentinel.data(), sentinel.size() * 4);
        ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        std::vector<float> ym(sentinel);
        grouped_linear(TensorView(x.data(), DType::F32, {E, max, K}), cpu, TensorView(ym.data(), DType::F32, {E, max, N}),
                       MoeRows::masked(TensorView(const_cast<int32_t*>(counts.data()), DType::I32, {E}), max));
        y = download<float>(dy, sentinel.size());
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], ym[i], 2e-3 * (1 + std::fabs(ym[i]))) << scheme << " masked element " << i;
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
  cudaStreamDestroy(s);
}

// Routing kernels bit for bit against the host routing; then moe_mlp against the CPU backend; and
// an out-of-range id: error bit, no pair routed.
TEST(CudaMoe, RoutingAndMlpMatchHost) {
  SKIP_WITHOUT_GPU();
  const int64_t E = 16, T = 77, k = 4, H = 128, I = 96;
  std::mt19937 g(3);
  std::vector<int32_t> ids(size_t(T * k));
  std::vector<float> w(size_t(T * k));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < k; ++j) {
      ids[size_t(t * k + j)] = int32_t((t * 5 + j * 3 + (g() % 2)) % (E - 3));  // 3 idle experts
      w[size_t(t * k + j)] = 0.25f + 0.01f * float(j);
    }
  const int64_t R = T * k;
  std::vector<int32_t> off(static_cast<size_t>(E + 1)), sorted(static_cast<size_t>(R)),
      pos(static_cast<size_t>(R));
  moe_route(TensorView(ids.data(), DType::I32, {T, k}), E, TensorView(off.data(), DType::I32, {E + 1}),
            TensorView(sorted.data(), DType::I32, {R}), TensorView(pos.data(), DType::I32, {R}));
  DeviceBuffer dids = upload(ids), doff(size_t(E + 1) * 4), dsorted(size_t(R) * 4), dpos(size_t(R) * 4),
               dws(moe_route_workspace_size(E)), derr(16);
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = dws.data();
  ctx.workspace_bytes = dws.size();
  const TensorView err(derr.data(), DType::I32, {1}, Device::CUDA);
  moe_route(TensorView(dids.data(), DType::I32, {T, k}, Device::CUDA), E,
            TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA),
            TensorView(dsorted.data(), DType::I32, {R}, Device::CUDA),
            TensorView(dpos.data(), DType::I32, {R}, Device::CUDA), err, ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download<int32_t>(doff, size_t(E + 1)), off);
  EXPECT_EQ(download<int32_t>(dsorted, size_t(R)), sorted);
  EXPECT_EQ(download<int32_t>(dpos, size_t(R)), pos);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], 0);

  // moe_mlp, f32
  const MlpExperts m = mlp_experts("w4g32asym", E, H, I, 100);
  const PreparedExperts &ggu = m.cuda_gate_up, &gdown = m.cuda_down, &cgu = m.cpu_gate_up,
                        &cdown = m.cpu_down;
  const std::vector<float> x = randn(size_t(T * H), 4);
  std::vector<float> yc(size_t(T * H));
  moe_mlp(TensorView(const_cast<float*>(x.data()), DType::F32, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
          TensorView(w.data(), DType::F32, {T, k}), cgu, cdown, TensorView(yc.data(), DType::F32, {T, H}));
  DeviceBuffer dx = upload(x), dw = upload(w), dy(size_t(T * H) * 4),
               mws(moe_mlp_workspace_size(ggu, gdown, T, k, DType::F32));
  ExecContext mctx;
  mctx.workspace = mws.data();
  mctx.workspace_bytes = mws.size();
  moe_mlp(TensorView(dx.data(), DType::F32, {T, H}, Device::CUDA),
          TensorView(dids.data(), DType::I32, {T, k}, Device::CUDA),
          TensorView(dw.data(), DType::F32, {T, k}, Device::CUDA), ggu, gdown,
          TensorView(dy.data(), DType::F32, {T, H}, Device::CUDA), MoeActivation::Silu, err, mctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = download<float>(dy, size_t(T * H));
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], yc[i], 5e-3 * (1 + std::fabs(yc[i]))) << i;
  EXPECT_EQ(download<int32_t>(derr, 1)[0], 0);

  // an id out of range: refused in the kernel
  ids[5] = int32_t(E);
  dids.copy_from_host(ids.data(), ids.size() * 4);
  moe_route(TensorView(dids.data(), DType::I32, {T, k}, Device::CUDA), E,
            TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA),
            TensorView(dsorted.data(), DType::I32, {R}, Device::CUDA),
            TensorView(dpos.data(), DType::I32, {R}, Device::CUDA), err, ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorExpertId);
  EXPECT_EQ(download<int32_t>(doff, size_t(E + 1)), std::vector<int32_t>(size_t(E + 1), 0));
}

// The routing at prefill size (the three-grid form: 32768 pairs over 256 experts; 8800 pairs in
// 18 uneven blocks; one expert), with many experts (3000: the one block, counters in the
// workspace) and at decode size (the one block), skewed ids: bit for bit the host's stable layout.
// At 32768 pairs the gather too (its four-pieces-a-thread form). Then an out-of-range id among
// 32768 pairs: the three grids refuse the routing as the one block
// does (error bit, no pair routed), and route the next call again.
TEST(CudaMoe, RoutingAtScaleMatchesHost) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t T, k, E;
  };
  for (const Case& c : {Case{4096, 8, 256}, Case{1100, 8, 128}, Case{2000, 6, 1}, Case{50, 4, 3000},
                        Case{1, 8, 256}, Case{64, 8, 128}}) {
    SCOPED_TRACE(testing::Message() << "T " << c.T << " k " << c.k << " E " << c.E);
    std::mt19937 g(uint32_t(c.E));
    std::vector<int32_t> ids(size_t(c.T * c.k));
    for (auto& id : ids) id = int32_t((g() % 4 == 0 ? g() % 7 : g()) % uint32_t(c.E));  // a few hot experts
    const int64_t R = c.T * c.k;
    std::vector<int32_t> off(static_cast<size_t>(c.E + 1)), sorted(static_cast<size_t>(R)), pos(static_cast<size_t>(R));
    moe_route(TensorView(ids.data(), DType::I32, {c.T, c.k}), c.E, TensorView(off.data(), DType::I32, {c.E + 1}),
              TensorView(sorted.data(), DType::I32, {R}), TensorView(pos.data(), DType::I32, {R}));
    DeviceBuffer dids = upload(ids), doff(size_t(c.E + 1) * 4), dsorted(size_t(R) * 4), dpos(size_t(R) * 4),
                 dws(moe_route_workspace_size(c.E)), derr(16);
    ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
    ExecContext ctx;
    ctx.workspace = dws.data();
    ctx.workspace_bytes = dws.size();
    const TensorView err(derr.data(), DType::I32, {1}, Device::CUDA);
    const auto route = [&] {
      moe_route(TensorView(dids.data(), DType::I32, {c.T, c.k}, Device::CUDA), c.E,
                TensorView(doff.data(), DType::I32, {c.E + 1}, Device::CUDA),
                TensorView(dsorted.data(), DType::I32, {R}, Device::CUDA),
                TensorView(dpos.data(), DType::I32, {R}, Device::CUDA), err, ctx);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    };
    route();
    EXPECT_EQ(download<int32_t>(derr, 1)[0], 0);
    EXPECT_EQ(download<int32_t>(doff, size_t(c.E + 1)), off);
    EXPECT_EQ(download<int32_t>(dsorted, size_t(R)), sorted);
    EXPECT_EQ(download<int32_t>(dpos, size_t(R)), pos);
    if (c.T != 4096) continue;
    // the gather at this size (2^19 16-byte pieces: four a thread)
    const int64_t H = 128;
    const std::vector<float> x = randn(size_t(c.T * H), 3);
    DeviceBuffer dx = upload(x), dxs(size_t(R * H) * 4);
    moe_gather(TensorView(dx.data(), DType::F32, {c.T, H}, Device::CUDA),
               TensorView(dsorted.data(), DType::I32, {R}, Device::CUDA), c.k,
               TensorView(dxs.data(), DType::F32, {R, H}, Device::CUDA));
    const std::vector<float> xs = download<float>(dxs, size_t(R * H));
    for (int64_t p = 0; p < R; ++p)
      for (int64_t h = 0; h < H; ++h)
        ASSERT_EQ(xs[size_t(p * H + h)], x[size_t((sorted[size_t(p)] / c.k) * H + h)]) << p << " " << h;
    std::vector<int32_t> bad = ids;
    bad[size_t(R) - 3] = int32_t(c.E);  // in the last block's segment
    dids.copy_from_host(bad.data(), bad.size() * 4);
    route();
    EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorExpertId);
    EXPECT_EQ(download<int32_t>(doff, size_t(c.E + 1)), std::vector<int32_t>(size_t(c.E + 1), 0));
    EXPECT_EQ(download<int32_t>(dsorted, size_t(R)), std::vector<int32_t>(size_t(R), -1));
    EXPECT_EQ(download<int32_t>(dpos, size_t(R)), std::vector<int32_t>(size_t(R), -1));
    dids.copy_from_host(ids.data(), ids.size() * 4);
    route();
    EXPECT_EQ(download<int32_t>(doff, size_t(c.E + 1)), off);
    EXPECT_EQ(download<int32_t>(dsorted, size_t(R)), sorted);
  }
}

// The gather and the weighted scatter-add over rows longer than one block's columns, on their
// 16-byte and element-wise paths (widths that are and are not multiples of 8 / 4 elements), with
// bf16 and f32 data, accumulating into y; then moe_mlp in bf16 with odd hidden and intermediate
// sizes (the activation kernel's element path, several column blocks) against the CPU backend.
TEST(CudaMoe, RoutingKernelsOverColumnBlocksMatchHost) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 5, k = 3, E = 7, R = T * k;
  std::vector<int32_t> ids(static_cast<size_t>(R));
  for (int64_t i = 0; i < R; ++i) ids[size_t(i)] = int32_t((i * 5 + i / k) % E);
  std::vector<int32_t> off(static_cast<size_t>(E + 1)), sorted(static_cast<size_t>(R)), pos(static_cast<size_t>(R));
  moe_route(TensorView(ids.data(), DType::I32, {T, k}), E, TensorView(off.data(), DType::I32, {E + 1}),
            TensorView(sorted.data(), DType::I32, {R}), TensorView(pos.data(), DType::I32, {R}));
  const DeviceBuffer dsorted = upload(sorted), dpos = upload(pos);
  const std::vector<float> w = randn(static_cast<size_t>(R), 9);
  const DeviceBuffer dw = upload(w);
  for (const int64_t H : {int64_t(4100), int64_t(4101), int64_t(9000)}) {
    for (const DType dt : {DType::BF16, DType::F16, DType::F32}) {
      SCOPED_TRACE(testing::Message() << "H " << H << " " << dtype_name(dt));
      const size_t eb = size_t(dtype_bytes(dt, 1));
      std::vector<float> x = randn(size_t(T * H), 10);
      // values exact in t, their bytes on the device, and back
      const auto exact = [](const std::vector<float>& v, DType t) {
        return t == DType::F32 ? v : from_16bit(to_16bit(v, t), t);
      };
      const auto bytes_of = [](const std::vector<float>& v, DType t) {
        return t == DType::F32 ? upload(v) : upload(to_16bit(v, t));
      };
      const auto bytes = [&](const std::vector<float>& v) { return bytes_of(v, dt); };
      const auto values = [&](const DeviceBuffer& b, size_t n) {
        return dt == DType::F32 ? download<float>(b, n) : from_16bit(download<uint16_t>(b, n), dt);
      };
      x = exact(x, dt);
      DeviceBuffer dx = bytes(x), dxs(size_t(R * H) * eb);
      moe_gather(TensorView(dx.data(), dt, {T, H}, Device::CUDA),
                 TensorView(dsorted.data(), DType::I32, {R}, Device::CUDA), k,
                 TensorView(dxs.data(), dt, {R, H}, Device::CUDA));
      const std::vector<float> xs = values(dxs, size_t(R * H));
      for (int64_t p = 0; p < R; ++p)
        for (int64_t h = 0; h < H; ++h)
          ASSERT_EQ(xs[size_t(p * H + h)], x[size_t((sorted[size_t(p)] / k) * H + h)]) << p << " " << h;

      // scatter-add of f32 ys and of ys in dt (the MLP's), into y of dt, accumulating (a width of 9000
      // reads 16-bit rows and stores y as 16-byte vectors)
      for (const DType yst : {DType::F32, dt}) {
        const std::vector<float> ys = exact(randn(size_t(R * H), 11), yst), y0 = exact(randn(size_t(T * H), 12), dt);
        DeviceBuffer dys = bytes_of(ys, yst), dy = bytes(y0);
        moe_scatter_add(TensorView(dys.data(), yst, {R, H}, Device::CUDA),
                        TensorView(dpos.data(), DType::I32, {R}, Device::CUDA),
                        TensorView(dw.data(), DType::F32, {T, k}, Device::CUDA),
                        TensorView(dy.data(), dt, {T, H}, Device::CUDA), true);
        const std::vector<float> y = values(dy, size_t(T * H));
        const double ulp = dt == DType::BF16 ? 1.0 / 128 : dt == DType::F16 ? 1.0 / 1024 : 1e-6;  // y's rounding
        for (int64_t t = 0; t < T; ++t)
          for (int64_t h = 0; h < H; ++h) {
            double ref = y0[size_t(t * H + h)];
            for (int64_t j = 0; j < k; ++j)
              ref += double(w[size_t(t * k + j)]) * ys[size_t(pos[size_t(t * k + j)] * H + h)];
            ASSERT_NEAR(y[size_t(t * H + h)], ref, ulp * (1 + std::fabs(ref))) << t << " " << h;
          }
      }
    }
  }

  // the whole MLP in bf16: hidden 1000 (16-byte rows), intermediate 1004 (not a multiple of 8)
  const int64_t H = 1000, I = 1004;
  const MlpExperts m = mlp_experts("w4g32", E, H, I, 40);
  const PreparedExperts &ggu = m.cuda_gate_up, &gdown = m.cuda_down, &cgu = m.cpu_gate_up,
                        &cdown = m.cpu_down;
  const std::vector<float> x = from_bf16(to_bf16(randn(size_t(T * H), 13)));
  std::vector<float> yc(size_t(T * H));
  moe_mlp(TensorView(const_cast<float*>(x.data()), DType::F32, {T, H}), TensorView(ids.data(), DType::I32, {T, k}),
          TensorView(const_cast<float*>(w.data()), DType::F32, {T, k}), cgu, cdown,
          TensorView(yc.data(), DType::F32, {T, H}));
  DeviceBuffer dx = upload(to_bf16(x)), dids = upload(ids), dy(size_t(T * H) * 2),
               mws(moe_mlp_workspace_size(ggu, gdown, T, k, DType::BF16));
  ExecContext mctx;
  mctx.workspace = mws.data();
  mctx.workspace_bytes = mws.size();
  moe_mlp(TensorView(dx.data(), DType::BF16, {T, H}, Device::CUDA),
          TensorView(dids.data(), DType::I32, {T, k}, Device::CUDA),
          TensorView(dw.data(), DType::F32, {T, k}, Device::CUDA), ggu, gdown,
          TensorView(dy.data(), DType::BF16, {T, H}, Device::CUDA), MoeActivation::Silu, {}, mctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = from_bf16(download<uint16_t>(dy, size_t(T * H)));
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (double(y[i]) - yc[i]) * (double(y[i]) - yc[i]);
    den += double(yc[i]) * yc[i];
  }
  // the CUDA path rounds the gate_up output and the activation to bf16, the CPU one keeps f32
  EXPECT_LT(std::sqrt(num / den), 2e-2);
}

// Offsets that do not end at the row count: error bit, y untouched.
TEST(CudaMoe, BadOffsetsAreRefusedInKernel) {
  SKIP_WITHOUT_GPU();
  const int64_t E = 4, N = 32, K = 64, R = 10;
  const PreparedExperts gpu = prepare_experts(make_experts("w8g32", E, N, K, 1), on(BackendKind::CUDA));
  const std::vector<float> sentinel(size_t(R * N), 5.f);
  const std::vector<int32_t> off = {0, 3, 2, 8, 10};  // not non-decreasing
  DeviceBuffer dx = upload(randn(size_t(R * K), 1)), dy = upload(sentinel), doff = upload(off),
               derr(16), ws(grouped_linear_workspace_size(gpu, R));
  ASSERT_EQ(cudaMemset(derr.data(), 0, 16), cudaSuccess);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = ws.size();
  MoeRows rows = MoeRows::contiguous(TensorView(doff.data(), DType::I32, {E + 1}, Device::CUDA));
  rows.error = TensorView(derr.data(), DType::I32, {1}, Device::CUDA);
  grouped_linear(TensorView(dx.data(), DType::F32, {R, K}, Device::CUDA), gpu,
                 TensorView(dy.data(), DType::F32, {R, N}, Device::CUDA), rows, {}, ctx);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(download<int32_t>(derr, 1)[0], kMoeErrorOffsets);
  EXPECT_EQ(download<float>(dy, sentinel.size()), sentinel);
}

}  // namespace
}  // namespace mixq
