// Public activation quantizers (mixq/act_quant.hpp): the host quantizers into a
// QuantizedActivationsBuffer, the caller-buffer quantizers (argument validation, the CPU
// implementation as a copy of the host result, dispatch to CUDA), and the layout's checks shared
// with linear(QuantizedActivations) and the reference kernels (core/act_layout.hpp).
#include "mixq/act_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/act_layout.hpp"
#include "core/act_quant_dispatch.hpp"
#include "mixq/error.hpp"
#include "mixq/numeric.hpp"
#include "mixq/reference.hpp"

namespace mixq {

int64_t act_quant_row_pitch(int64_t K) { return (K + 15) / 16 * 16; }
int64_t act_quant_meta_pitch(int64_t M) { return (M + 3) / 4 * 4; }

namespace detail {

void check_act_place(const TensorView& t, const ActPlace& at, const char* op, const char* arg) {
  MIXQ_CHECK_ARG(t.device == at.device && (at.index < 0 || t.device_index == at.index), op, ": ",
                 arg, " (", t.describe(), ", device index ", t.device_index, ") is not on ",
                 at.what, " (", device_name(at.device), at.index < 0 ? "" : " ",
                 at.index < 0 ? std::string() : std::to_string(at.index), ")");
}

void check_act_codes(const TensorView& q, const ActLayout& p, bool fp8, const ActPlace& at,
                     const char* op, const char* arg) {
  check_act_place(q, at, op, arg);
  check_view(q, arg, 2, at.device);
  check_rows_contiguous(q, arg);
  if (fp8)
    MIXQ_CHECK_ARG(q.dtype == DType::F8E4M3 || q.dtype == DType::U8, op, ": ", arg,
                   " must be f8e4m3 or u8, got ", q.describe());
  else
    MIXQ_CHECK_ARG(q.dtype == DType::I8, op, ": ", arg, " must be i8, got ", q.describe());
  const int64_t pitch = act_quant_row_pitch(p.K);
  MIXQ_CHECK_ARG(q.shape[0] == p.M && (q.shape[1] == p.K || q.shape[1] == pitch), op, ": ", arg,
                 " must be [M][K] or [M][row pitch] = [", p.M, "][", p.K, "] or [", p.M, "][",
                 pitch, "], got ", q.describe());
  MIXQ_CHECK_ARG(q.stride[0] >= pitch, op, ": ", arg, " row stride (", q.stride[0],
                 ") is smaller than act_quant_row_pitch(K) = ", pitch, " (the zero-padded row)");
}

void check_act_meta(const TensorView& t, DType dtype, const ActLayout& p, const ActPlace& at,
                    const char* op, const char* arg) {
  check_act_place(t, at, op, arg);
  check_view(t, arg, 2, at.device);
  check_rows_contiguous(t, arg);
  MIXQ_CHECK_ARG(t.dtype == dtype, op, ": ", arg, " must be ", dtype_name(dtype), ", got ",
                 t.describe());
  const int64_t pitch = act_quant_meta_pitch(p.M);
  MIXQ_CHECK_ARG(t.shape[0] == p.n_blocks && (t.shape[1] == p.M || t.shape[1] == pitch), op,
                 ": ", arg, " must be [n_blocks][M] or [n_blocks][meta pitch] = [", p.n_blocks,
                 "][", p.M, "] or [", p.n_blocks, "][", pitch, "] (block-major, M contiguous), got ",
                 t.describe());
  MIXQ_CHECK_ARG(t.stride[0] >= pitch, op, ": ", arg, " row stride (", t.stride[0],
                 ") is smaller than act_quant_meta_pitch(M) = ", pitch);
}

void check_act_meta_strides(const TensorView& scale, const TensorView& offset,
                            const TensorView& sums, const char* op, const char* arg_prefix) {
  MIXQ_CHECK_ARG(offset.stride[0] == scale.stride[0] && sums.stride[0] == scale.stride[0], op,
                 ": ", arg_prefix, "scale, ", arg_prefix, "offset and ", arg_prefix,
                 "sums must share one row stride, got ", scale.stride[0], ", ", offset.stride[0],
                 ", ", sums.stride[0]);
}

ActLayout check_quantized_activations(const QuantizedActivations& xq, ActQuant kind, int64_t K,
                                      const ActPlace& at, const char* op, const char* name) {
  const std::string n(name);
  const std::string q = n + ".q", scale = n + ".scale", offset = n + ".offset", sums = n + ".sums";
  MIXQ_CHECK_ARG(xq.block >= 1, op, ": ", name, ".block (", xq.block, ") must be >= 1");
  check_view(xq.q, q.c_str(), 2, at.device);  // M comes from q
  const ActLayout lay{xq.q.shape[0], K, (K + xq.block - 1) / xq.block};
  const bool fp8 = kind == ActQuant::Fp8Block;
  check_act_codes(xq.q, lay, fp8, at, op, q.c_str());
  check_act_meta(xq.scale, DType::F32, lay, at, op, scale.c_str());
  if (!fp8) {
    check_act_meta(xq.offset, DType::F32, lay, at, op, offset.c_str());
    check_act_meta(xq.sums, DType::I32, lay, at, op, sums.c_str());
    check_act_meta_strides(xq.scale, xq.offset, xq.sums, op, (n + ".").c_str());
  }
  return lay;
}

}  // namespace detail

// ---- Host quantizers into a QuantizedActivationsBuffer ----

QuantizedActivations QuantizedActivationsBuffer::view() const {
  // A buffer of 0 rows has no memory; its views point at this (never read) so that they are
  // valid views of 0 rows, as a caller's would be.
  alignas(16) static const uint8_t kNoRows[16] = {};
  const auto base = [](const auto& v) {
    return const_cast<void*>(v.empty() ? static_cast<const void*>(kNoRows)
                                       : static_cast<const void*>(v.data()));
  };
  const int64_t nb = n_blocks();
  QuantizedActivations v;
  v.kind = kind;
  v.block = block;
  v.q = TensorView::strided(base(q), kind == ActQuant::Fp8Block ? DType::F8E4M3 : DType::I8,
                            {M, K}, {row_pitch, 1});
  v.scale = TensorView::strided(base(scale), DType::F32, {nb, M}, {meta_pitch, 1});
  if (kind == ActQuant::Int8Block) {
    v.offset = TensorView::strided(base(offset), DType::F32, {nb, M}, {meta_pitch, 1});
    v.sums = TensorView::strided(base(sums), DType::I32, {nb, M}, {meta_pitch, 1});
  }
  return v;
}

namespace {

// x [M][K] f32 / f16 / bf16, rows contiguous, on `device` (every quantizer's input check).
void check_act_input(const TensorView& x, const char* op, Device device) {
  check_view(x, op, 2, device);
  check_rows_contiguous(x, op);
  MIXQ_CHECK_ARG(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16, op,
                 ": x must be f32, f16 or bf16, got ", x.describe());
}

// Zero-filled storage in the QuantizedActivations layout with the tightest pitches.
QuantizedActivationsBuffer alloc_buffer(ActQuant kind, int64_t M, int64_t K, int64_t block) {
  QuantizedActivationsBuffer a;
  a.kind = kind;
  a.M = M;
  a.K = K;
  a.block = block;
  a.row_pitch = act_quant_row_pitch(K);
  a.meta_pitch = act_quant_meta_pitch(M);
  const size_t meta = static_cast<size_t>(a.n_blocks() * a.meta_pitch);
  a.q.assign(static_cast<size_t>(M * a.row_pitch), 0);
  a.scale.assign(meta, 0.f);
  if (kind == ActQuant::Int8Block) {
    a.offset.assign(meta, 0.f);
    a.sums.assign(meta, 0);
  }
  return a;
}

}  // namespace

QuantizedActivationsBuffer quantize_activations_int8_block(const TensorView& x, int64_t block) {
  check_act_input(x, "quantize_activations_int8_block", Device::CPU);
  MIXQ_CHECK_ARG(block >= 1, "quantize_activations_int8_block: block (", block, ") must be >= 1");
  QuantizedActivationsBuffer a = alloc_buffer(ActQuant::Int8Block, x.shape[0], x.shape[1], block);
  const int64_t nb = a.n_blocks();
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t k0 = b * block, k1 = std::min(a.K, k0 + block);
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t k = k0; k < k1; ++k) {
        const float v = static_cast<float>(ref::load_as_double(x, m, k));
        // min/max would skip a NaN and an infinity makes the scale inf: either way the block's
        // codes would be silently meaningless, so refuse instead.
        MIXQ_CHECK_ARG(std::isfinite(v), "quantize_activations_int8_block: x[", m, ", ", k,
                       "] is not finite (", v, ")");
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const float s = (hi - lo) / 255.0f;
      MIXQ_CHECK_ARG(std::isfinite(s), "quantize_activations_int8_block: row ", m, " block ", b,
                     " spans [", lo, ", ", hi, "], too wide for an f32 scale");
      const float o = s > 0 ? lo + 128.0f * s : lo;
      const float inv_s = s > 0 ? 1.0f / s : 0.f;
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const int32_t qv =
            s > 0 ? int8_act_code(static_cast<float>(ref::load_as_double(x, m, k)), o, inv_s) : 0;
        a.q[static_cast<size_t>(m * a.row_pitch + k)] =
            static_cast<uint8_t>(static_cast<int8_t>(qv));
        sum += qv;
      }
      const size_t i = static_cast<size_t>(b * a.meta_pitch + m);
      a.scale[i] = s;
      a.offset[i] = o;
      a.sums[i] = sum;
    }
  return a;
}

QuantizedActivationsBuffer quantize_activations_fp8_block(const TensorView& x) {
  check_act_input(x, "quantize_activations_fp8_block", Device::CPU);
  constexpr int64_t G = QuantizedActivations::kFp8Block;
  QuantizedActivationsBuffer a = alloc_buffer(ActQuant::Fp8Block, x.shape[0], x.shape[1], G);
  const int64_t ng = a.n_blocks();
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t k0 = g * G, k1 = std::min(a.K, k0 + G);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k)
        amax = std::max(amax, std::fabs(static_cast<float>(ref::load_as_double(x, m, k))));
      const float s = std::max(amax, 1e-10f) / 448.0f;
      for (int64_t k = k0; k < k1; ++k)
        a.q[static_cast<size_t>(m * a.row_pitch + k)] =
            f32_to_e4m3(static_cast<float>(ref::load_as_double(x, m, k)) / s);
      a.scale[static_cast<size_t>(g * a.meta_pitch + m)] = s;
    }
  return a;
}

// ---- Quantizers into caller buffers ----

namespace {

using detail::ActLayout;
using detail::ActPlace;

ActLayout check_x(const TensorView& x, const char* op, int64_t block) {
  check_act_input(x, op, x.device);
  MIXQ_CHECK_ARG(x.shape[0] >= 1 && x.shape[1] >= 1, op, ": empty x ", x.describe());
  return ActLayout{x.shape[0], x.shape[1], (x.shape[1] + block - 1) / block};
}

ActPlace place_of(const TensorView& x) { return ActPlace{x.device, x.device_index, "x's device"}; }

// Host: the buffer's code rows, zero padding up to the row pitch included, into q's rows.
void put_codes(const TensorView& q, const QuantizedActivationsBuffer& a) {
  auto* base = static_cast<uint8_t*>(q.data);
  for (int64_t m = 0; m < a.M; ++m)
    std::memcpy(base + m * q.stride[0], a.q.data() + m * a.row_pitch,
                static_cast<size_t>(a.row_pitch));
}

// Host: the buffer's meta rows (M values each) into t's rows; t's rows M.. stay untouched.
template <typename T>
void put_meta(const TensorView& t, const std::vector<T>& v, const QuantizedActivationsBuffer& a) {
  T* base = static_cast<T*>(t.data);
  for (int64_t kb = 0; kb < a.n_blocks(); ++kb)
    std::memcpy(base + kb * t.stride[0], v.data() + kb * a.meta_pitch,
                static_cast<size_t>(a.M) * sizeof(T));
}

}  // namespace

void quantize_activations_fp8_block(const TensorView& x, const TensorView& q,
                                    const TensorView& scale, const ExecContext& ctx) {
  const char* op = "quantize_activations_fp8_block";
  const ActLayout p = check_x(x, op, QuantizedActivations::kFp8Block);
  detail::check_act_codes(q, p, true, place_of(x), op, "q");
  detail::check_act_meta(scale, DType::F32, p, place_of(x), op, "scale");
  if (x.device == Device::CUDA) {
    detail::quantize_activations_fp8_block_cuda(x, q, scale, ctx);
    return;
  }
  const QuantizedActivationsBuffer a = quantize_activations_fp8_block(x);
  put_codes(q, a);
  put_meta(scale, a.scale, a);
}

void quantize_activations_int8_block(const TensorView& x, int64_t block, const TensorView& q,
                                     const TensorView& scale, const TensorView& offset,
                                     const TensorView& sums, const ExecContext& ctx) {
  const char* op = "quantize_activations_int8_block";
  MIXQ_CHECK_ARG(block == 32 || block == 64 || block == 128 || block == 256, op, ": block (",
                 block, ") must be 32, 64, 128 or 256");
  const ActLayout p = check_x(x, op, block);
  detail::check_act_codes(q, p, false, place_of(x), op, "q");
  detail::check_act_meta(scale, DType::F32, p, place_of(x), op, "scale");
  detail::check_act_meta(offset, DType::F32, p, place_of(x), op, "offset");
  detail::check_act_meta(sums, DType::I32, p, place_of(x), op, "sums");
  detail::check_act_meta_strides(scale, offset, sums, op, "");
  if (x.device == Device::CUDA) {
    detail::quantize_activations_int8_block_cuda(x, block, q, scale, offset, sums, ctx);
    return;
  }
  const QuantizedActivationsBuffer a = quantize_activations_int8_block(x, block);
  put_codes(q, a);
  put_meta(scale, a.scale, a);
  put_meta(offset, a.offset, a);
  put_meta(sums, a.sums, a);
}

}  // namespace mixq
