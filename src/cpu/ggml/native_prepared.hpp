// The CPU backend's prepared weight for GGUF block tensors at their native width: what
// prepare() builds for BackendKind::CPU when the weight carries its ggml blocks
// (QuantizedWeight::ggml), the activations stay float (ActQuant::None), it is a linear weight
// and Tuning::cpu_ggml_native is not Off. See docs/cpu-backend.md ("GGUF weights at their
// native width") and docs/decisions/ggml-native-weights.md.
#pragma once

#include <memory>

#include "core/prepared.hpp"
#include "cpu/ggml/native_kernels.hpp"
#include "cpu/kernels.hpp"

namespace mixq::cpu::ggml {

// Rows at or below which the integer (q8 activation) path is the default; above it the exact
// f32 GEMM tile runs. force_kernel "cpu_f32" / "cpu_i8dot" pick one path for every M.
// Measured (bench/results/cpu_ggml_native.md, 4096 x 14336 Q4_K, 2 threads): at M = 16 the
// integer path took about half the f32 GEMM's time, at M = 64 the same.
constexpr int64_t kNativeI8MaxRows = 16;

enum class NativePath : uint8_t { I8, F32 };

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
  const KernelTable* kt_;  // the canonical backend's GEMM tile (large-M exact path)
  int bias_ = 0;
  bool has_min_ = false;
  std::string force_;
};

// Whether prepare_cpu should build a NativePrepared for this weight and these options.
bool use_native(const QuantizedWeight& w, const ConvGeometry* conv, const PrepareOptions& o);

}  // namespace mixq::cpu::ggml
