// One view over the tensors of a safetensors checkpoint, whether it is one file or a sharded set
// (an index file and its shards, see safetensors_index.hpp). Converters and the command-line tool
// look tensors up here by name without caring which shard holds them, so a GPTQ module whose
// qweight and scales sit in different shards is assembled like any other.
//
// Shards are opened only when a tensor they hold is asked for (open_subset), and their data is
// mapped, not read: loading one weight of a 100-shard checkpoint reads one or two shard headers.
// Every opened shard is checked against the index: a missing shard file, a tensor the index puts
// elsewhere or does not list, and a listed tensor the shard lacks are Format errors naming both.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mixq/formats/safetensors.hpp"
#include "mixq/formats/safetensors_index.hpp"

namespace mixq::formats {

class SafetensorsCheckpoint {
 public:
  // `path`: a .safetensors file, a *.safetensors.index.json, or a directory holding either (see
  // checkpoint_in_directory). Opens every shard.
  static std::shared_ptr<SafetensorsCheckpoint> open(const std::string& path);
  // Like open, but of a sharded checkpoint only the shards holding some of `names` are opened
  // (and only those of `names` are listed); a single file is opened whole.
  static std::shared_ptr<SafetensorsCheckpoint> open_subset(const std::string& path,
                                                            const std::vector<std::string>& names);

  const std::string& path() const { return path_; }  // as given
  // The file whose directory holds the checkpoint (its quantization config files, its shards).
  const std::string& anchor() const { return anchor_; }
  bool sharded() const { return index_ != nullptr; }
  const SafetensorsIndex* index() const { return index_.get(); }

  // The tensors, in shard order then file order.
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent
  const SafetensorsTensor& get(const std::string& name) const;   // throws when absent
  // __metadata__ of the opened shards merged (first shard wins for plain keys; mixq's own keys
  // must agree), plus the index's "metadata" under "index.<key>".
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Every file reading this checkpoint involves: the file, or the index and all its shards.
  std::vector<std::string> files() const;

 private:
  SafetensorsCheckpoint() = default;
  void add_file(std::shared_ptr<SafetensorsFile> f, const std::vector<std::string>* names);
  void open_shard(const std::string& shard, const std::vector<std::string>* names);

  std::string path_, anchor_;
  std::shared_ptr<SafetensorsIndex> index_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::vector<const SafetensorsTensor*> tensors_;
  // keys view the names held by files_ (sharded checkpoints; one file has its own index)
  std::unordered_map<std::string_view, const SafetensorsTensor*> by_name_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, std::vector<std::string>> listed_;  // shard -> tensors the index puts there
};

}  // namespace mixq::formats
