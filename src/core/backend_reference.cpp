// The reference backend: prepare() keeps the canonical weight; every op runs the exact float64
// kernel of mixq::ref. It is the oracle, and the fallback for combinations no fast backend has.
#include "core/prepared.hpp"
#include "mixq/error.hpp"
#include "mixq/reference.hpp"

namespace mixq {

namespace {

class ReferencePrepared final : public PreparedImpl {
 public:
  ReferencePrepared(const QuantizedWeight& w, const ConvGeometry* g, const PrepareOptions& o)
      : weight_(w) {
    backend = BackendKind::Reference;
    opts = o;
    N = w.N;
    K = w.K;
    if (g) conv = *g;
  }

  std::string kernel_name(int64_t) const override {
    return std::string("ref_") + act_quant_name(opts.act);
  }

  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext&) const override {
    switch (opts.act) {
      case ActQuant::None: return ref::linear_weight_only(x, weight_, y, ep);
      case ActQuant::Int8Block: return ref::linear_w8a8_block(x, weight_, opts.act_block, y, ep);
      case ActQuant::Fp8Block: return ref::linear_fp8_block(x, weight_, y, ep);
      case ActQuant::Int8PerTensor:
        return ref::linear_int8_requant(x, weight_, opts.input_quant, opts.output_quant, y, ep);
    }
  }

  // The caller's codes and meta, read in place.
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override {
    switch (opts.act) {
      case ActQuant::Int8Block:
        return ref::linear_w8a8_block(xq, weight_, y, ep);
      case ActQuant::Fp8Block:
        return ref::linear_fp8_block(xq, weight_, y, ep);
      default: PreparedImpl::linear_quantized(xq, y, ep, ctx);
    }
  }

  void conv2d(const TensorView& x, const TensorView& y, const Conv2dParams& p, const Epilogue& ep,
              const ExecContext& ctx) const override {
    const ConvWeight cw{weight_, conv->Ci, conv->Kh, conv->Kw, conv->order};
    switch (opts.act) {
      case ActQuant::None: return ref::conv2d_weight_only(x, cw, y, p, ep);
      case ActQuant::Int8PerTensor:
        return ref::conv2d_int8_requant(x, cw, opts.input_quant, opts.output_quant, y, p, ep);
      default: PreparedImpl::conv2d(x, y, p, ep, ctx);
    }
  }

 private:
  QuantizedWeight weight_;
};

}  // namespace

std::shared_ptr<const PreparedImpl> prepare_reference(const QuantizedWeight& w,
                                                      const ConvGeometry* conv,
                                                      const PrepareOptions& opts) {
  return std::make_shared<ReferencePrepared>(w, conv, opts);
}

}  // namespace mixq
