// mixq quantize IN.safetensors -o OUT --scheme S [--format mixq|gguf]: round-to-nearest
// quantization of every floating-point matrix of a safetensors file, into mixq's own safetensors
// layout (default) or a GGUF file of ggml block types (quantize_gguf.cpp).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/formats/output_file.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"
#include "mixq/quantize.hpp"
#include "quantize_gguf.hpp"

namespace mixq::cli {

namespace {

const char kHelp[] =
    "usage: mixq quantize IN -o OUT --scheme SCHEME [--format mixq|gguf] [options]\n\n"
    "IN is a safetensors file, or a sharded checkpoint (its *.safetensors.index.json, or the\n"
    "directory holding it); OUT is always one file.\n"
    "Quantizes every 2-D F32/F16/BF16 tensor of IN (rows = output features N, columns = K) with\n"
    "mixq's round-to-nearest quantizer and writes mixq's safetensors layout (W.codes, W.scales,\n"
    "W.zeros; the scheme in __metadata__ \"mixq.scheme\").\n"
    "2-D float tensors excluded by --only/--skip are kept losslessly as dense weights (their own\n"
    "dtype); tensors that are not 2-D float matrices (biases, norms, integer tensors) are left out\n"
    "of OUT and listed on stderr.\n\n"
    "schemes: w4g128 (int4 symmetric, group 128), w4g32asym (int4 + float offset, group 32),\n"
    "  w4g128zp (uint4 + integer zero point), w8g128, w8g64asym, w4pc / w8pc (per channel),\n"
    "  fp8b128 (e4m3, f32 scale per 128x128 block); any w4/w8 with g32/g64/g128/g256/pc,\n"
    "  optional 'asym' or 'zp', optional '-bf16' / '-f32' scale type (default f16).\n"
    "  A block scale that f16 cannot hold is an error naming the block: above 65504 (|w| beyond\n"
    "  ~458000 for int4), or so small that it loses more than 2^-5 of its value to underflow\n"
    "  (groups with max |w| below ~1e-4 for int8, ~1e-5 for int4): use '-f32' or '-bf16'\n"
    "  scales there. fp8b128 codes saturate at +-448 (the e4m3 maximum; the scale amax / 448\n"
    "  keeps every code in range).\n\n"
    "--format gguf writes a GGUF v3 file instead (tensor names kept as they are): the selected\n"
    "matrices encoded as one ggml type by ggml's reference quantization steps (Q4_0/Q8_0 bytes\n"
    "checked against gguf-py; Q4_K not checked against libggml); every\n"
    "other F32/F16/BF16 tensor of rank 1..4 is copied in its own type. GGUF schemes: q4_0, q8_0\n"
    "(K a multiple of 32), q4_k (K a multiple of 256), f16, bf16, f32. f16 / bf16 values that\n"
    "overflow, or that lose more than 2^-5 of the tensor's largest |value| to underflow, and\n"
    "ggml block scales that f16 cannot hold (same rule as above) are errors naming the tensor.\n\n"
    "OUT is written to a temporary file in its directory and renamed into place when complete,\n"
    "so a failure never leaves a partial file; OUT must not be one of IN's files. With\n"
    "-o /dev/stdout the summary line goes to stderr.\n\n"
    "options:\n"
    "  -o, --output OUT      output file (required)\n"
    "  --format F            mixq (default: mixq's safetensors layout) or gguf\n"
    "  --scheme SCHEME       quantization scheme (required)\n"
    "  --only REGEX          quantize only tensors whose name matches (search anywhere in the name)\n"
    "  --skip REGEX          do not quantize tensors whose name matches\n\n"
    "REGEX: the ECMAScript subset that runs in time linear in the name: literals, ., [...],\n"
    "\\d \\w \\s (and \\D \\W \\S), ^ $, ( ) (?: ), |, * + ? {m,n}; back-references,\n"
    "look-around and \\b are refused.\n";

DType float_dtype(const std::string& st) {
  return st == "F32" ? DType::F32 : st == "F16" ? DType::F16 : DType::BF16;
}

}  // namespace

int run_quantize(int argc, char** argv) {
  Args a("quantize", argc, argv,
         {{"-o", "--output", true}, {"--scheme", "", true}, {"--only", "", true},
          {"--skip", "", true}, {"--format", "", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(1, 1, "IN");
  const std::string in = a.positionals()[0];
  const std::string out = a.require("-o");
  const std::string scheme_text = a.require("--scheme");
  const std::string format = a.get("--format", "mixq");
  if (format != "mixq" && format != "gguf")
    usage_fail("quantize", "--format must be mixq or gguf, got '" + format + "'");
  TensorSelection sel;
  if (a.has("--only")) sel.only = compile_pattern("quantize", "--only", a.get("--only"));
  if (a.has("--skip")) sel.skip = compile_pattern("quantize", "--skip", a.get("--skip"));
  if (format == "gguf") {
    if (!is_gguf_scheme(scheme_text))
      usage_fail("quantize", "scheme '" + scheme_text + "' cannot be written as GGUF (--format gguf " +
                                 "takes the ggml types q4_0, q8_0, q4_k, f16, bf16, f32)");
    check_outputs("quantize", {{"-o", out}}, formats::checkpoint_files(in));
    return quantize_to_gguf(in, out, scheme_text, sel);
  }
  if (is_gguf_scheme(scheme_text))
    usage_fail("quantize", "scheme '" + scheme_text + "' is a GGUF type: add --format gguf, or use a " +
                               "mixq scheme (w4g128, w8g128, fp8b128, ...) for mixq's layout");
  QuantScheme scheme;
  try {
    scheme = parse_scheme(scheme_text);
  } catch (const Error& e) {
    // An unknown scheme is a usage error; parse_scheme's message lists the valid names.
    usage_fail("quantize", std::string(e.what()).substr(std::strlen("mixq: ")));
  }

  check_outputs("quantize", {{"-o", out}}, formats::checkpoint_files(in));
  const auto file = formats::SafetensorsCheckpoint::open(in);
  std::vector<std::pair<std::string, QuantizedWeight>> weights;
  int n_quantized = 0, n_dense = 0;
  int64_t in_bytes = 0, out_bytes = 0;
  std::vector<std::string> left_out;
  for (const formats::SafetensorsTensor* tp : file->tensors()) {
    const formats::SafetensorsTensor& t = *tp;
    const bool is_float = t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16";
    if (!is_float || t.shape.size() != 2 || t.shape[0] < 1 || t.shape[1] < 1) {
      left_out.push_back(t.name + " (" + t.dtype + ", rank " + std::to_string(t.shape.size()) + ")");
      continue;
    }
    const DType dt = float_dtype(t.dtype);
    const bool selected = sel.selected(t.name);
    // The mapping may be unaligned for the element type; quantize from an aligned copy.
    HostBuffer copy(t.nbytes);
    std::memcpy(copy.data(), t.data, t.nbytes);
    QuantizedWeight w;
    if (selected) {
      try {
        w = quantize_weight(copy.view(dt, {t.shape[0], t.shape[1]}), scheme);
      } catch (const Error& e) {
        MIXQ_FAIL(e.code(), "quantize: ", in, ": tensor '", t.name, "': ", error_message_body(e));
      }
      ++n_quantized;
    } else {
      w.N = t.shape[0];
      w.K = t.shape[1];
      w.code_type = dt;
      w.block_k = w.K;
      w.has_scales = false;
      w.codes.assign(t.data, t.data + t.nbytes);
      w.origin = "safetensors:" + t.dtype + " (kept dense)";
      w.validate();
      ++n_dense;
    }
    in_bytes += static_cast<int64_t>(t.nbytes);
    out_bytes += w.storage_bytes();
    weights.emplace_back(t.name, std::move(w));
  }
  MIXQ_CHECK_ARG(n_quantized > 0, "quantize: no 2-D F32/F16/BF16 tensor of '", in,
                 "' was selected for quantization", (sel.filtered() ? " by --only/--skip" : ""));
  formats::save_mixq_safetensors(out, weights,
                                 {{"mixq.scheme", scheme_name(scheme)}, {"mixq.source", in}});
  for (const std::string& s : left_out) std::fprintf(stderr, "mixq quantize: left out %s\n", s.c_str());
  std::fprintf(summary_stream({out}),"%s -> %s: %d tensor(s) quantized to %s, %d kept dense, %zu left out; "
              "%lld -> %lld bytes of matrices\n",
              in.c_str(), out.c_str(), n_quantized, scheme_name(scheme).c_str(), n_dense,
              left_out.size(), static_cast<long long>(in_bytes), static_cast<long long>(out_bytes));
  return 0;
}

}  // namespace mixq::cli
