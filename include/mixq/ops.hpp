// The backend-facing API: prepare a canonical weight once for a backend (the backend repacks it
// into the layout its kernels want), then run linear / conv2d on it any number of times.
//
// Rules (all backends):
// - Stream-ordered: CUDA work is enqueued on ExecContext::stream and nothing synchronises the host.
// - Workspace: when an op needs scratch memory, workspace_size() says how much; pass it in
//   ExecContext::workspace (device memory for CUDA, host for CPU). With a null workspace the CPU
//   backends allocate per call; the CUDA backend uses one scratch buffer per device, reserved at
//   prepare time and shared by every prepared weight on that device, so null-workspace CUDA
//   calls must not run concurrently on different streams of one device, whatever their weights
//   (pass distinct workspaces to run concurrently).
// - A PreparedWeight is immutable after prepare(): concurrent calls with caller workspaces are safe.
// - Every argument is validated; errors throw mixq::Error naming the argument and the values.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "mixq/quantize.hpp"
#include "mixq/quantized_weight.hpp"
#include "mixq/tensor.hpp"
#include "mixq/tuning.hpp"

namespace mixq {

enum class BackendKind : uint8_t {
  Auto,       // CUDA when the weight is asked for on a GPU, else the fast CPU backend
  Reference,  // exact float64 CPU kernels (the oracle); slow
  CPU,        // optimized CPU kernels (SIMD + threads)
  CUDA,
};
const char* backend_name(BackendKind b);
BackendKind parse_backend(const std::string& name);  // "auto", "ref", "cpu", "cuda"

// How activations meet the weights.
enum class ActQuant : uint8_t {
  None,           // weight-only: X stays F32/F16/BF16, weights dequantized on the fly
  Int8Block,      // W8A8: X quantized per block of act_block along K (scale+offset), INT8 MMA
  Fp8Block,       // X quantized per token per 128 along K to e4m3 (weights must be fp8b128)
  Int8PerTensor,  // X is already INT8 (input quant), weights int8 symmetric per channel,
                  // output requantized to INT8 (output quant) or returned as float
};
const char* act_quant_name(ActQuant a);

struct PrepareOptions {
  BackendKind backend = BackendKind::Auto;
  ActQuant act = ActQuant::None;
  int64_t act_block = 0;        // Int8Block: activation block along K (0 = weight block_k)
  Int8TensorQuant input_quant;  // Int8PerTensor
  Int8TensorQuant output_quant; // Int8PerTensor
  int device = 0;               // CUDA device ordinal
  // Tests and benchmarks: run this kernel family (a KernelId family name, e.g. "sm90_wo_ws",
  // "sm80_wo_stream", "wo_dequant_cublas", "sm90_i8_128x128", "sm90_fp8_block_skinny_mt16";
  // docs/architecture.md) for every M it can serve. Empty: MIXQ_FORCE_KERNEL, else the planner.
  std::string force_kernel;
  // CPU backend kernel set: "auto" (the best the CPU runs), "avx512", "avx2vnni", "avx2" or
  // "scalar"; empty: MIXQ_CPU_ISA, else auto. A set the CPU lacks throws (Unsupported), naming
  // the missing features. kernel_name() says which ran ("cpu_avx2_i8dot", ...).
  std::string cpu_isa;
  // The kernels' knobs (mixq/tuning.hpp); the default is MIXQ_TUNE, read once per process.
  Tuning tuning = default_tuning();
};

// Applied to each output element after the product: y = clamp(acc + bias[n], lo, hi).
struct Epilogue {
  TensorView bias;  // empty, or [N] F32/F16/BF16 on the same device as the output
  float clamp_lo = -std::numeric_limits<float>::infinity();
  float clamp_hi = std::numeric_limits<float>::infinity();

  static Epilogue none() { return {}; }
  static Epilogue relu() { Epilogue e; e.clamp_lo = 0.f; return e; }
  static Epilogue relu6() { Epilogue e; e.clamp_lo = 0.f; e.clamp_hi = 6.f; return e; }
};

struct ExecContext {
  void* stream = nullptr;        // cudaStream_t for CUDA (nullptr = legacy default stream)
  void* workspace = nullptr;     // caller-owned scratch (see workspace_size)
  size_t workspace_bytes = 0;
  int num_threads = 0;           // CPU: 0 = MIXQ_NUM_THREADS, else every CPU of the affinity mask
};

// Convolution weights: a canonical weight whose K axis is the flattened (Ci, Kh, Kw) in one of
// two orders. Blocks along K therefore group input channels:
//   KhKwCi  ([Co][Kh][Kw][Ci], reduction contiguous): block_k must divide Ci, or equal K.
//   CiKhKw  ([Co][Ci][Kh][Kw], torch / MNN order): block_k must be a multiple of Kh*Kw dividing
//           K (MNN's B*Kh*Kw blocks), or equal K.
enum class ConvKOrder : uint8_t { KhKwCi, CiKhKw };

struct ConvWeight {
  QuantizedWeight weight;  // N = Co, K = Ci * Kh * Kw
  int64_t Ci = 0, Kh = 1, Kw = 1;
  ConvKOrder order = ConvKOrder::KhKwCi;
  void validate() const;
};

enum class Layout : uint8_t { NCHW, NHWC };

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  Layout layout = Layout::NCHW;  // of both input and output
};
// Output spatial size (throws if it would be < 1).
void conv2d_output_size(int64_t H, int64_t W, int64_t Kh, int64_t Kw, const Conv2dParams& p,
                        int64_t* Ho, int64_t* Wo);

struct PreparedImpl;  // backend-specific, defined in src/

class PreparedWeight {
 public:
  PreparedWeight() = default;
  explicit PreparedWeight(std::shared_ptr<const PreparedImpl> impl) : impl_(std::move(impl)) {}

  bool valid() const { return impl_ != nullptr; }
  BackendKind backend() const;
  ActQuant act() const;
  int64_t N() const;
  int64_t K() const;
  bool is_conv() const;
  // The kernel instantiation a call with M rows would run (its KernelId name); with `activation`,
  // for activations of that dtype (default: the backend's usual one).
  std::string kernel_name(int64_t M) const;
  std::string kernel_name(int64_t M, DType activation) const;
  // The kernels a call with M rows and a quantized output (linear(..., yq) of this kind and
  // block) runs: the GEMM that quantizes in its epilogue, or the GEMM's name followed by
  // " + f32 staging + quantizer".
  std::string kernel_name(int64_t M, DType activation, ActQuant output, int64_t block) const;
  const PreparedImpl& impl() const;

 private:
  std::shared_ptr<const PreparedImpl> impl_;
};

PreparedWeight prepare(const QuantizedWeight& w, const PrepareOptions& opts = {});
PreparedWeight prepare(const ConvWeight& w, const PrepareOptions& opts = {});

// Scratch bytes a linear call with M rows needs.
size_t linear_workspace_size(const PreparedWeight& w, int64_t M);
// Scratch bytes a conv2d call on input x (its shape and dtype only; data may be null) with these
// parameters needs. On CUDA (sm_90a) an NCHW call with 16-bit x (weight-only) or int8 x
// (int8-per-tensor, Ci a multiple of 128) runs the NHWC kernels on NHWC copies of x and y, which
// this size includes (y counted at 4 bytes an element: y's dtype is not an argument); a workspace
// too small for the copies but not for the GEMM runs the slower NCHW kernel instead
// (docs/cuda-conv.md).
size_t conv2d_workspace_size(const PreparedWeight& w, const TensorView& x, const Conv2dParams& params);

// Y[M][N] = X[M][K] . W^T, then the epilogue.
// Weight-only: x F32/F16/BF16 (backend-dependent subsets), y F32/F16/BF16.
// Int8Block / Fp8Block: x float (quantized inside the call), y F32/F16/BF16.
// Int8PerTensor: x I8; y I8 (requantized with output_quant) or F32 (real values).
// x and y must live on the prepared weight's device; rows contiguous (ld >= K / N).
void linear(const TensorView& x, const PreparedWeight& w, const TensorView& y,
            const Epilogue& ep = {}, const ExecContext& ctx = {});

// Quantized activations: the one form in which the API takes or hands out activations that are
// already quantized (Int8Block / Fp8Block). Non-owning views of codes and per-(row, K block) meta
// in the layout the W8A8 / FP8 GEMMs consume:
//   q       [M][K] or [M][act_quant_row_pitch(K)] codes (INT8: i8; FP8: f8e4m3 or u8), rows
//           contiguous with row stride >= act_quant_row_pitch(K) (K rounded up to 16 bytes).
//   scale, offset, sums
//           [n_blocks][M] or [n_blocks][act_quant_meta_pitch(M)] (f32, f32, i32), row stride
//           >= act_quant_meta_pitch(M) (M rounded up to 4): value(m, kb) at [kb * stride + m],
//           i.e. M contiguous. offset and sums have scale's stride. FP8 has no offset / sums.
// n_blocks = ceil(K / block). Written by the quantizers of mixq/act_quant.hpp (into caller
// buffers on any device, or into a host QuantizedActivationsBuffer), or by the caller's own
// kernel fused into the producer of x.
struct QuantizedActivations {
  static constexpr int64_t kFp8Block = 128;  // FP8: per token per 128 along K

  ActQuant kind = ActQuant::None;  // Int8Block or Fp8Block
  int64_t block = 0;               // K block: INT8 32, 64, 128 or 256; FP8 128
  TensorView q;                    // codes: i8 (INT8), f8e4m3 or u8 (FP8)
  TensorView scale;                // f32
  TensorView offset;               // INT8: f32; FP8: empty
  TensorView sums;                 // INT8: i32 (each block's code sum); FP8: empty

  static QuantizedActivations fp8_block(const TensorView& q, const TensorView& scale) {
    return {ActQuant::Fp8Block, kFp8Block, q, scale, {}, {}};
  }
  static QuantizedActivations int8_block(int64_t block, const TensorView& q,
                                         const TensorView& scale, const TensorView& offset,
                                         const TensorView& sums) {
    return {ActQuant::Int8Block, block, q, scale, offset, sums};
  }
};

// Y[M][N] = dequant(xq) . W^T, then the epilogue: the product on activations already quantized,
// for a weight prepared with act = Int8Block or Fp8Block. It gives the bits of linear(x) when xq
// holds x's quantization (every backend). Its rules, beyond linear()'s:
//   - xq.kind must be w.act(); xq.block the weight's act_block (INT8), 128 (FP8).
//   - Every buffer a quantizer of mixq/act_quant.hpp accepts for M rows is accepted (M =
//     q.shape[0], K = w.K()): the shapes and strides above, all tensors on the weight's device.
//     Columns K .. pitch-1 of q do not contribute (they may hold anything), nor do meta rows
//     M .. stride-1. The codes and meta are taken as given (the sums must be the codes' sums).
//   - CUDA: the GEMMs read q and the meta through TMA / 16-byte copies, so q's base and row
//     stride (bytes) must be multiples of 16, the meta bases 16-byte aligned and their row stride
//     a multiple of 4 elements (act_quant_meta_pitch(M) is one). Memory must exist for whole
//     [M][row pitch] code rows and [n_blocks][row stride] meta rows: the sm_80 INT8 kernels read
//     them in 16-byte chunks up to there (the values past K / M are not used).
//   - Workspace: linear_workspace_size(w, M) bytes are enough (the CUDA call needs only the
//     few-token kernels' stream-K partial sums and tickets, none for larger M; the CPU call its
//     staging). Its first linear_workspace_size(w, M) bytes must not overlap xq or y. With a null
//     workspace the prepared weight's own scratch is used (no concurrent calls on one weight).
// y F32/F16/BF16 [M][N].
void linear(const QuantizedActivations& xq, const PreparedWeight& w, const TensorView& y,
            const Epilogue& ep = {}, const ExecContext& ctx = {});

// The output quantized for the next layer: yq receives the bytes
// quantize_activations_fp8_block / quantize_activations_int8_block (mixq/act_quant.hpp) would
// write for the f32 output y = linear(x, w) (epilogue included), so that a chain of FP8 / W8A8
// layers quantizes each activation once, where it is produced, and no layer writes or re-reads it
// in 16 bits. yq: kind Fp8Block (block 128) or Int8Block (block 32, 64, 128 or 256), codes
// [M][>= N] (K of the next layer = this weight's N) and meta in QuantizedActivations' layout, on
// the weight's device (CUDA: the alignment rules of linear(QuantizedActivations)). Any weight
// and backend. On CUDA, FP8-block and INT8-block weights whose call runs the Hopper block GEMM
// (more than 64 rows; outputs of 128-column tiles, INT8 blocks up to 128) quantize in the GEMM's
// epilogue; every other call writes y in f32 to the workspace and quantizes it there (the same
// bytes). Workspace: linear_workspace_size(w, M, yq.kind, yq.block) bytes (the CPU backends and
// CUDA calls without one allocate what they need; CUDA stream-ordered, graph capturable).
void linear(const TensorView& x, const PreparedWeight& w, const QuantizedActivations& yq,
            const Epilogue& ep = {}, const ExecContext& ctx = {});
void linear(const QuantizedActivations& xq, const PreparedWeight& w,
            const QuantizedActivations& yq, const Epilogue& ep = {}, const ExecContext& ctx = {});
// Scratch bytes a linear call with M rows and a quantized output of this kind and block needs.
size_t linear_workspace_size(const PreparedWeight& w, int64_t M, ActQuant out, int64_t out_block);

// x [B][Ci][H][W] (NCHW) or [B][H][W][Ci] (NHWC), y likewise with Co, Ho, Wo. Contiguous.
void conv2d(const TensorView& x, const PreparedWeight& w, const TensorView& y,
            const Conv2dParams& params, const Epilogue& ep = {}, const ExecContext& ctx = {});

}  // namespace mixq
