// Internal: what a backend's prepared weight must implement, and the backend factories.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "mixq/ops.hpp"

namespace mixq {

// Convolution geometry of a prepared conv weight (absent for a linear weight).
struct ConvGeometry {
  int64_t Ci = 0, Kh = 1, Kw = 1;
  ConvKOrder order = ConvKOrder::KhKwCi;
};

struct PreparedImpl {
  BackendKind backend = BackendKind::Reference;
  PrepareOptions opts;
  int64_t N = 0, K = 0;
  std::optional<ConvGeometry> conv;

  virtual ~PreparedImpl() = default;
  virtual std::string kernel_name(int64_t M) const = 0;
  virtual std::string kernel_name(int64_t M, DType /*activation*/) const { return kernel_name(M); }
  virtual size_t workspace_size(int64_t /*M*/) const { return 0; }
  // A conv2d call's scratch on input x (shape and dtype; data may be null) with these parameters,
  // validated by ops.cpp (conv weight, rank 4, output size >= 1); rows = B * Ho * Wo, its GEMM
  // rows. Default: workspace_size(rows). (The CUDA weight-only conv adds the NHWC copies of an
  // NCHW call.)
  virtual size_t conv_workspace_size(const TensorView& /*x*/, const Conv2dParams& /*p*/,
                                     int64_t rows) const {
    return workspace_size(rows);
  }
  // Arguments were validated by ops.cpp (shapes, devices, dtypes allowed for opts.act).
  virtual void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
                      const ExecContext& ctx) const = 0;
  virtual void conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p,
                      const Epilogue& ep, const ExecContext& ctx) const;
  // Pre-quantized activations (mixq/act_quant.hpp), validated by ops.cpp: xq.kind == opts.act
  // and its block, the layout for M = xq.q.shape[0] >= 1, every tensor on this weight's device
  // (CUDA: the GEMMs' alignment too), y [M][N]. Default: Unsupported.
  virtual void linear_quantized(const QuantizedActivations& xq, const TensorView& y,
                                const Epilogue& ep, const ExecContext& ctx) const;
  // Quantized outputs (linear(..., QuantizedActivations yq)): whether a call with M rows
  // quantizes its output of this kind and block in its own kernel (default: no; ops.cpp then
  // writes y in f32 and runs the quantizer after), and that call, with x (xq null) or xq (x
  // null), validated by ops.cpp (yq: M x N on this weight's device). Its workspace:
  // workspace_size(M).
  virtual bool quantizes_output(int64_t /*M*/, ActQuant /*kind*/, int64_t /*block*/) const {
    return false;
  }
  // The kernel such a call runs (where quantizes_output is true).
  virtual std::string quantized_output_kernel_name(int64_t M) const { return kernel_name(M); }
  virtual void linear_quantized_output(const TensorView* x, const QuantizedActivations* xq,
                                       const QuantizedActivations& yq, const Epilogue& ep,
                                       const ExecContext& ctx) const;
};

// Each takes the canonical weight (validated) and, for convolutions, its geometry.
std::shared_ptr<const PreparedImpl> prepare_reference(const QuantizedWeight& w,
                                                      const ConvGeometry* conv,
                                                      const PrepareOptions& opts);
std::shared_ptr<const PreparedImpl> prepare_cpu(const QuantizedWeight& w, const ConvGeometry* conv,
                                                const PrepareOptions& opts);
// Defined in src/cuda/ (or src/core/cuda_stub.cpp in a build without CUDA, where it throws
// ErrorCode::Unsupported).
std::shared_ptr<const PreparedImpl> prepare_cuda(const QuantizedWeight& w, const ConvGeometry* conv,
                                                 const PrepareOptions& opts);

// A CUDA FP8-block column shard whose split cut a row block (n_phase != 0, validated): prepared
// as the rows left in the cut block and the block-aligned rest, run into their columns of y
// (core/row_pieces.cpp).
std::shared_ptr<const PreparedImpl> prepare_cuda_row_pieces(const QuantizedWeight& w,
                                                            const PrepareOptions& opts);

}  // namespace mixq
