// Public activation quantizers into caller buffers (mixq/act_quant.hpp) on CPU tensors: same
// values as the host quantizers, in the GEMM layout (codes with zero padding up to the row pitch,
// block-major M-contiguous meta), and every argument error reported by name.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mixq/act_quant.hpp"
#include "unit/test_util.hpp"

using namespace mixq;
using namespace mixq::testing;

namespace {

TensorView strided2(void* p, DType t, int64_t r, int64_t c, int64_t ld) {
  return TensorView::strided(p, t, {r, c}, {ld, 1});
}

}  // namespace

TEST(ActQuantApi, Pitches) {
  EXPECT_EQ(act_quant_row_pitch(1), 16);
  EXPECT_EQ(act_quant_row_pitch(16), 16);
  EXPECT_EQ(act_quant_row_pitch(4103), 4112);
  EXPECT_EQ(act_quant_meta_pitch(1), 4);
  EXPECT_EQ(act_quant_meta_pitch(300), 300);
  EXPECT_EQ(act_quant_meta_pitch(17), 20);
}

TEST(ActQuantApi, Fp8CpuLayoutMatchesHostQuantizer) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t M = 5, K = 300, ldx = 311, nb = 3;
    HostTensor xs = random_tensor(t, {M, ldx}, 7, -3.0, 3.0);
    const TensorView x = strided2(xs.bytes.data(), t, M, K, ldx);
    const int64_t ldq = act_quant_row_pitch(K) + 5, ldm = act_quant_meta_pitch(M) + 2;
    std::vector<uint8_t> q(size_t(M * ldq), 0xA5);
    std::vector<float> s(size_t(nb * ldm), -1.f);
    quantize_activations_fp8_block(x, strided2(q.data(), DType::F8E4M3, M, K, ldq),
                                   strided2(s.data(), DType::F32, nb, M, ldm));
    const QuantizedActivationsBuffer ref = quantize_activations_fp8_block(x);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < ldq; ++k) {
        const int want = k < K ? ref.code(m, k) : k < act_quant_row_pitch(K) ? 0 : 0xA5;
        ASSERT_EQ(int(q[size_t(m * ldq + k)]), want) << dtype_name(t) << " m " << m << " k " << k;
      }
      for (int64_t b = 0; b < nb; ++b) ASSERT_EQ(s[size_t(b * ldm + m)], ref.scale_of(m, b));
    }
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t m = M; m < ldm; ++m) EXPECT_EQ(s[size_t(b * ldm + m)], -1.f);  // untouched
  }
}

TEST(ActQuantApi, Int8CpuLayoutMatchesHostQuantizer) {
  for (int64_t block : {32, 64, 128, 256}) {
    const int64_t M = 3, K = 517, nb = (K + block - 1) / block;
    HostTensor xs = random_tensor(DType::BF16, {M, K}, 9, -2.0, 5.0);
    const int64_t ldq = act_quant_row_pitch(K), ldm = act_quant_meta_pitch(M);
    std::vector<int8_t> q(size_t(M * ldq), 0x55);
    std::vector<float> s(size_t(nb * ldm)), o(size_t(nb * ldm));
    std::vector<int32_t> sums(size_t(nb * ldm));
    quantize_activations_int8_block(xs.view(), block, strided2(q.data(), DType::I8, M, ldq, ldq),
                                    strided2(s.data(), DType::F32, nb, M, ldm),
                                    strided2(o.data(), DType::F32, nb, M, ldm),
                                    strided2(sums.data(), DType::I32, nb, M, ldm));
    const QuantizedActivationsBuffer ref = quantize_activations_int8_block(xs.view(), block);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < ldq; ++k)
        ASSERT_EQ(q[size_t(m * ldq + k)], k < K ? ref.int8_code(m, k) : 0) << m << " " << k;
      for (int64_t b = 0; b < nb; ++b) {
        const size_t i = size_t(b * ldm + m);
        ASSERT_EQ(s[i], ref.scale_of(m, b));
        ASSERT_EQ(o[i], ref.offset_of(m, b));
        ASSERT_EQ(sums[i], ref.sum_of(m, b));
      }
    }
  }
}

struct ActQuantErrors : ::testing::Test {
  const int64_t M = 4, K = 200;
  HostTensor x = random_tensor(DType::F16, {M, K}, 3);
  std::vector<uint8_t> q = std::vector<uint8_t>(size_t(M * 208));
  std::vector<float> s = std::vector<float>(size_t(2 * 4)), o = s;
  std::vector<int32_t> sums = std::vector<int32_t>(size_t(2 * 4));
  TensorView qv() { return strided2(q.data(), DType::I8, M, K, 208); }
  TensorView fq() { return strided2(q.data(), DType::F8E4M3, M, K, 208); }
  TensorView sv(int64_t nb = 2) { return strided2(s.data(), DType::F32, nb, M, 4); }
  TensorView ov() { return strided2(o.data(), DType::F32, 2, M, 4); }
  TensorView mv() { return strided2(sums.data(), DType::I32, 2, M, 4); }
};

TEST_F(ActQuantErrors, ValidCallsWork) {
  EXPECT_NO_THROW(quantize_activations_int8_block(x.view(), 128, qv(), sv(), ov(), mv()));
  EXPECT_NO_THROW(quantize_activations_fp8_block(x.view(), fq(), sv()));
}

TEST_F(ActQuantErrors, Block) {
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 48, qv(), sv(), ov(), mv()),
                    "block (48)", "32, 64, 128 or 256");
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 0, qv(), sv(), ov(), mv()), "block (0)");
}

TEST_F(ActQuantErrors, XDtypeRankAndEmpty) {
  HostTensor xi(DType::I8, {M, K});
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(xi.view(), fq(), sv()), "f32, f16 or bf16", "i8");
  HostTensor x3(DType::F16, {1, M, K});
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(x3.view(), fq(), sv()), "rank 2");
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(TensorView(), fq(), sv()), "null");
}

TEST_F(ActQuantErrors, CodesDtypeShapeStride) {
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(x.view(), qv(), sv()), "q must be f8e4m3 or u8");
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128, fq(), sv(), ov(), mv()),
                    "q must be i8");
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128,
                        strided2(q.data(), DType::I8, M, K - 1, 208), sv(), ov(), mv()),
                    "q must be [M][K]", "[4][200]", "[4][208]");
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128,
                        strided2(q.data(), DType::I8, M, K, 200), sv(), ov(), mv()),
                    "q row stride (200)", "208");
}

TEST_F(ActQuantErrors, MetaDtypeShapeStride) {
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(x.view(), fq(), sv(3)), "scale must be",
                    "[2][4]");
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128, qv(), sv(), ov(),
                        strided2(sums.data(), DType::F32, 2, M, 4)),
                    "sums must be i32");
  std::vector<float> small(16);
  const TensorView tight = strided2(small.data(), DType::F32, 2, 3, 3);  // M = 3
  HostTensor x3(DType::F16, {3, K});
  std::vector<uint8_t> q3(size_t(3 * 208));
  EXPECT_MIXQ_ERROR(quantize_activations_fp8_block(x3.view(),
                        strided2(q3.data(), DType::U8, 3, K, 208), tight),
                    "scale row stride (3)", "act_quant_meta_pitch(M) = 4");
  std::vector<float> o8(16);
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128, qv(), sv(),
                        strided2(o8.data(), DType::F32, 2, M, 8), mv()),
                    "share one row stride");
}

TEST_F(ActQuantErrors, Devices) {
  TensorView qd = qv();
  qd.device = Device::CUDA;
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128, qd, sv(), ov(), mv()),
                    "q (", "not on x's device");
#ifndef MIXQ_WITH_CUDA
  // CUDA tensors in a build without CUDA: Unsupported, after validation.
  TensorView xd = x.view(), sd = sv(), fd = fq();
  xd.device = sd.device = fd.device = Device::CUDA;
  try {
    quantize_activations_fp8_block(xd, fd, sd);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported) << e.what();
  }
#endif
}

TEST_F(ActQuantErrors, NonFiniteInputOnCpu) {
  x.set(5, std::nan(""));
  EXPECT_MIXQ_ERROR(quantize_activations_int8_block(x.view(), 128, qv(), sv(), ov(), mv()),
                    "not finite");
}
