// FP8 block experts on CUDA (act = fp8-block, fp8b128 weights: DeepSeek-V3's routed experts): the
// grouped block GEMM against the CPU backend's FP8 block experts (the same e4m3 activation codes
// and scales), contiguous layout with 0, 1, 7, 127-129, 300 rows an expert (experts starting at odd
// rows; N and K not multiples of 128; per-expert bias; f32 and bf16 outputs: the direct and the
// TMA-store epilogues, clipped to each expert's rows), the masked layout under a CUDA graph with
// counts changing between replays, E = 1 bit for bit against linear(), moe_mlp, and bad offsets /
// counts refused in the kernel (error bits, outputs untouched); the few-token form (decode shares)
// at every token tile, with K splits, and masked under a graph. Skips without a Hopper GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device_checks.hpp"
#include "device_vectors.hpp"
#include "host_data.hpp"
#include "mixq/error.hpp"
#include "mixq/moe.hpp"
#include "mixq/numeric.hpp"
#include "mixq/quantize.hpp"
#include "moe_block_checks.hpp"
#include "moe_test_data.hpp"

namespace mixq {
namespace {

using moe_test::randn;

PrepareOptions fp8_on(BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  o.act = ActQuant::Fp8Block;
  return o;
}

std::vector<QuantizedWeight> fp8_experts(int64_t E, int64_t N, int64_t K, uint32_t seed) {
  return moe_test::make_experts("fp8b128", E, N, K, seed, 131u);
}

using moe_test::as_doubles;
using moe_test::dev;
using moe_test::expect_rows_near;
using test::download;
using test::upload;

TEST(CudaMoeFp8, GroupedContiguousMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const auto experts = fp8_experts(11, 200, 704, 41);  // N and K not multiples of 128
  const PreparedExperts cpu = prepare_experts(experts, fp8_on(BackendKind::CPU));
  moe_test::check_contiguous_vs_cpu(prepare_experts(experts, fp8_on(BackendKind::CUDA)), cpu, 0.f, 4e-3,
                                    8e-3, "sm90_fp8_block_grouped");
  // an expert's token tiles innermost (the order of experts larger than L2; these are small)
  PrepareOptions major = fp8_on(BackendKind::CUDA);
  major.tuning.moe_expert_major = Toggle::On;
  moe_test::check_contiguous_vs_cpu(prepare_experts(experts, major), cpu, 0.f, 4e-3, 8e-3,
                                    "sm90_fp8_block_grouped");
}

// The few-token form (decode shares): every token tile, and K split at a decode routing.
TEST(CudaMoeFp8, FewTokenFormMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  // K = 1088: 9 stages of 128, the last half past K; N = 200: the second weight tile partly past N
  moe_test::check_few_token_form_vs_cpu(fp8_experts(11, 200, 1088, 43), fp8_on(BackendKind::CUDA),
                                        fp8_on(BackendKind::CPU), 0.f, 4e-3, 8e-3,
                                        "sm90_fp8_block_grouped_skinny");
}

// ... and under a CUDA graph in the masked layout (5 tiles of 16 rows an expert at most; K = 1024:
// 6 x 2 units cut in two K splits, whose tickets the quantizer zeroes in each replay).
TEST(CudaMoeFp8, FewTokenFormMaskedGraphReplays) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, N = 256, K = 1024;
  const auto experts = fp8_experts(E, N, K, 17);
  PrepareOptions o = fp8_on(BackendKind::CUDA);
  o.tuning.moe_token_tile = 16;
  moe_test::check_masked_graph_replays(prepare_experts(experts, o),
                                       prepare_experts(experts, fp8_on(BackendKind::CPU)),
                                       moe_test::make_acts(E * 72, K, 3), 8e-3);
}

// E = 1: the same bits as linear()'s block GEMM.
TEST(CudaMoeFp8, OneExpertMatchesLinearBitForBit) {
  SKIP_WITHOUT_HOPPER();
  moe_test::check_one_expert_equals_linear(fp8_experts(1, 328, 1152, 7)[0], fp8_on(BackendKind::CUDA),
                                           fp8_on(BackendKind::CUDA), 0.f);
}

// The masked layout under a CUDA graph with counts changing between replays, and a bad count.
TEST(CudaMoeFp8, MaskedLayoutGraphReplaysWithChangingCounts) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, N = 256, K = 384;
  const auto experts = fp8_experts(E, N, K, 13);
  moe_test::check_masked_graph_replays(prepare_experts(experts, fp8_on(BackendKind::CUDA)),
                                       prepare_experts(experts, fp8_on(BackendKind::CPU)),
                                       moe_test::make_acts(E * 72, K, 1), 8e-3);
}

// Offsets that do not end at the row count: error bit, y untouched.
TEST(CudaMoeFp8, BadOffsetsAreRefusedInKernel) {
  SKIP_WITHOUT_HOPPER();
  moe_test::check_bad_offsets_refused(prepare_experts(fp8_experts(4, 128, 256, 1), fp8_on(BackendKind::CUDA)));
}

// The whole MoE MLP on FP8 block experts (routing, gather, grouped gate_up, SiLU * up, grouped
// down, weighted sum) against the CPU backend's, bf16 activations.
TEST(CudaMoeFp8, MlpMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 16, H = 384, I = 256;  // fused gate+up: I a multiple of 128
  // the CUDA path rounds the gate_up output and the activation to bf16 and quantizes the
  // activation again to e4m3 from those; the CPU one from its f32 values
  EXPECT_LT(moe_test::mlp_error_vs_cpu(fp8_experts(E, I, H, 50), fp8_experts(E, I, H, 150),
                                       fp8_experts(E, H, I, 250), fp8_on(BackendKind::CUDA),
                                       fp8_on(BackendKind::CPU), 0.f),
            3e-2);
}

}  // namespace
}  // namespace mixq
