// INT8 W8A8 experts on CUDA (act = int8-block: int8 codes per block of 64 or 128 along K, symmetric
// or with offsets, activations quantized per token per block at the call): the grouped block GEMM
// against the CPU backend's INT8 experts (the device quantizer does the host's math, so the codes
// are the same), contiguous layout with 0, 1, 7, 127-129, 300 rows an expert (experts starting at
// rows that are not multiples of 4; N and K not multiples of 128; K blocks of 64 with an odd count;
// more than one rank-1 stage; rows with large activation offsets; per-expert bias; f32 and bf16
// outputs: the direct and the TMA-store epilogues, clipped to each expert's rows), E = 1 bit for
// bit against linear(), the masked layout under a CUDA graph with counts changing between replays,
// moe_mlp, and bad offsets refused in the kernel (error bits, outputs untouched); the few-token form
// (decode shares) at every token tile, with K splits, and masked under a graph. Skips without a
// Hopper GPU.
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
using test::download;
using test::upload;

PrepareOptions int8_on(BackendKind b) {
  PrepareOptions o;
  o.backend = b;
  o.act = ActQuant::Int8Block;
  return o;
}

using moe_test::as_doubles;
using moe_test::dev;
using moe_test::expect_rows_near;

// every third row shifted: the activation offsets' term matters
moe_test::Acts make_acts(int64_t R, int64_t K, uint32_t seed) { return moe_test::make_acts(R, K, seed, 1.5f); }

// Against the CPU backend: the same codes and the same four terms per K block, evaluated in f32 in
// another order (a few roundings per block, partly cancelling offset terms: the linear kernels'
// 2e-5 against float64), plus the 16-bit output's rounding.
class CudaMoeInt8Schemes : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaMoeInt8Schemes, GroupedContiguousMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  // K = 1088: 17 blocks of 64 (an odd count: the last stage's second half is past K) and 9 of 128,
  // two rank-1 stages either way; N = 200
  const auto experts = moe_test::make_experts(GetParam(), 11, 200, 1088, 41, 131u);
  const PreparedExperts cpu = prepare_experts(experts, int8_on(BackendKind::CPU));
  moe_test::check_contiguous_vs_cpu(prepare_experts(experts, int8_on(BackendKind::CUDA)), cpu, 1.5f, 5e-5,
                                    5e-3, "sm90_i8_grouped");
  // an expert's token tiles innermost (the order of experts larger than L2; these are small)
  PrepareOptions major = int8_on(BackendKind::CUDA);
  major.tuning.moe_expert_major = Toggle::On;
  moe_test::check_contiguous_vs_cpu(prepare_experts(experts, major), cpu, 1.5f, 5e-5, 5e-3, "sm90_i8_grouped");
}

// The few-token form (decode shares): every token tile, and K split at a decode routing.
TEST_P(CudaMoeInt8Schemes, FewTokenFormMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  moe_test::check_few_token_form_vs_cpu(moe_test::make_experts(GetParam(), 11, 200, 1088, 43, 131u),
                                        int8_on(BackendKind::CUDA), int8_on(BackendKind::CPU), 1.5f,
                                        5e-5, 5e-3, "sm90_i8_grouped_skinny");
}

// E = 1: the same bits as linear() with sm90_i8_128x128 (its rank-1 stages first, then the same
// per-block promotion order).
TEST_P(CudaMoeInt8Schemes, OneExpertMatchesLinearBitForBit) {
  SKIP_WITHOUT_HOPPER();
  PrepareOptions lo = int8_on(BackendKind::CUDA);
  lo.force_kernel = "sm90_i8_128x128";
  moe_test::check_one_expert_equals_linear(moe_test::make_experts(GetParam(), 1, 328, 1152, 7, 1u)[0],
                                           int8_on(BackendKind::CUDA), lo, 1.5f);
}

INSTANTIATE_TEST_SUITE_P(Schemes, CudaMoeInt8Schemes,
                         ::testing::Values("w8g128", "w8g64", "w8g128asym", "w8g64asym"));

// The masked layout under a CUDA graph with counts changing between replays, and a bad count.
TEST(CudaMoeInt8, MaskedLayoutGraphReplaysWithChangingCounts) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, N = 256, K = 384;
  const auto experts = moe_test::make_experts("w8g128asym", E, N, K, 13, 131u);
  moe_test::check_masked_graph_replays(prepare_experts(experts, int8_on(BackendKind::CUDA)),
                                       prepare_experts(experts, int8_on(BackendKind::CPU)),
                                       make_acts(E * 72, K, 1), 5e-3);
}

// ... and the few-token form under a CUDA graph (5 tiles of 16 rows an expert at most).
TEST(CudaMoeInt8, FewTokenFormMaskedGraphReplays) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 6, N = 256, K = 384;
  const auto experts = moe_test::make_experts("w8g64asym", E, N, K, 17, 131u);
  PrepareOptions o = int8_on(BackendKind::CUDA);
  o.tuning.moe_token_tile = 16;
  moe_test::check_masked_graph_replays(prepare_experts(experts, o),
                                       prepare_experts(experts, int8_on(BackendKind::CPU)),
                                       make_acts(E * 72, K, 3), 5e-3);
}

// Offsets that do not end at the row count (the few-token form: 10 rows over 4 experts): error
// bit, y untouched.
TEST(CudaMoeInt8, BadOffsetsAreRefusedInKernel) {
  SKIP_WITHOUT_HOPPER();
  moe_test::check_bad_offsets_refused(
      prepare_experts(moe_test::make_experts("w8g64", 4, 128, 256, 1, 131u), int8_on(BackendKind::CUDA)));
}

// Too small a workspace is refused on the host, naming the size it needs.
TEST(CudaMoeInt8, ShortWorkspaceIsRefused) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 2, N = 128, K = 128, R = 4;
  const PreparedExperts gpu =
      prepare_experts(moe_test::make_experts("w8g128", E, N, K, 1, 131u), int8_on(BackendKind::CUDA));
  const std::vector<int32_t> off = {0, 2, 4};
  const size_t need = grouped_linear_workspace_size(gpu, R);
  DeviceBuffer dx(size_t(R * K) * 4), dy(size_t(R * N) * 4), doff = upload(off), ws(need);
  ExecContext ctx;
  ctx.workspace = ws.data();
  ctx.workspace_bytes = need - 1;
  try {
    grouped_linear(dev(dx, DType::F32, {R, K}), gpu, dev(dy, DType::F32, {R, N}),
                   MoeRows::contiguous(dev(doff, DType::I32, {E + 1})), {}, ctx);
    FAIL() << "a short workspace was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(std::to_string(need)), std::string::npos) << e.what();
  }
}

// The whole MoE MLP on INT8 experts against the CPU backend's.
TEST(CudaMoeInt8, MlpMatchesCpu) {
  SKIP_WITHOUT_HOPPER();
  const int64_t E = 16, H = 384, I = 256;
  const auto experts = [&](int64_t n, int64_t k, uint32_t seed) {
    return moe_test::make_experts("w8g128", E, n, k, seed, 131u);
  };
  // the CUDA path rounds the gate_up output and the activation to bf16 and quantizes the
  // activation again to int8 from those; the CPU one from its f32 values
  EXPECT_LT(moe_test::mlp_error_vs_cpu(experts(I, H, 50), experts(I, H, 150), experts(H, I, 250),
                                       int8_on(BackendKind::CUDA), int8_on(BackendKind::CPU), 1.5f),
            2e-2);
}

}  // namespace
}  // namespace mixq
