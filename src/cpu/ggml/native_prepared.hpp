// The CPU backend's prepared weight for GGUF block tensors at their native width: what
// prepare() builds for BackendKind::CPU when the weight carries its ggml blocks
// (QuantizedWeight::ggml), the activations stay float (ActQuant::None), it is a linear weight,
// Tuning::cpu_ggml_native is not Off, and (under Auto) the native kernels were measured faster
// than the canonical ones for this type and kernel set. See docs/cpu-backend.md ("GGUF weights
// at their native width") and docs/decisions/ggml-native-weights.md.
#pragma once

#include <memory>

#include "core/prepared.hpp"
#include "cpu/ggml/native_kernels.hpp"
#include "cpu/kernels.hpp"

namespace mixq::cpu::ggml {

enum class NativePath : uint8_t { I8, F32 };

// Largest M for which cpu_activations = auto runs the native integer path (above it: the exact
// f32 GEMM over SIMD-decoded chunks), per kernel set; kAnyRows: every M. Measured numbers:
// docs/decisions/ggml-native-weights.md.
int64_t native_i8_max_rows(const std::string& isa, GgmlType type);

class NativePrepared final : public PreparedImpl {
 public:
  NativePrepared(const QuantizedWeight& w, const PrepareOptions& o);

  std::string kernel_name(int64_t M) const override;
  size_t workspace_size(int64_t M) const override;
  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override;

  const NativeWeight& weight() const { return nw_; }
  NativePath path_for(int64_t M) const;

 private:
  NativeWeight nw_;
  const NativeKernels* nk_;
  const NativeKernels* nk_one_row_;  // the set of M = 1 calls (Tuning::cpu_avx2_single_row)
  const KernelTable* kt_;  // the canonical backend's GEMM tile (exact path)
  std::string force_;
  Tuning::CpuActivations mode_;
  int64_t i8_max_rows_;
  int64_t decode_min_rows_;  // Tuning::cpu_ggml_decode_min_rows resolved
  bool prefetch_l1_ = false;  // Tuning::cpu_l1_prefetch resolved for this CPU
};

// Whether prepare_cpu should build a NativePrepared for this weight and these options.
bool use_native(const QuantizedWeight& w, const ConvGeometry* conv, const PrepareOptions& o);

}  // namespace mixq::cpu::ggml
