// mixq: the command-line front end. Dispatches to one subcommand per file (cmd_*.cpp) and turns
// every failure into one line on stderr and an exit code: 2 for bad usage, 1 for runtime errors.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "cli.hpp"
#include "mixq/error.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"bench", mixq::cli::run_bench, "time mixq::linear against the dense baseline, check errors"},
    {"quantize", mixq::cli::run_quantize, "quantize the matrices of a safetensors file"},
    {"inspect", mixq::cli::run_inspect, "list the tensors and quantization metadata of a file"},
    {"dequantize", mixq::cli::run_dequantize, "write one weight as a float32 .npy [N][K]"},
    {"matmul", mixq::cli::run_matmul, "Y = X . W^T for a stored weight and a .npy input"},
};

void print_usage(FILE* out) {
  std::fprintf(out,
               "usage: mixq <command> [options]   (mixq <command> --help for details)\n\n"
               "Mixed-precision matrix products: float activations times INT4/INT8/FP8 "
               "block-quantized weights.\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nenvironment: MIXQ_NUM_THREADS (CPU threads when --threads is not given)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("mixq 0.1.0\n");
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const mixq::cli::UsageError& e) {
      std::fprintf(stderr, "%s\n", mixq::cli::one_line(e.what()).c_str());
      return 2;
    } catch (const mixq::Error& e) {
      std::fprintf(stderr, "%s\n", mixq::cli::one_line(e.what()).c_str());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "mixq %s: out of memory\n", c.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mixq %s: %s\n", c.name, mixq::cli::one_line(e.what()).c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "mixq: unknown command '%s' (commands: bench, quantize, inspect, "
               "dequantize, matmul; see 'mixq --help')\n", name.c_str());
  return 2;
}
