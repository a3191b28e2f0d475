// Format detection: a directory or an index (*.json) is a sharded safetensors checkpoint, a file
// with the GGUF magic is GGUF, everything else must be safetensors.
#include "mixq/formats/checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>

#include "core/shard_rows.hpp"
#include "formats/format_registry.hpp"
#include "mixq/formats/ggml_blocks.hpp"
#include "mixq/formats/gguf.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"
#include "mixq/formats/safetensors_index.hpp"

namespace mixq::formats {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_gguf(const std::string& path) {
  struct stat st {};
  // Directories and index files are safetensors; is_gguf_file reports anything else that is not
  // a regular file (and never blocks on a FIFO).
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;
  return !is_safetensors_index_path(path) && is_gguf_file(path);
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

CheckpointInfo inspect_checkpoint(const std::string& path) {
  return is_gguf(path) ? gguf_inspect(path) : safetensors_inspect(path);
}

QuantizedWeight load_weight(const std::string& path, const std::string& tensor) {
  return is_gguf(path) ? gguf_load_weight(path, tensor) : safetensors_load_weight(path, tensor);
}

namespace {

// The provenance suffix shard() appends, so every route produces the same weight.
std::string shard_origin(const std::string& origin, const ShardSpec& spec,
                         std::pair<int64_t, int64_t> r) {
  return std::string(origin.empty() ? "" : " ") + "tp " + shard_axis_name(spec.axis) + " " +
         std::to_string(spec.rank) + "/" + std::to_string(spec.world) + " [" +
         std::to_string(r.first) + ", " + std::to_string(r.second) + ")";
}

}  // namespace

QuantizedWeight load_shard(const std::string& path, const std::string& tensor,
                           const ShardSpec& spec) {
  if (is_gguf(path) && spec.axis == ShardAxis::Column) {
    const auto f = GgufFile::open(path);
    const GgufTensorInfo& t = f->tensor(tensor);
    const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
    const auto r = shard_range(rows, spec);
    QuantizedWeight w = f->load_weight_rows(tensor, r.first, r.second);
    w.origin += shard_origin(w.origin, spec, r);
    return w;
  }
  if (!is_gguf(path) && spec.axis == ShardAxis::Column) {
    // safetensors: only the bytes of the shard's rows (or the row blocks around them)
    std::pair<int64_t, int64_t> r;
    QuantizedWeight w = safetensors_load_rows(path, tensor, [&](int64_t N) { return r = shard_range(N, spec); });
    w.origin += shard_origin(w.origin, spec, r);
    return w;
  }
  if (is_gguf(path)) {  // row-parallel: the whole blocks around the shard's columns
    const auto f = GgufFile::open(path);
    const GgufTensorInfo& t = f->tensor(tensor);
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    if (info != nullptr && t.n_elements() > 0 && t.ne[0] % info->block_elems == 0) {
      const int64_t qk = info->block_elems;
      const auto r = shard_range(t.ne[0], spec);
      const int64_t a0 = r.first / qk * qk, a1 = std::min(t.ne[0], (r.second + qk - 1) / qk * qk);
      QuantizedWeight w = detail::shard_col_range(f->load_weight_cols(tensor, a0, a1), r.first - a0, r.second - a0);
      w.origin += shard_origin(w.origin, spec, r);
      return w;
    }
  }
  if (!is_gguf(path) && spec.axis == ShardAxis::Row) {
    // GPTQ / AWQ / FP8 blocks: only the run of whole groups around the shard's columns
    std::pair<int64_t, int64_t> r;
    std::optional<QuantizedWeight> w =
        safetensors_load_cols(path, tensor, [&](int64_t K) { return r = shard_range(K, spec); });
    if (w) {
      w->origin += shard_origin(w->origin, spec, r);
      return std::move(*w);
    }
  }
  return shard(load_weight(path, tensor), spec);
}

std::vector<std::string> checkpoint_files(const std::string& path) {
  struct stat st {};
  const bool is_dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string anchor = is_dir ? checkpoint_in_directory(path) : path;
  std::vector<std::string> files{anchor};
  if (is_safetensors_index_path(anchor) && exists(anchor)) {
    const SafetensorsIndex idx = read_safetensors_index(anchor);
    for (const std::string& s : idx.shards) files.push_back(idx.shard_path(s));
  }
  for (const char* config : {"quantize_config.json", "config.json", "quant_config.json"}) {
    const std::string p = dir_of(anchor) + "/" + config;
    if (exists(p)) files.push_back(p);
  }
  return files;
}

}  // namespace mixq::formats
