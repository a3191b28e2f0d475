// mixq matmul --weights FILE:TENSOR --input X.npy -o Y.npy: Y[M][N] = X[M][K] . W^T (+ bias) on
// the chosen backend, through the same mixq::prepare / mixq::linear calls a C++ user makes.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/npy.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"

namespace mixq::cli {

namespace {

const char kHelp[] =
    "usage: mixq matmul --weights FILE:TENSOR --input X.npy -o Y.npy [options]\n"
    "       mixq matmul --weights FILE --tensor TENSOR --input X.npy -o Y.npy [options]\n\n"
    "Computes Y = X . W^T (+ bias) with mixq::linear. X is a float32 or float16 .npy of shape\n"
    "[M, K]; Y is written as float32 [M, N]. W is any weight 'mixq inspect' marks with '*'.\n"
    "FILE may be a sharded safetensors checkpoint (its *.safetensors.index.json, or the\n"
    "directory holding it).\n\n"
    "FILE:TENSOR is split at the ':' that follows an existing file or directory; both parts may\n"
    "hold ':'. If more than one prefix exists (files 'a' and 'a:b'), the split is ambiguous and\n"
    "refused: give the file alone with --weights and the name with --tensor.\n\n"
    "Y is written to a temporary file and renamed into place when complete; Y must not be one of\n"
    "the input files. With -o /dev/stdout the summary line goes to stderr.\n\n"
    "options:\n"
    "  --weights FILE:TENSOR   the weight (FILE alone when --tensor is given)\n"
    "  --tensor TENSOR         the weight's name, taken as is (no splitting of --weights)\n"
    "  --input X.npy           activations [M, K], float32 or float16\n"
    "  -o, --output Y.npy      output file\n"
    "  --bias B.npy            optional bias [N], float32 or float16\n"
    "  --backend B             auto (default: cuda when a GPU is usable, else cpu), cpu, cuda, ref\n"
    "  --act A                 none (default, weight-only), int8 (W8A8 per-block activations,\n"
    "                          needs i8 weights), fp8 (per-token 1x128 e4m3, needs fp8b128)\n"
    "  --threads N             CPU threads (default: MIXQ_NUM_THREADS, else the CPUs of the affinity mask)\n";

// float16 inputs are widened exactly to float32 for the CPU backends (the f32 kernels are the
// complete set there); the CUDA backend takes them as they are.
std::vector<float> to_f32(const formats::NpyArray& a) {
  std::vector<float> out(static_cast<size_t>(a.numel()));
  if (a.dtype == DType::F32) {
    std::copy(a.data.as<const float>(), a.data.as<const float>() + out.size(), out.begin());
  } else {
    const uint16_t* h = a.data.as<const uint16_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(h[i]);
  }
  return out;
}

ActQuant parse_act(const std::string& s) {
  if (s == "none") return ActQuant::None;
  if (s == "int8") return ActQuant::Int8Block;
  if (s == "fp8") return ActQuant::Fp8Block;
  usage_fail("matmul", "--act must be none, int8 or fp8, got '" + s + "'");
}

}  // namespace

int run_matmul(int argc, char** argv) {
  Args a("matmul", argc, argv,
         {{"--weights", "", true}, {"--tensor", "", true}, {"--input", "", true},
          {"-o", "--output", true},
          {"--bias", "", true}, {"--backend", "", true}, {"--act", "", true},
          {"--threads", "", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(0, 0, "no positional arguments");
  const std::string weights_spec = a.require("--weights");
  const std::string input = a.require("--input");
  const std::string output = a.require("-o");
  const std::string backend_text = a.get("--backend", "auto");
  if (backend_text != "auto" && backend_text != "cpu" && backend_text != "cuda" &&
      backend_text != "ref")
    usage_fail("matmul", "--backend must be auto, cpu, cuda or ref, got '" + backend_text + "'");
  BackendKind backend = parse_backend(backend_text);
  if (backend == BackendKind::Auto) backend = cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
  const ActQuant act = parse_act(a.get("--act", "none"));
  const int threads = static_cast<int>(a.get_int("--threads", 0, 0, 4096));

  const auto [file, tensor] = a.has("--tensor")
                                  ? std::make_pair(weights_spec, a.require("--tensor"))
                                  : split_weight_spec("matmul", weights_spec);
  std::vector<std::string> inputs = formats::checkpoint_files(file);
  inputs.push_back(input);
  if (a.has("--bias")) inputs.push_back(a.get("--bias"));
  check_outputs("matmul", {{"-o", output}}, inputs);
  const formats::NpyArray x = formats::read_npy(input);
  MIXQ_CHECK_ARG(x.shape.size() == 2, "matmul: input '", input, "' must be 2-D [M, K], got rank ",
                 x.shape.size());
  MIXQ_CHECK_ARG(x.dtype == DType::F32 || x.dtype == DType::F16, "matmul: input '", input,
                 "' must be float32 or float16, got ", dtype_name(x.dtype));
  const int64_t M = x.shape[0];
  MIXQ_CHECK_ARG(M >= 1 && x.shape[1] >= 1, "matmul: input '", input, "' is empty [", M, ", ",
                 x.shape[1], "]");

  // The loaded weight (canonical form, plus the file's blocks for GGUF) is dropped right after
  // prepare: the prepared form is all the call needs, so no second full copy stays alive.
  std::optional<QuantizedWeight> loaded(formats::load_weight(file, tensor));
  const QuantizedWeight& w = *loaded;
  const std::string wdesc = w.describe();
  const int64_t N = w.N, K = w.K;
  MIXQ_CHECK_ARG(x.shape[1] == w.K, "matmul: input '", input, "' has K = ", x.shape[1],
                 " columns but weight '", tensor, "' has K = ", w.K, " (its shape is [N = ", w.N,
                 ", K = ", w.K, "])");

  std::vector<float> bias;
  if (a.has("--bias")) {
    const formats::NpyArray b = formats::read_npy(a.get("--bias"));
    MIXQ_CHECK_ARG(b.shape.size() == 1 && b.shape[0] == w.N, "matmul: bias '", a.get("--bias"),
                   "' must have shape [", w.N, "] (N of the weight)");
    MIXQ_CHECK_ARG(b.dtype == DType::F32 || b.dtype == DType::F16, "matmul: bias '",
                   a.get("--bias"), "' must be float32 or float16, got ", dtype_name(b.dtype));
    bias = to_f32(b);
  }

  PrepareOptions opts;
  opts.backend = backend;
  opts.act = act;
  // matmul promises 1e-5 of float64 for f32 activations: on CPU force the exact f32 path (the
  // backend's default for M <= 8 quantizes activations to int8 for speed).
  if (backend == BackendKind::CPU && act == ActQuant::None) opts.force_kernel = "cpu_f32";
  const PreparedWeight pw = prepare(w, opts);
  loaded.reset();
  ExecContext ctx;
  ctx.num_threads = threads;
  std::vector<float> y(static_cast<size_t>(M) * static_cast<size_t>(N));

  if (backend == BackendKind::CUDA) {
    // Device copies of X (as stored: f32 or f16), bias and Y; one synchronous copy back.
    const size_t x_bytes = static_cast<size_t>(x.numel()) * (x.dtype == DType::F32 ? 4 : 2);
    DeviceBuffer dx(x_bytes), dy(y.size() * sizeof(float)), db(bias.size() * sizeof(float) + 4);
    dx.copy_from_host(x.data.data(), x_bytes);
    Epilogue ep;
    if (!bias.empty()) {
      db.copy_from_host(bias.data(), bias.size() * sizeof(float));
      ep.bias = db.view(DType::F32, {N});
    }
    linear(dx.view(x.dtype, {M, K}), pw, dy.view(DType::F32, {M, N}), ep, ctx);
    dy.copy_to_host(y.data(), y.size() * sizeof(float));
  } else {
    std::vector<float> xf = to_f32(x);
    Epilogue ep;
    if (!bias.empty()) ep.bias = TensorView(bias.data(), DType::F32, {N});
    linear(TensorView(xf.data(), DType::F32, {M, K}), pw,
           TensorView(y.data(), DType::F32, {M, N}), ep, ctx);
  }
  formats::write_npy(output, DType::F32, {M, N}, y.data());
  std::fprintf(summary_stream({output}), "%s [%lld, %lld] . %s^T (%s) -> %s float32 [%lld, %lld] on %s, kernel %s\n",
              input.c_str(), static_cast<long long>(M), static_cast<long long>(K),
              tensor.c_str(), wdesc.c_str(), output.c_str(), static_cast<long long>(M),
              static_cast<long long>(N), backend_name(backend), pw.kernel_name(M).c_str());
  return 0;
}

}  // namespace mixq::cli
