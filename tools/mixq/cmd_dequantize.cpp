// mixq dequantize FILE TENSOR -o OUT.npy: one weight of any supported checkpoint as a float32
// .npy of shape [N][K], in the original K order (act-order permutations undone).
#include <cstdio>
#include <vector>

#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/npy.hpp"

namespace mixq::cli {

namespace {
const char kHelp[] =
    "usage: mixq dequantize FILE TENSOR -o OUT.npy\n\n"
    "Loads TENSOR from FILE (any format 'mixq inspect' lists; the name is the one inspect\n"
    "prints) and writes its dequantized values as a float32 .npy of shape [N, K] (N = output\n"
    "features), in the original column order: w[n][k] = exactly the f32 value the reference\n"
    "kernels use. FILE may be a sharded safetensors checkpoint (its *.safetensors.index.json,\n"
    "or the directory holding it).\n\n"
    "OUT is written to a temporary file and renamed into place when complete; it must not be\n"
    "one of the checkpoint's files. With -o /dev/stdout the summary line goes to stderr.\n\n"
    "options:\n"
    "  -o, --output OUT.npy   output file (required)\n";
}  // namespace

int run_dequantize(int argc, char** argv) {
  Args a("dequantize", argc, argv, {{"-o", "--output", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(2, 2, "FILE TENSOR");
  const std::string out = a.require("-o");
  const std::string& path = a.positionals()[0];
  const std::string& tensor = a.positionals()[1];
  check_outputs("dequantize", {{"-o", out}}, formats::checkpoint_files(path));

  const QuantizedWeight w = formats::load_weight(path, tensor);
  w.validate();
  std::vector<float> values(static_cast<size_t>(w.N) * static_cast<size_t>(w.K));
  dequantize_rows(w, 0, w.N, values.data(), /*original_order=*/true);
  formats::write_npy(out, DType::F32, {w.N, w.K}, values.data());
  std::fprintf(summary_stream({out}), "%s: %s -> %s float32 [%lld, %lld]\n", tensor.c_str(), w.describe().c_str(),
              out.c_str(), static_cast<long long>(w.N), static_cast<long long>(w.K));
  return 0;
}

}  // namespace mixq::cli
