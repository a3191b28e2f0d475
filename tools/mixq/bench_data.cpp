// Fast random bench data and the sampled float64 reference.
#include "bench_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "mixq/act_quant.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"

namespace mixq::bench {

namespace {

// xorshift64*: fast, good enough to pick table entries.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
    if (s == 0) s = 1;
  }
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};

int32_t clamp_round(double v, int32_t lo, int32_t hi) {
  const double r = std::nearbyint(v);
  return static_cast<int32_t>(std::min<double>(hi, std::max<double>(lo, r)));
}

// 64K possible byte values of a code row, each built from rounded Gaussian codes.
std::vector<uint8_t> code_byte_table(DType code_type, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<uint8_t> t(1 << 16);
  for (uint8_t& b : t) {
    switch (code_type) {
      case DType::I4: {  // two's complement nibbles, ~N(0, 2.3): the [-8, 7] range is used
        const int lo = clamp_round(g(gen) * 2.3, -8, 7), hi = clamp_round(g(gen) * 2.3, -8, 7);
        b = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        break;
      }
      case DType::U4: {
        const int lo = clamp_round(g(gen) * 2.3 + 8, 0, 15), hi = clamp_round(g(gen) * 2.3 + 8, 0, 15);
        b = static_cast<uint8_t>(lo | (hi << 4));
        break;
      }
      case DType::I8: b = static_cast<uint8_t>(clamp_round(g(gen) * 40, -128, 127) & 0xFF); break;
      case DType::U8: b = static_cast<uint8_t>(clamp_round(g(gen) * 40 + 128, 0, 255)); break;
      case DType::F8E4M3: b = f32_to_e4m3(static_cast<float>(g(gen) * 100.0)); break;  // never NaN
      default:
        MIXQ_FAIL(ErrorCode::InvalidArgument, "bench: no random generator for ",
                  dtype_name(code_type), " codes");
    }
  }
  return t;
}

void store_float(std::vector<uint8_t>& buf, DType t, int64_t i, float f) {
  switch (t) {
    case DType::F32: std::memcpy(buf.data() + 4 * i, &f, 4); return;
    case DType::F16: {
      const uint16_t h = f32_to_f16(f);
      std::memcpy(buf.data() + 2 * i, &h, 2);
      return;
    }
    case DType::BF16: {
      const uint16_t h = f32_to_bf16(f);
      std::memcpy(buf.data() + 2 * i, &h, 2);
      return;
    }
    default: MIXQ_FAIL(ErrorCode::Internal, "bench: scale type ", dtype_name(t));
  }
}

}  // namespace

QuantizedWeight random_quantized_weight(int64_t N, int64_t K, const QuantScheme& sc,
                                        uint64_t seed) {
  QuantizedWeight w;
  w.N = N;
  w.K = K;
  w.code_type = sc.code_type;
  w.block_k = sc.block_k == 0 ? K : std::min<int64_t>(sc.block_k, K);
  w.block_n = sc.block_n;
  w.scale_type = sc.scale_type;
  w.zero_kind = sc.zero_kind;
  w.origin = "bench:random " + scheme_name(sc);
  w.allocate();

  const std::vector<uint8_t> table = code_byte_table(w.code_type, seed);
  Rng rng(seed);
  uint8_t* c = w.codes.data();
  const size_t n_codes = w.codes.size();
  size_t i = 0;
  for (; i + 4 <= n_codes; i += 4) {
    const uint64_t r = rng.next();
    c[i] = table[r & 0xFFFF];
    c[i + 1] = table[(r >> 16) & 0xFFFF];
    c[i + 2] = table[(r >> 32) & 0xFFFF];
    c[i + 3] = table[r >> 48];
  }
  for (; i < n_codes; ++i) c[i] = table[rng.next() & 0xFFFF];
  if (is_subbyte(w.code_type) && (K & 1)) {
    // The unused high nibble of each row's last byte stays zero, as the quantizer writes it.
    for (int64_t n = 0; n < N; ++n) c[n * w.row_bytes() + w.row_bytes() - 1] &= 0x0F;
  }

  // Scales ~ 0.02/qmax-sized steps, varying 0.5x..1.5x between blocks.
  const double step = w.code_type == DType::F8E4M3 ? 0.02 / 100 : is_subbyte(w.code_type) ? 0.006 : 0.0005;
  const int64_t n_scales = w.n_scale_entries();
  for (int64_t s = 0; s < n_scales; ++s) {
    const float scale = static_cast<float>(step * (0.5 + rng.uniform()));
    store_float(w.scales, w.scale_type, s, scale);
    if (w.zero_kind == ZeroKind::Offset) {
      store_float(w.zeros, w.scale_type, s, static_cast<float>(scale * (rng.uniform() * 4 - 2)));
    } else if (w.zero_kind == ZeroKind::ZeroPoint) {
      const int32_t mid = w.code_type == DType::U4 ? 8 : 128;
      const int32_t z = mid + static_cast<int32_t>(rng.next() % 5) - 2;
      std::memcpy(w.zeros.data() + 4 * s, &z, 4);
    }
  }
  w.validate();
  return w;
}

void fill_random_normal(float* dst, int64_t n, float sigma, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> g(0.f, sigma);
  std::vector<float> table(1 << 16);
  for (float& t : table) t = g(gen);
  Rng rng(seed ^ 0x5bd1e995u);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint64_t r = rng.next();
    dst[i] = table[r & 0xFFFF];
    dst[i + 1] = table[(r >> 16) & 0xFFFF];
    dst[i + 2] = table[(r >> 32) & 0xFFFF];
    dst[i + 3] = table[r >> 48];
  }
  for (; i < n; ++i) dst[i] = table[rng.next() & 0xFFFF];
}

void round_to_dtype(float* v, int64_t n, DType dtype) {
  if (dtype == DType::F32) return;
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::F16) v[i] = f16_to_f32(f32_to_f16(v[i]));
    else if (dtype == DType::BF16) v[i] = bf16_to_f32(f32_to_bf16(v[i]));
    else MIXQ_FAIL(ErrorCode::Internal, "round_to_dtype: ", dtype_name(dtype));
  }
}

std::string OutputSample::describe(int64_t M, int64_t N) const {
  return std::to_string(rows.size()) + " of " + std::to_string(M) + " rows x " +
         std::to_string(cols.size()) + " of " + std::to_string(N) + " cols";
}

namespace {
std::vector<int64_t> spread(int64_t total, int64_t count) {
  std::vector<int64_t> v;
  if (total <= count) {
    for (int64_t i = 0; i < total; ++i) v.push_back(i);
    return v;
  }
  // Evenly spaced from 0 to total-1, so the first and last rows/columns (tile edges) are checked.
  for (int64_t i = 0; i < count; ++i) v.push_back(i * (total - 1) / (count - 1));
  return v;
}
}  // namespace

OutputSample choose_sample(int64_t M, int64_t N, int64_t max_rows, int64_t max_cols) {
  return OutputSample{spread(M, max_rows), spread(N, max_cols)};
}

std::vector<double> sampled_activations(const float* x, int64_t K, const OutputSample& s,
                                        ActQuant act, int64_t block) {
  const int64_t R = static_cast<int64_t>(s.rows.size());
  std::vector<float> rows(static_cast<size_t>(R * K));
  for (int64_t r = 0; r < R; ++r)
    std::copy(x + s.rows[r] * K, x + (s.rows[r] + 1) * K, rows.begin() + r * K);
  std::vector<double> out(rows.size());
  const TensorView v(rows.data(), DType::F32, {R, K});
  if (act == ActQuant::Int8Block) {
    // Activation quantization is per row, so quantizing the sampled rows alone gives the codes
    // the kernel computes for them.
    const QuantizedActivationsBuffer q = quantize_activations_int8_block(v, block);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const int64_t b = k / block;
        out[r * K + k] = double(q.int8_code(r, k)) * q.scale_of(r, b) + q.offset_of(r, b);
      }
  } else if (act == ActQuant::Fp8Block) {
    const QuantizedActivationsBuffer q = quantize_activations_fp8_block(v);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k)
        out[r * K + k] = double(e4m3_to_f32(q.code(r, k))) *
                         q.scale_of(r, k / QuantizedActivations::kFp8Block);
  } else {
    for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i];
  }
  return out;
}

std::vector<double> sampled_activations_i8dot(const float* x, int64_t K, const OutputSample& s,
                                              int64_t block_k) {
  MIXQ_CHECK_ARG(block_k >= 1, "sampled_activations_i8dot: block_k (", block_k, ") must be >= 1");
  const int64_t R = static_cast<int64_t>(s.rows.size());
  std::vector<double> out(static_cast<size_t>(R * K));
  std::vector<float> piece;
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + s.rows[r] * K;
    for (int64_t b0 = 0; b0 < K; b0 += block_k) {
      const int64_t b1 = std::min(K, b0 + block_k);
      for (int64_t k0 = b0; k0 < b1; k0 += 256) {  // the backend's segment length limit
        const int64_t len = std::min<int64_t>(256, b1 - k0);
        piece.assign(row + k0, row + k0 + len);
        const QuantizedActivationsBuffer q =
            quantize_activations_int8_block(TensorView(piece.data(), DType::F32, {1, len}), len);
        for (int64_t k = 0; k < len; ++k)
          out[r * K + k0 + k] = double(q.int8_code(0, k)) * q.scale_of(0, 0) + q.offset_of(0, 0);
      }
    }
  }
  return out;
}

std::vector<float> sampled_weight_rows(int64_t K, const OutputSample& s,
                                       const std::function<void(int64_t, float*)>& weight_row) {
  std::vector<float> rows(s.cols.size() * static_cast<size_t>(K));
  for (size_t c = 0; c < s.cols.size(); ++c) weight_row(s.cols[c], rows.data() + c * K);
  return rows;
}

std::vector<double> reference_on_sample(const std::vector<double>& xs, int64_t K,
                                        const OutputSample& s, const std::vector<float>& wrows) {
  const size_t R = s.rows.size(), C = s.cols.size();
  MIXQ_CHECK(wrows.size() == C * static_cast<size_t>(K), ErrorCode::Internal,
             "reference_on_sample: weight sample size");
  std::vector<double> ref(R * C);
  for (size_t c = 0; c < C; ++c) {
    const float* w = wrows.data() + c * K;
    for (size_t r = 0; r < R; ++r) {
      const double* x = xs.data() + r * K;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[k] * double(w[k]);
      ref[r * C + c] = acc;
    }
  }
  return ref;
}

double relative_error(const float* y, int64_t N, const OutputSample& s,
                      const std::vector<double>& ref) {
  const size_t C = s.cols.size();
  double num = 0, den = 0;
  for (size_t r = 0; r < s.rows.size(); ++r)
    for (size_t c = 0; c < C; ++c) {
      const double v = y[s.rows[r] * N + s.cols[c]];
      if (!std::isfinite(v)) return NAN;
      const double d = v - ref[r * C + c];
      num += d * d;
      den += ref[r * C + c] * ref[r * C + c];
    }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace mixq::bench
