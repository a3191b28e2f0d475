// The CPU backend's repacked weight: what prepare_cpu() builds once from the canonical weight.
//
// Layout (chosen so that one 64-byte load feeds one AVX-512 register with no shuffles):
// - N is cut into panels of 16 output rows (one zmm lane per row); the last panel is padded with
//   zero rows whose outputs are never stored.
// - K is cut into segments: each quantization block, split into pieces of at most 256 elements
//   (so int32 dot products of one segment cannot overflow, and K chunks for cache blocking can
//   end on any segment boundary), each piece padded to a multiple of 8 with code 0 (and with
//   activation 0 at run time, so padding contributes nothing). A segment keeps its block's
//   scale/offset, so splitting is exact (the dequantization is linear in the codes).
// - Codes of one panel are stored in groups of 8 k:
//     8-bit codes (I8, U8, F8E4M3): 128 bytes = two zmm; zmm h holds, for lane r, the 4 bytes of
//       row r at k = 4h..4h+3 (the dword layout that vpdpbusd consumes directly);
//     4-bit codes (I4, U4): 64 bytes = one zmm; lane r's byte j holds u(k=j) in the low nibble
//       and u(k=4+j) in the high nibble, u = q + 8 for I4 (unsigned nibble), q for U4;
//     dense F16/BF16 (2 bytes) and F32 (4 bytes): [8 k][16 lanes], one vector load per k.
// - Per (panel, segment, lane): scale, offset (only when the weight has one; for the zero-point
//   form offset = -s*z) and the integer code sum over the segment (for the int8 paths).
//
// Every weight then dequantizes as w = q * scale + offset with q the integer code (signed for
// I4/I8) or the decoded float (F8/F16/BF16/F32, scale 1 without scales).
#pragma once

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>  // madvise (transparent huge pages)
#endif

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "mixq/quantized_weight.hpp"

namespace mixq::cpu {

enum class CodeKind : uint8_t { Int4, Int8, Uint8, Fp8, F16, BF16, F32 };

// A 64-byte aligned byte buffer left uninitialized on allocation (pack_weight zero-fills it in
// parallel, so the pages are first touched by the threads that fill them).
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t n) : n_(n) {
    const size_t bytes = (n + 63) / 64 * 64 + 64;
    // Large weights on 2 MiB pages: a decode streams them once per call, and with 4 KiB pages
    // every 4 KiB of the stream is a TLB miss (with THP in "madvise" mode, as on most servers,
    // memory gets huge pages only when asked).
    constexpr size_t kHuge = size_t(2) << 20;
    if (bytes >= 2 * kHuge) {
      const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
      p_.reset(static_cast<uint8_t*>(std::aligned_alloc(kHuge, rounded)));
#if defined(MADV_HUGEPAGE)
      // the whole huge pages only: the tail stays on small pages (no partly used 2 MiB page)
      if (p_) ::madvise(p_.get(), bytes / kHuge * kHuge, MADV_HUGEPAGE);  // a hint: errors are ignored
#endif
    } else {
      p_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
    }
    if (!p_) throw std::bad_alloc();
  }
  uint8_t* data() { return p_.get(); }
  const uint8_t* data() const { return p_.get(); }
  size_t size() const { return n_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> p_;
  size_t n_ = 0;
};

struct Segment {
  int64_t k0;     // first canonical column
  int32_t valid;  // real columns (<= 256)
  int32_t len;    // padded length (multiple of 8)
  int64_t kp0;    // first padded column
  int64_t kb;     // the weight's K block (scale column) this segment belongs to
};

struct PackedWeight {
  int64_t N = 0, K = 0, Kp = 0, n_panels = 0;
  CodeKind kind = CodeKind::Int4;
  int32_t code_shift = 0;   // Int4: u = q + code_shift (8 for I4, 0 for U4)
  bool has_offset = false;
  int64_t group_bytes = 0;  // bytes per 8 k of one panel
  std::vector<Segment> segs;
  std::vector<int32_t> k_perm;  // canonical column j reads original column k_perm[j] (or empty)
  AlignedBytes codes;           // [panel][Kp/8][group_bytes], 64-byte aligned
  std::vector<float> scale;     // [panel][seg][16]
  std::vector<float> offset;    // [panel][seg][16] (empty unless has_offset)
  std::vector<int32_t> qsum;    // [panel][seg][16] sum of integer codes q (integer kinds only)

  int64_t n_segs() const { return static_cast<int64_t>(segs.size()); }
  int64_t panel_bytes() const { return Kp / 8 * group_bytes; }
  const uint8_t* panel_codes(int64_t p) const { return codes.data() + p * panel_bytes(); }
  bool is_integer() const {
    return kind == CodeKind::Int4 || kind == CodeKind::Int8 || kind == CodeKind::Uint8;
  }
  // Scalar decode of code (lane r of panel p, padded column kp) as q (used by scalar kernels).
  float code_value(int64_t p, int r, int64_t kp) const;
  int32_t code_int(int64_t p, int r, int64_t kp) const;  // integer kinds: q
  int32_t code_raw_u8(int64_t p, int r, int64_t kp) const;  // stored byte / nibble
};

// Splits [0, K) into segments following the weight's K blocks (dense without scales: one block).
// A shard's partial first block (k_phase) or listed blocks (k_block_starts) are segments like
// any other: each holds its own columns only, so no padding column of the weight is invented.
std::vector<Segment> make_segments(const QuantizedWeight& w);

// Builds the packed layout on `threads` threads (0 = default). The weight was validated by the
// caller.
PackedWeight pack_weight(const QuantizedWeight& w, int threads = 0);

}  // namespace mixq::cpu
