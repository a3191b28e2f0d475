// libFuzzer target: arbitrary bytes into the GGUF parser, then every tensor through the
// canonical conversion and (for small ones) a full dequantization. Any crash, sanitizer report
// or non-mixq exception is a bug; mixq::Error is the expected outcome for bad input.
#include <cstddef>
#include <cstdint>

#include "mixq/error.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/formats/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixq::formats;
  try {
    auto f = GgufFile::from_memory(data, size, "fuzz.gguf");
    for (const auto& kv : f->metadata()) (void)kv.second.to_string();
    for (const auto& t : f->tensors()) {
      // bound the work per input: the canonical copy is proportional to the tensor size
      if (t.nbytes > (uint64_t(1) << 24)) continue;
      try {
        mixq::QuantizedWeight w = f->load_weight(t.name);
        w.validate();
        if (w.N * w.K <= 4096) (void)mixq::dequantize_to_f32(w);
        // a row-parallel window: the last block of every row
        const mixq::formats::GgmlTypeInfo* info = mixq::formats::ggml_type_info(t.type);
        if (info && w.K > info->block_elems)
          f->load_weight_cols(t.name, w.K - info->block_elems, w.K).validate();
      } catch (const mixq::Error&) {
      }
    }
  } catch (const mixq::Error&) {
  }
  return 0;
}
