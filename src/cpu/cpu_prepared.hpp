// The CPU backend's prepared weight and the shared compute / epilogue steps used by linear
// (cpu_backend.cpp) and the implicit-GEMM conv2d (cpu_conv.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/prepared.hpp"
#include "cpu/kernel_policy.hpp"
#include "cpu/kernels.hpp"
#include "cpu/packed_weight.hpp"

namespace mixq::cpu {

// Activation rows staged for the kernels (row stride Kp, per-segment stride n_segs).
struct StagedRows {
  const float* xf = nullptr;
  const float* xsum = nullptr;
  const uint8_t* xb = nullptr;
  const ActSegment* xs = nullptr;
  const float* xpack = nullptr;  // float GEMM: rows packed per register tile (or null)
};

// Where output element (m, n) goes: base + row_off(m) + n * col_stride (in elements).
struct OutMap {
  void* base;
  DType dtype;
  const int64_t* row_off;  // per tile row
  int64_t col_stride;
};

class CpuPrepared final : public PreparedImpl {
 public:
  CpuPrepared(const QuantizedWeight& w, const ConvGeometry* g, const PrepareOptions& o);

  std::string kernel_name(int64_t M) const override;
  size_t workspace_size(int64_t M) const override;
  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override;
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override;
  void conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p, const Epilogue& ep,
              const ExecContext& ctx) const override;

  // The path of a linear call with M rows (conv2d runs conv_path_).
  CpuPath path_for(int64_t M) const { return M <= small_rows_ ? small_path_ : path_; }
  static bool int_path(CpuPath p) {
    return p == CpuPath::W8A8 || p == CpuPath::I8Dot || p == CpuPath::I8PerTensor;
  }
  int64_t n_cols() const { return pw_.n_panels * kLanes; }  // N padded to panels
  // Staging bytes for `rows` activation rows.
  size_t staging_bytes(int64_t rows, CpuPath path) const;
  StagedRows carve_staging(void* mem, int64_t rows, CpuPath path) const;

  // c[rows][ldc] (float, or int32 for per-tensor) for panels [p0, p1) (column (p - p0) * 16).
  void compute(const StagedRows& st, int64_t rows, int64_t p0, int64_t p1, bool chunked,
               CpuPath path, void* c, int64_t ldc) const;
  // Large-M float path: K chunks of dequantized f32 weight panels times packed activation
  // tiles (x: staged rows [rows][Kp]); c as in compute().
  // xpack: the rows already packed by pack_gemm_chunk for every chunk ([chunk][tile][k][rows],
  // chunk ci at xpack + rows * kp0(ci)), or null to pack per chunk into thread scratch.
  void compute_gemm(const float* x, const float* xpack, int64_t rows, int64_t p0, int64_t p1,
                    float* c, int64_t ldc) const;
  // Packs rows [0, rows) of staged x ([rows][Kp]) for K chunk ci as [tile][k][tile rows].
  void pack_gemm_chunk(const float* x, int64_t rows, size_t ci, float* ap) const;
  bool prepacks(int64_t M) const;  // linear() packs the GEMM activations once
  // bias + clamp (+ requantization) of c into the output.
  void finish(const void* c, int64_t ldc, int64_t rows, int64_t p0, int64_t p1,
              const Epilogue& ep, const OutMap& out) const;

 private:
  // Stages activation rows [m0, m1) for `path` into st (row m at row m of the staging).
  using StageFn = std::function<void(CpuPath path, const StagedRows& st, int64_t m0, int64_t m1)>;
  // linear's driver: workspace, staging (by `stage`, in parallel row blocks), compute, epilogue.
  void run_linear(int64_t M, const TensorView& y, const Epilogue& ep, const ExecContext& ctx,
                  const StageFn& stage) const;

  PackedWeight pw_;
  const KernelTable* kt_;
  // choose_path's answer is one path up to small_rows_ rows and another above (kernel_policy.hpp).
  int64_t small_rows_;
  CpuPath small_path_;  // M <= small_rows_
  CpuPath path_;        // M > small_rows_
  CpuPath conv_path_;   // conv2d: exact f32 activations (or per-tensor int8) whatever the mode
  bool direct_f32_;                    // dense f32 codes without scales: GEMM reads them in place
  std::vector<int64_t> chunk_starts_;  // segment indices starting a K chunk (plus n_segs)
  std::vector<int64_t> qsum_total_;    // per output row: sum of codes over K (per-tensor)
  std::vector<float> row_scale_;       // per output row: per-channel scale (per-tensor)
};

}  // namespace mixq::cpu
