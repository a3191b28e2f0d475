// A column-parallel shard of an FP8 128x128-block weight whose split cut a row block (n_phase),
// on the CUDA backend: its block-scaled GEMMs read one weight scale per (128-row block, 128-K
// block) and tile N on whole blocks, so the shard is prepared as two block-aligned weights. The
// rows that remain of the cut block (one block, phase dropped) and the rest (starting on a block
// boundary) each keep their blocks' scales; a call runs both into their columns of y, so the
// result is the unsharded layer's columns, with no re-quantization and no padding.
#include <algorithm>
#include <string>
#include <vector>

#include "core/device_ops.hpp"
#include "core/prepared.hpp"
#include "core/shard_rows.hpp"
#include "mixq/error.hpp"

namespace mixq {

namespace {

class RowPieces final : public PreparedImpl {
 public:
  RowPieces(const QuantizedWeight& w, const PrepareOptions& o) {
    backend = BackendKind::CUDA;
    opts = o;
    N = w.N;
    K = w.K;
    const int64_t head = std::min(w.N, w.block_n - w.n_phase);  // rows left in the cut block
    for (const auto& [b, e] : {std::pair<int64_t, int64_t>{0, head}, {head, w.N}}) {
      if (b == e) continue;
      const QuantizedWeight part = detail::shard_row_range(w, b, e);
      MIXQ_CHECK(part.n_phase == 0, ErrorCode::Internal, "row pieces: rows [", b, ", ", e,
                 ") of ", w.describe(), " still start inside a block");
      pieces_.push_back({b, e - b, prepare_cuda(part, nullptr, o)});
    }
  }

  std::string kernel_name(int64_t M) const override { return kernel_name(M, DType::BF16); }
  std::string kernel_name(int64_t M, DType act) const override {
    std::string s;
    for (const Piece& p : pieces_) s += (s.empty() ? "" : " + ") + p.impl->kernel_name(M, act);
    return s;
  }
  size_t workspace_size(int64_t M) const override {
    size_t b = 0;
    for (const Piece& p : pieces_) b = std::max(b, p.impl->workspace_size(M));
    return b;
  }
  void linear(const TensorView& x, const TensorView& y, const Epilogue& ep,
              const ExecContext& ctx) const override {
    for (const Piece& p : pieces_)
      p.impl->linear(x, column_slice(y, p.n0, p.rows), bias_of(ep, p), ctx);
  }
  void linear_quantized(const QuantizedActivations& xq, const TensorView& y, const Epilogue& ep,
                        const ExecContext& ctx) const override {
    for (const Piece& p : pieces_)
      p.impl->linear_quantized(xq, column_slice(y, p.n0, p.rows), bias_of(ep, p), ctx);
  }

 private:
  struct Piece {
    int64_t n0, rows;
    std::shared_ptr<const PreparedImpl> impl;
  };
  std::vector<Piece> pieces_;

  static Epilogue bias_of(const Epilogue& ep, const Piece& p) {
    Epilogue e = ep;
    e.bias = column_slice(ep.bias, p.n0, p.rows);
    return e;
  }
};

}  // namespace

std::shared_ptr<const PreparedImpl> prepare_cuda_row_pieces(const QuantizedWeight& w,
                                                            const PrepareOptions& opts) {
  return std::make_shared<RowPieces>(w, opts);
}

}  // namespace mixq
