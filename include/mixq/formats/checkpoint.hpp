// Reading quantized checkpoints of any supported format through one door.
//
//   auto info = mixq::formats::inspect_checkpoint("model.gguf");   // every tensor, metadata
//   mixq::QuantizedWeight w = mixq::formats::load_weight("model.gguf", "blk.0.attn_q.weight");
//
// The format is detected from the file's content (GGUF magic, or a safetensors header), and for
// safetensors from the tensor names/dtypes and any quantize_config.json / config.json beside it
// (GPTQ, AWQ, FP8 block, mixq's own layout, plain F32/F16/BF16 matrices).
//
// Sharded safetensors checkpoints are read through their index: `path` may be a
// "*.safetensors.index.json" file or a directory holding one (safetensors_checkpoint.hpp). A
// weight whose parts (GPTQ qweight / scales, FP8 weight / scale_inv, ...) sit in different shards
// is assembled; load_weight opens only the shards that hold the requested weight.
//
// Inputs must be regular files (or such a directory): FIFOs, devices and other special files are
// refused before they are opened for reading (input_file.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixq/quantized_weight.hpp"
#include "mixq/shard.hpp"

namespace mixq::formats {

struct TensorEntry {
  std::string name;            // the name load_weight takes (GPTQ/AWQ: the module prefix)
  std::string type;            // "Q4_K", "F16", "gptq 4-bit g128", "fp8 128x128", "mixq w4g128", ...
  std::vector<int64_t> shape;  // logical shape; matrices as [N, K] (rows = output features)
  int64_t bytes = 0;           // stored bytes, all parts (codes, scales, zeros, g_idx)
  double bits_per_weight = 0;  // bytes * 8 / elements
  bool is_weight = false;      // load_weight accepts it (a 2-D matrix of a supported type)
};

struct CheckpointInfo {
  std::string path;
  std::string format;  // "gguf v3", "safetensors (gptq)", "safetensors (mixq)", ...
  std::vector<std::pair<std::string, std::string>> metadata;  // printable key/value pairs
  std::vector<TensorEntry> tensors;
};

CheckpointInfo inspect_checkpoint(const std::string& path);

// Every file that reading the checkpoint at `path` involves: the file itself, or the index and
// all its shards, plus the quantization config files beside it that exist. For checks that an
// output does not overwrite an input. Throws like inspect_checkpoint for unreadable indexes.
std::vector<std::string> checkpoint_files(const std::string& path);

// Converts one tensor into the canonical weight, losslessly. Errors name the file, the tensor
// and the problem (ErrorCode::Format for malformed content, InvalidArgument for a missing name).
QuantizedWeight load_weight(const std::string& path, const std::string& tensor);

// One tensor-parallel shard of a weight (mixq/shard.hpp): equal, field for field, to
// shard(load_weight(path, tensor), spec). What is read:
//   GGUF, column-parallel: only the shard's rows of the file (rows are whole runs of blocks);
//   mixq's safetensors layout, column-parallel: only the block_n-aligned run of rows holding the
//   shard (codes rows, scale / zero rows);
//   everything else (row-parallel shards, GPTQ / AWQ / FP8-block / dense safetensors): the
//   tensor is loaded, then sliced. The files are mapped, so only the conversion touches the
//   other ranks' bytes; per-row byte ranges for those layouts are not read separately yet.
QuantizedWeight load_shard(const std::string& path, const std::string& tensor,
                           const ShardSpec& spec);

// mixq's own safetensors layout: for a weight named W, tensors
//   W.codes   U8  [N, row_bytes]        (packed exactly as QuantizedWeight::codes)
//   W.scales  F32/F16/BF16 [n_blocks_n, n_blocks_k]     (absent for dense codes)
//   W.zeros   scale dtype (offset form) or I32 (zero points), same shape   (when present)
//   W.k_perm  I32 [K]                                   (act-order, when present)
// and __metadata__ "mixq.format" = "1", "mixq.weight.W" = a key=value;... description of the
// geometry (code type, N, K, block_k, block_n, zero kind, origin). Extra metadata pairs are kept.
void save_mixq_safetensors(const std::string& path,
                           const std::vector<std::pair<std::string, QuantizedWeight>>& weights,
                           const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace mixq::formats
