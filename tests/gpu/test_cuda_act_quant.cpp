// CUDA activation quantizers (mixq/act_quant.hpp) against the host quantizers of
// mixq/quantize.hpp: codes, sums and scales must be identical, padding columns zero, every
// output element written (buffers poisoned first). Skipped (visibly) when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

using namespace mixq;

namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"

void cuda_ok(cudaError_t e, const char* what) {
  MIXQ_CHECK(e == cudaSuccess, ErrorCode::Cuda, what, ": ", cudaGetErrorString(e));
}

enum class Data { Normal, Large, Small, Mixed };

// Values of row m (before rounding to the input dtype). Mixed rows include constant blocks,
// all-zero rows, huge and tiny magnitudes and exact ties.
std::vector<float> make_values(int64_t M, int64_t K, DType t, Data d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const float big = t == DType::F16 ? 2.0e4f : 1.0e30f;
  const float tiny = t == DType::F16 ? 3.0e-6f : t == DType::BF16 ? 1.0e-36f : 1.0e-39f;
  std::vector<float> v(size_t(M * K));
  for (int64_t m = 0; m < M; ++m) {
    int mode = d == Data::Normal ? 0 : d == Data::Large ? 1 : d == Data::Small ? 2 : int(m % 7);
    float* row = v.data() + m * K;
    for (int64_t k = 0; k < K; ++k) {
      float x = nd(rng);
      switch (mode) {
        case 1: x *= big; break;
        case 2: x *= tiny; break;
        case 3: x = 0.f; break;                                     // all-zero row
        case 4: x = (k / 128) % 2 ? 0.75f : x; break;               // constant blocks
        case 5: x = std::round(x * 40.f) * 0.5f; break;             // many exact ties
        case 6: x = (k % 97 == 0) ? x * 1000.f : x * 0.01f; break;  // outliers
        default: break;
      }
      if (t == DType::F16) x = std::max(-6.0e4f, std::min(6.0e4f, x));  // finite in f16
      row[k] = x;
    }
  }
  return v;
}

// Host x with row stride ldx; columns K..ldx-1 hold NaN so that reading them shows up.
struct HostX {
  std::vector<uint8_t> bytes;
  DType t;
  int64_t M, K, ldx;
  size_t esize() const { return t == DType::F32 ? 4 : 2; }
  TensorView view() { return TensorView::strided(bytes.data(), t, {M, K}, {ldx, 1}); }
};

HostX make_x(const std::vector<float>& v, DType t, int64_t M, int64_t K, int64_t ldx) {
  HostX x{{}, t, M, K, ldx};
  x.bytes.assign(size_t(M * ldx) * x.esize(), 0xFF);  // 0xFF.. = NaN in every float type
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float f = v[size_t(m * K + k)];
      uint8_t* p = x.bytes.data() + size_t(m * ldx + k) * x.esize();
      if (t == DType::F32) std::memcpy(p, &f, 4);
      else {
        const uint16_t h = t == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::memcpy(p, &h, 2);
      }
    }
  return x;
}

// Device copy of x, optionally shifted by one element so that rows are not 16-byte aligned.
struct DeviceX {
  DeviceBuffer buf;
  TensorView view;
};
DeviceX upload(const HostX& x, bool misalign) {
  const size_t shift = misalign ? x.esize() : 0;
  DeviceX d{DeviceBuffer(x.bytes.size() + 16), {}};
  cuda_ok(cudaMemset(d.buf.data(), 0xFF, d.buf.size()), "memset");
  d.buf.copy_from_host(x.bytes.data(), x.bytes.size(), shift);
  d.view = TensorView::strided(static_cast<uint8_t*>(d.buf.data()) + shift, x.t, {x.M, x.K},
                               {x.ldx, 1}, Device::CUDA);
  return d;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b) {
  std::vector<T> h(b.size() / sizeof(T));
  cuda_ok(cudaDeviceSynchronize(), "sync");
  b.copy_to_host(h.data(), h.size() * sizeof(T));
  return h;
}

constexpr uint8_t kPoison = 0xA5;

struct Shape {
  int64_t M, K;
};

std::string describe(const char* what, DType t, int64_t M, int64_t K, int64_t ldx, int64_t ldq,
                     bool mis, Data d) {
  return std::string(what) + " " + dtype_name(t) + " M" + std::to_string(M) + " K" +
         std::to_string(K) + " ldx" + std::to_string(ldx) + " ldq" + std::to_string(ldq) +
         (mis ? " misaligned" : "") + " data" + std::to_string(int(d));
}

// Compares the device codes [M][ldq] with the host quantizer's: equal in [0, K), zero in
// [K, pitch), untouched (poison) in [pitch, ldq). Returns the number of mismatches.
int64_t check_codes(const std::vector<uint8_t>& dq, const QuantizedActivationsBuffer& h,
                    int64_t ldq, const std::string& what) {
  const int64_t M = h.M, K = h.K, pitch = act_quant_row_pitch(K);
  int64_t bad = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < ldq; ++k) {
      const uint8_t got = dq[size_t(m * ldq + k)];
      const uint8_t want = k < K ? h.code(m, k) : k < pitch ? 0 : kPoison;
      if (got != want && bad++ < 5)
        ADD_FAILURE() << what << ": code [" << m << ", " << k << "] = " << int(got) << ", want "
                      << int(want);
    }
  return bad;
}

// Device meta [nb][ld] against the host quantizer's, in the same layout ([nb][h.meta_pitch]).
template <typename T>
int64_t check_meta(const std::vector<T>& dm, const std::vector<T>& hm,
                   const QuantizedActivationsBuffer& h, int64_t ld, const std::string& what,
                   const char* name) {
  const int64_t M = h.M, nb = h.n_blocks();
  int64_t bad = 0;
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int64_t m = 0; m < M; ++m) {
      const T got = dm[size_t(kb * ld + m)], want = hm[size_t(kb * h.meta_pitch + m)];
      if (!(got == want) && bad++ < 5)
        ADD_FAILURE() << what << ": " << name << "[m " << m << ", block " << kb << "] = " << got
                      << ", want " << want;
    }
  return bad;
}

void run_fp8(const HostX& hx, bool misalign, int64_t ldq_extra, Data d) {
  const int64_t M = hx.M, K = hx.K, nb = (K + 127) / 128;
  const int64_t ldq = act_quant_row_pitch(K) + ldq_extra, ldm = act_quant_meta_pitch(M) + 4;
  const std::string what = describe("fp8", hx.t, M, K, hx.ldx, ldq, misalign, d);
  DeviceX dx = upload(hx, misalign);
  DeviceBuffer dq(size_t(M * ldq)), ds(size_t(nb * ldm) * 4);
  cuda_ok(cudaMemset(dq.data(), kPoison, dq.size()), "memset");
  cuda_ok(cudaMemset(ds.data(), 0xFF, ds.size()), "memset");
  cudaStream_t stream;
  cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  ExecContext ctx;
  ctx.stream = stream;
  quantize_activations_fp8_block(
      dx.view, TensorView::strided(dq.data(), DType::F8E4M3, {M, K}, {ldq, 1}, Device::CUDA),
      TensorView::strided(ds.data(), DType::F32, {nb, M}, {ldm, 1}, Device::CUDA), ctx);
  cuda_ok(cudaStreamSynchronize(stream), "stream sync");
  cuda_ok(cudaStreamDestroy(stream), "stream destroy");
  HostX h = hx;
  const QuantizedActivationsBuffer ref = quantize_activations_fp8_block(h.view());
  const auto q = download<uint8_t>(dq);
  const auto s = download<float>(ds);
  EXPECT_EQ(check_codes(q, ref, ldq, what), 0) << what;
  EXPECT_EQ(check_meta(s, ref.scale, ref, ldm, what, "scale"), 0) << what;
  // rows M..ldm-1 of the meta are not written
  for (int64_t kb = 0; kb < nb; ++kb)
    for (int64_t m = M; m < ldm; ++m) {
      uint32_t bits;
      std::memcpy(&bits, &s[size_t(kb * ldm + m)], 4);
      ASSERT_EQ(bits, 0xFFFFFFFFu) << what << ": meta padding row " << m << " written";
    }
}

void run_int8(const HostX& hx, int64_t block, bool misalign, int64_t ldq_extra, Data d) {
  const int64_t M = hx.M, K = hx.K, nb = (K + block - 1) / block;
  const int64_t ldq = act_quant_row_pitch(K) + ldq_extra, ldm = act_quant_meta_pitch(M);
  const std::string what =
      describe("int8", hx.t, M, K, hx.ldx, ldq, misalign, d) + " block" + std::to_string(block);
  DeviceX dx = upload(hx, misalign);
  DeviceBuffer dq(size_t(M * ldq)), ds(size_t(nb * ldm) * 4), doff(size_t(nb * ldm) * 4),
      dsum(size_t(nb * ldm) * 4);
  cuda_ok(cudaMemset(dq.data(), kPoison, dq.size()), "memset");
  for (DeviceBuffer* b : {&ds, &doff, &dsum}) cuda_ok(cudaMemset(b->data(), 0xFF, b->size()), "memset");
  auto meta = [&](const DeviceBuffer& b, DType t) {
    return TensorView::strided(b.data(), t, {nb, ldm}, {ldm, 1}, Device::CUDA);
  };
  quantize_activations_int8_block(
      dx.view, block,
      TensorView::strided(dq.data(), DType::I8, {M, act_quant_row_pitch(K)}, {ldq, 1}, Device::CUDA),
      meta(ds, DType::F32), meta(doff, DType::F32), meta(dsum, DType::I32));
  HostX h = hx;
  const QuantizedActivationsBuffer ref = quantize_activations_int8_block(h.view(), block);
  const auto q = download<uint8_t>(dq);
  EXPECT_EQ(check_codes(q, ref, ldq, what), 0) << what;
  EXPECT_EQ(check_meta(download<float>(ds), ref.scale, ref, ldm, what, "scale"), 0) << what;
  EXPECT_EQ(check_meta(download<float>(doff), ref.offset, ref, ldm, what, "offset"), 0) << what;
  EXPECT_EQ(check_meta(download<int32_t>(dsum), ref.sums, ref, ldm, what, "sums"), 0) << what;
}

const Shape kShapes[] = {{1, 128}, {3, 130}, {17, 1000}, {300, 4096 + 7}, {5, 16}, {2, 1}, {4, 33}};

}  // namespace

TEST(CudaActQuant, Fp8MatchesHost) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (const Shape& sh : kShapes)
      for (Data d : {Data::Normal, Data::Mixed}) {
        const auto v = make_values(sh.M, sh.K, t, d, seed++);
        run_fp8(make_x(v, t, sh.M, sh.K, sh.K), false, 0, d);
        run_fp8(make_x(v, t, sh.M, sh.K, sh.K + 24), false, 0, d);  // row stride, aligned
      }
}

TEST(CudaActQuant, Fp8MagnitudesAndUnalignedPaths) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 1000;
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (Data d : {Data::Large, Data::Small, Data::Mixed}) {
      const auto v = make_values(37, 777, t, d, seed++);
      run_fp8(make_x(v, t, 37, 777, 777), false, 0, d);
      run_fp8(make_x(v, t, 37, 777, 781), true, 0, d);  // scalar loads
      run_fp8(make_x(v, t, 37, 777, 800), false, 3, d);  // scalar stores (ldq % 16 != 0)
    }
}

// Every e4m3 value, every midpoint between neighbours (ties: RNE) and the f32 neighbours of the
// midpoints, quantized with s = 1 exactly (each 128-group holds 448): checks the conversion.
TEST(CudaActQuant, Fp8ConversionTiesAndSubnormals) {
  SKIP_WITHOUT_GPU();
  std::vector<float> vals;
  for (int c = 0; c < 0x7E; ++c) {
    const float a = e4m3_to_f32(uint8_t(c)), b = e4m3_to_f32(uint8_t(c + 1));
    const float mid = 0.5f * (a + b);
    for (float x : {a, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      vals.push_back(x);
      vals.push_back(-x);
    }
  }
  for (float x : {1e-30f, 9.7e-4f, 9.77e-4f, 1.0e-3f, 447.9f, 448.f, 449.f, 463.9f, 464.f})
    vals.push_back(x);
  const int64_t K = 128 * 16;
  std::vector<float> row(size_t(K), 0.f);
  size_t i = 0;
  for (int64_t k = 0; k < K; ++k) row[size_t(k)] = k % 128 == 0 ? 448.f : vals[i++ % vals.size()];
  // 449 .. 464 are > 448, i.e. amax > 448: keep them out of the s = 1 groups.
  for (int64_t k = 0; k < K; ++k)
    if (std::fabs(row[size_t(k)]) > 448.f) row[size_t(k)] = 447.f;
  run_fp8(make_x(row, DType::F32, 1, K, K), false, 0, Data::Normal);
  run_fp8(make_x(row, DType::F32, 1, K, K + 1), true, 0, Data::Normal);
}

TEST(CudaActQuant, Int8MatchesHost) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 2000;
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (int64_t block : {64, 128})
      for (const Shape& sh : kShapes)
        for (Data d : {Data::Normal, Data::Mixed}) {
          const auto v = make_values(sh.M, sh.K, t, d, seed++);
          run_int8(make_x(v, t, sh.M, sh.K, sh.K), block, false, 0, d);
          run_int8(make_x(v, t, sh.M, sh.K, sh.K + 8), block, false, 16, d);
        }
}

TEST(CudaActQuant, Int8BlocksMagnitudesAndUnalignedPaths) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 3000;
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (int64_t block : {32, 64, 128, 256})
      for (Data d : {Data::Normal, Data::Large, Data::Small, Data::Mixed}) {
        const auto v = make_values(29, 1000, t, d, seed++);
        run_int8(make_x(v, t, 29, 1000, 1000), block, false, 0, d);
        run_int8(make_x(v, t, 29, 1000, 1003), block, true, 0, d);
        run_int8(make_x(v, t, 29, 1000, 1000), block, false, 5, d);
      }
}

// s = 1 and o = 0 exactly (each block spans [-128, 127]): every half-integer is a tie that the
// device must round like the host (to even).
TEST(CudaActQuant, Int8ExactTies) {
  SKIP_WITHOUT_GPU();
  for (int64_t block : {32, 64, 128, 256}) {
    const int64_t K = block * 8;
    std::vector<float> row(static_cast<size_t>(K));
    std::mt19937 rng(static_cast<unsigned>(block));
    std::uniform_int_distribution<int> di(-128, 126);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t j = k % block;
      const float base = float(di(rng)) + 0.5f;
      row[size_t(k)] = j == 0 ? -128.f : j == 1 ? 127.f
                     : k % 3 == 0 ? base : k % 3 == 1 ? std::nextafter(base, 1e9f)
                                                      : std::nextafter(base, -1e9f);
    }
    run_int8(make_x(row, DType::F32, 1, K, K), block, false, 0, Data::Normal);
  }
}

// Adversarial FP8 inputs for the kernel's reciprocal fast path (x * RD(1/s), x * RU(1/s), exact
// division only when the two codes differ): per 128-group, amax = A fixes s = RN(A / 448) with
// 1/s not representable, and the other elements are RN(m * s) and its +-1..3 ulp neighbours for
// every midpoint m between adjacent e4m3 values (the subnormal range and the top binade
// included), both signs. The host checks below prove the data has teeth: a kernel that used
// x * RN(1/s) or x * RD(1/s) without the exactness test would get codes wrong here.
TEST(CudaActQuant, Fp8ReciprocalFastPathBoundaries) {
  SKIP_WITHOUT_GPU();
  std::vector<float> mids;
  for (int c = 0; c < 0x7E; ++c) mids.push_back(0.5f * (e4m3_to_f32(uint8_t(c)) + e4m3_to_f32(uint8_t(c + 1))));
  const float amaxes[] = {1344.f, 44.8f, 3449.6f, 0.7f, 1.0e-3f, 3.0e7f, 123.456f, 5.5e-8f};
  std::vector<float> row;
  int64_t naive_wrong = 0, rd_wrong = 0, ru_wrong = 0;
  for (float A : amaxes) {
    const float s = std::max(A, 1e-10f) / 448.0f;
    // directed reciprocals on the host: r * s is exact in double
    const float r = 1.0f / s;
    const float r_lo = double(r) * double(s) > 1.0 ? std::nextafter(r, 0.f) : r;
    const float r_hi = double(r) * double(s) < 1.0 ? std::nextafter(r, 1e30f) : r;
    std::vector<float> vals;
    for (float m : mids)
      for (int k = -3; k <= 3; ++k) {
        float x = m * s;
        for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, k > 0 ? 1e38f : 0.f);
        if (!(std::fabs(x) <= A)) continue;
        for (float v : {x, -x}) {
          vals.push_back(v);
          const uint8_t want = f32_to_e4m3(v / s);
          naive_wrong += f32_to_e4m3(v * r) != want;
          rd_wrong += f32_to_e4m3(v * r_lo) != want;
          ru_wrong += f32_to_e4m3(v * r_hi) != want;
        }
      }
    for (size_t i = 0; i < vals.size(); i += 127) {  // groups of 128 led by amax
      row.push_back(i / 127 % 2 ? -A : A);
      for (size_t j = i; j < std::min(vals.size(), i + 127); ++j) row.push_back(vals[j]);
      while (row.size() % 128) row.push_back(0.f);
    }
  }
  EXPECT_GT(naive_wrong, 0) << "test data does not separate x * RN(1/s) from x / s";
  EXPECT_GT(rd_wrong, 0) << "test data does not exercise the RD bracket";
  EXPECT_GT(ru_wrong, 0) << "test data does not exercise the RU bracket";
  const int64_t K = 1024, M = int64_t(row.size()) / K + 1;
  row.resize(size_t(M * K), 0.f);
  run_fp8(make_x(row, DType::F32, M, K, K), false, 0, Data::Normal);
  run_fp8(make_x(row, DType::F32, M, K - 5, K), false, 0, Data::Normal);  // partial tail pieces
}

// Adversarial INT8 inputs for the magic-number rounding (t = RN(RN(x - o) * RN(1/s)) in f32, then
// + 1.5 * 2^23): each block holds its min and max first (fixing s and o exactly as the host
// computes them) and then values RN(o + (n + 0.5) s) +- 0..3 ulp, i.e. quotients at and around
// every half-integer n + 0.5 in [-128.5, 127.5]. The host checks show the data has teeth: some
// f32 quotients are exact ties (half to even decides them), and a kernel that rounded the real
// quotient (a double division) instead of the defined f32 recipe would get some codes wrong.
TEST(CudaActQuant, Int8MagicRoundingBoundaries) {
  SKIP_WITHOUT_GPU();
  for (int64_t block : {32, 64, 128, 256}) {
    std::vector<float> row;
    int64_t double_differs = 0, f32_ties = 0;
    const std::pair<float, float> ranges[] = {{-1.3f, 2.9f}, {0.1f, 0.10007f}, {-5e3f, 7.7e3f},
                                              {-3e-5f, 1e-5f}, {1000.f, 1000.5f}, {-2.f, 2.f}};
    for (const auto& [lo, hi] : ranges) {
      const float s = (hi - lo) / 255.0f;
      const float o = lo + 128.0f * s;
      const float inv = 1.0f / s;
      std::vector<float> vals;
      for (int n = -129; n <= 127; ++n)
        for (int k = -3; k <= 3; ++k) {
          float x = float(double(o) + (n + 0.5) * double(s));
          for (int i = 0; i < std::abs(k); ++i) x = std::nextafter(x, k > 0 ? 1e38f : -1e38f);
          if (!(x >= lo && x <= hi)) continue;
          vals.push_back(x);
          const double td = (double(x) - o) / s;
          const int real = int(std::max(-128.0, std::min(127.0, std::nearbyint(td))));
          double_differs += int8_act_code(x, o, inv) != real;
          const float t = (x - o) * inv;
          f32_ties += std::fabs(t - std::nearbyint(t)) == 0.5f;
        }
      for (size_t i = 0; i < vals.size(); i += size_t(block - 2)) {
        row.push_back(lo);
        row.push_back(hi);
        for (size_t j = i; j < std::min(vals.size(), i + size_t(block - 2)); ++j) row.push_back(vals[j]);
        while (row.size() % size_t(block)) row.push_back(lo);
      }
    }
    EXPECT_GT(f32_ties, 0) << "no exact f32 tie in the data";
    if (block == 64) EXPECT_GT(double_differs, 0) << "test data does not separate the f32 recipe from a double division";
    const int64_t K = block * 16, M = int64_t(row.size()) / K + 1;
    row.resize(size_t(M * K), 0.f);
    run_int8(make_x(row, DType::F32, M, K, K), block, false, 0, Data::Normal);
  }
}

// The large shape of the benchmark, once, to cover many CTAs.
TEST(CudaActQuant, LargeShape) {
  SKIP_WITHOUT_GPU();
  const int64_t M = 512, K = 16384;
  const auto v = make_values(M, K, DType::BF16, Data::Mixed, 77);
  const HostX x = make_x(v, DType::BF16, M, K, K);
  run_fp8(x, false, 0, Data::Mixed);
  run_int8(x, 128, false, 0, Data::Mixed);
}

TEST(CudaActQuant, DeviceArgumentErrors) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer dx(64 * 256 * 2), dq(64 * 256), ds(64 * 16 * 4);
  const TensorView x = dx.view(DType::F16, {64, 256});
  const TensorView q = dq.view(DType::F8E4M3, {64, 256});
  const TensorView s = TensorView::strided(ds.data(), DType::F32, {2, 64}, {64, 1}, Device::CUDA);
  EXPECT_NO_THROW(quantize_activations_fp8_block(x, q, s));
  cuda_ok(cudaDeviceSynchronize(), "sync");
  std::vector<uint8_t> host_q(64 * 256);
  const TensorView hq(host_q.data(), DType::F8E4M3, {64, 256});
  EXPECT_THROW(quantize_activations_fp8_block(x, hq, s), Error);  // mixed devices
  const TensorView x_other = TensorView::strided(dx.data(), DType::F16, {64, 256}, {256, 1},
                                                 Device::CUDA, 1);
  EXPECT_THROW(quantize_activations_fp8_block(x_other, q, s), Error);  // other device index
}
