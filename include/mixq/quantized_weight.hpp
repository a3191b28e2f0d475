// The canonical quantized weight: one lossless representation that every scheme and every
// checkpoint format converts into, and that every backend prepares (repacks) from.
//
// Logical matrix W[N][K] (N = output features, K = reduction). Codes are stored row-major with
// K contiguous; for the 4-bit code types two codes share a byte (element k of a row is the low
// nibble of byte k/2 when k is even, the high nibble when k is odd) and each row starts on a
// byte boundary (row_bytes = ceil(K/2)).
//
// Scales (and zeros) are indexed by (n_block(n), k_block(k)) = ((n + n_phase) / block_n,
// (k + k_phase) / block_k); the first and last block along each axis may be partial (K = 7392
// with block_k = 128 has 58 blocks, the last holding 96 elements). The phases are 0 except in a
// tensor-parallel shard whose split cut a block (mixq/shard.hpp): column 0 of such a shard is
// column k_phase of its first K block, whose scale is kept whole, so the shard dequantizes to the
// global weight's values bit for bit. An act-order shard may instead list its K blocks'
// boundaries (k_block_starts), the blocks then having any sizes up to block_k
// (docs/decisions/tensor-parallel-shards.md).
//
// Dequantization of element (n, k), with q the code, s, o, z the block's scale, offset, zero:
//   ZeroKind::None       w = value(q) * s            (dense float codes without scales: w = value(q))
//   ZeroKind::Offset     w = value(q) * s + o        (o stored in scale_type)
//   ZeroKind::ZeroPoint  w = s * (q - z)             (z an int32, integer code types only)
// value(q) is the integer code for I4/U4/I8/U8, the decoded float for F8E4M3/F16/BF16/F32.
// The float arithmetic is exactly this, in f32, unfused: ggml's and GPTQ's dequantizers are
// reproduced bit for bit (see docs/formats-notes.md).
//
// Optional K permutation (GPTQ act-order): canonical column j holds original column k_perm[j], so
//   Y[m][n] = sum_j X[m][k_perm[j]] * W[n][j].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixq/dtype.hpp"

namespace mixq {

enum class ZeroKind : uint8_t { None, Offset, ZeroPoint };
const char* zero_kind_name(ZeroKind z);

// The same matrix in ggml's own blocks, as a GGUF file stores it: N rows of K / QK blocks of
// ggml type `type` (the GgmlType id of mixq/formats/ggml_blocks.hpp), row-major, bytes exactly as
// in the file. Attached by ggml_to_canonical (and so by load_weight of a GGUF tensor) for the
// block-quantized types; a backend with kernels for the type (CPU) prepares from these bytes at
// the type's own bits per weight, the others from the canonical fields, which describe the same
// matrix bit for bit (docs/decisions/ggml-native-weights.md).
struct GgmlBlocks {
  uint32_t type = 0;
  std::vector<uint8_t> data;
};

struct QuantizedWeight {
  int64_t N = 0;
  int64_t K = 0;
  DType code_type = DType::I4;   // I4, U4, I8, U8, F8E4M3, or dense F16 / BF16 / F32
  int64_t block_k = 0;           // elements along K sharing one scale (K = per-channel)
  int64_t block_n = 1;           // rows along N sharing one scale (1, or 128 for FP8 blocks)
  DType scale_type = DType::F32;  // F32, F16 or BF16
  ZeroKind zero_kind = ZeroKind::None;
  bool has_scales = true;        // false only for dense float codes (F16/BF16/F32)

  std::vector<uint8_t> codes;    // N * row_bytes()
  std::vector<uint8_t> scales;   // n_blocks_n() * n_blocks_k() elements of scale_type
  std::vector<uint8_t> zeros;    // Offset: same shape, scale_type; ZeroPoint: int32
  std::vector<int32_t> k_perm;   // empty, or a permutation of [0, K)

  // Block phases (shards only, see above): k_phase in [0, block_k), n_phase in [0, block_n).
  int64_t k_phase = 0;
  int64_t n_phase = 0;
  // Empty, or n_blocks_k() + 1 non-decreasing canonical column indices from 0 to K: K block kb
  // covers columns [k_block_starts[kb], k_block_starts[kb + 1]), at most block_k of them. Set
  // only by shard() for an act-order weight (with k_phase = 0).
  std::vector<int32_t> k_block_starts;

  // Free-form provenance ("gguf:Q4_K", "gptq-v1 4bit g128 desc_act", ...), shown by inspect.
  std::string origin;

  // Optional native ggml blocks of this matrix (see GgmlBlocks), shared between copies. Whoever
  // edits codes / scales / zeros / k_perm of a loaded weight must reset it: prepare() trusts that
  // both forms hold the same values (validate() checks the geometry, not the values).
  std::shared_ptr<const GgmlBlocks> ggml;

  int64_t row_bytes() const { return dtype_bytes(code_type, K); }
  int64_t n_blocks_k() const {
    if (!k_block_starts.empty()) return static_cast<int64_t>(k_block_starts.size()) - 1;
    return block_k > 0 ? (K + k_phase + block_k - 1) / block_k : 0;
  }
  int64_t n_blocks_n() const { return block_n > 0 ? (N + n_phase + block_n - 1) / block_n : 0; }
  int64_t n_scale_entries() const { return has_scales ? n_blocks_n() * n_blocks_k() : 0; }
  bool per_channel() const { return block_k == K && k_phase == 0 && k_block_starts.empty(); }
  // Whether blocks are the plain uniform grid from column / row 0 (what most kernels assume).
  bool plain_blocks() const { return k_phase == 0 && n_phase == 0 && k_block_starts.empty(); }
  // Scale block of row n / canonical column k, and the canonical columns [begin, end) of K block
  // kb (clipped to [0, K)). Valid after validate().
  int64_t n_block(int64_t n) const { return (n + n_phase) / block_n; }
  int64_t k_block(int64_t k) const;
  int64_t k_block_begin(int64_t kb) const;
  int64_t k_block_end(int64_t kb) const;

  // Accessors (bounds are the caller's responsibility; validate() first).
  int32_t code_int(int64_t n, int64_t k) const;  // integer code types only
  float code_value(int64_t n, int64_t k) const;  // value(q) as above, any code type
  float scale(int64_t nb, int64_t kb) const;
  float offset(int64_t nb, int64_t kb) const;    // ZeroKind::Offset
  int32_t zero_point(int64_t nb, int64_t kb) const;  // ZeroKind::ZeroPoint
  float dequant(int64_t n, int64_t k) const;     // exactly the formula above, in f32

  void set_code_int(int64_t n, int64_t k, int32_t q);  // integer code types, range-checked

  // Throws mixq::Error naming the field and values when any invariant is broken: sizes of the
  // buffers, block sizes (block_k >= 1, block_n in {1, 128} or any >= 1 for dense), code/zero
  // combinations, zero points within the code range, permutation validity, finite scales; and,
  // when `ggml` is set, a known block type whose block divides K, N * K / QK blocks of bytes,
  // and no k_perm.
  void validate() const;

  // Allocates zero-filled buffers for the current geometry (N, K, types, blocks, zero_kind).
  void allocate();

  // Bytes of codes + scales + zeros (what a kernel must stream).
  int64_t storage_bytes() const;
  // Effective bits per weight, storage_bytes * 8 / (N * K).
  double bits_per_weight() const;
  std::string describe() const;  // "i4 [6144 x 4096] g128 scales f16 zero=offset"
};

// Dequantize the whole matrix to f32 [N][K] (canonical column order, i.e. not un-permuted).
std::vector<float> dequantize_to_f32(const QuantizedWeight& w);
// Dequantize rows [n0, n1) into out (row-major, (n1 - n0) x K), in original K order when
// `original_order` (undoing k_perm), else canonical order.
void dequantize_rows(const QuantizedWeight& w, int64_t n0, int64_t n1, float* out,
                     bool original_order);

}  // namespace mixq
