// Hugging Face sharded safetensors checkpoints: `model.safetensors.index.json` beside shard files
// `model-00001-of-00003.safetensors`, ... The index is JSON:
//   {"metadata": {"total_size": 123, ...}, "weight_map": {"tensor name": "shard file name", ...}}
// Shard names are plain file names in the index's directory (no '/', nothing outside it), and
// must end in ".safetensors".
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mixq::formats {

struct SafetensorsIndex {
  std::string path;  // the index file
  std::string dir;   // its directory; shard names are relative to it
  // "metadata" members in file order, values printed as JSON scalars ("123", "pt", ...).
  std::vector<std::pair<std::string, std::string>> metadata;
  // tensor name -> shard file name, sorted by tensor name.
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::vector<std::string> shards;  // the distinct shard names, sorted

  std::string shard_path(const std::string& shard) const { return dir + "/" + shard; }
};

// Parses index text; `path` names the file in messages and gives `dir`. Throws mixq::Error(Format)
// for malformed JSON, a missing or empty weight_map, non-string entries, shard names that are not
// plain "*.safetensors" file names, and an inconsistent shard series (names
// "<stem>-NNNNN-of-MMMMM.safetensors" that disagree on stem or count, or numbers outside 1..M).
SafetensorsIndex parse_safetensors_index(const char* text, size_t size, const std::string& path);
SafetensorsIndex read_safetensors_index(const std::string& path);

// True for names that end in ".json" (a checkpoint path that is an index, not a shard).
bool is_safetensors_index_path(const std::string& path);

// The checkpoint file a directory stands for: its one "*.safetensors.index.json", else its
// "model.safetensors". Throws mixq::Error(Io) naming what the directory holds otherwise.
std::string checkpoint_in_directory(const std::string& dir);

}  // namespace mixq::formats
