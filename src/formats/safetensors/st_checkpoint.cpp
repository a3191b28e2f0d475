// SafetensorsCheckpoint: one file or a sharded set as one set of tensors (see
// safetensors_checkpoint.hpp).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "mixq/error.hpp"
#include "mixq/formats/safetensors_checkpoint.hpp"

namespace mixq::formats {

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The numbered-series part of a shard name ("model-00001-of-00003.safetensors" ->
// "model-", "-of-00003.safetensors"); false for other names.
bool series_of(const std::string& shard, std::string* head, std::string* tail) {
  const size_t of = shard.rfind("-of-");
  if (of == std::string::npos || of == 0) return false;
  const size_t dash = shard.rfind('-', of - 1);
  if (dash == std::string::npos) return false;
  *head = shard.substr(0, dash + 1);
  *tail = shard.substr(of);
  const std::string num = shard.substr(dash + 1, of - dash - 1);
  return !num.empty() && num.find_first_not_of("0123456789") == std::string::npos;
}

// A file of the index's own series that the index does not list is a stale or mixed download
// (a shard left over from another revision): refuse rather than silently ignore its tensors.
void check_no_extra_shards(const SafetensorsIndex& idx) {
  std::string head, tail;
  if (!series_of(idx.shards.front(), &head, &tail)) return;
  const std::set<std::string> listed(idx.shards.begin(), idx.shards.end());
  DIR* d = ::opendir(idx.dir.c_str());
  if (d == nullptr) return;  // reported when a shard is opened
  std::string extra;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    std::string h, t;
    if (series_of(name, &h, &t) && h == head && t == tail && !listed.count(name)) {
      extra = name;
      break;
    }
  }
  ::closedir(d);
  MIXQ_CHECK(extra.empty(), ErrorCode::Format, idx.path, ": shard file \"", extra,
             "\" of this series is in the directory but not in weight_map (a stale or mixed "
             "download?)");
}

}  // namespace

std::shared_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& path) {
  std::shared_ptr<SafetensorsCheckpoint> c(new SafetensorsCheckpoint());
  c->path_ = path;
  c->anchor_ = is_directory(path) ? checkpoint_in_directory(path) : path;
  if (!is_safetensors_index_path(c->anchor_)) {
    c->add_file(SafetensorsFile::open(c->anchor_), nullptr);
    return c;
  }
  c->index_ = std::make_shared<SafetensorsIndex>(read_safetensors_index(c->anchor_));
  check_no_extra_shards(*c->index_);
  for (const std::string& shard : c->index_->shards) c->open_shard(shard, nullptr);
  return c;
}

std::shared_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open_subset(
    const std::string& path, const std::vector<std::string>& names) {
  const std::string anchor = is_directory(path) ? checkpoint_in_directory(path) : path;
  if (!is_safetensors_index_path(anchor)) return open(path);
  std::shared_ptr<SafetensorsCheckpoint> c(new SafetensorsCheckpoint());
  c->path_ = path;
  c->anchor_ = anchor;
  c->index_ = std::make_shared<SafetensorsIndex>(read_safetensors_index(anchor));
  check_no_extra_shards(*c->index_);
  std::set<std::string> wanted(names.begin(), names.end()), shards;
  for (const auto& [tensor, shard] : c->index_->weight_map)
    if (wanted.count(tensor)) shards.insert(shard);
  for (const std::string& shard : shards) c->open_shard(shard, &names);
  return c;
}

void SafetensorsCheckpoint::open_shard(const std::string& shard,
                                       const std::vector<std::string>* names) {
  const SafetensorsIndex& idx = *index_;
  const std::string file = idx.shard_path(shard);
  if (listed_.empty())  // what the index puts in each shard, grouped once
    for (const auto& [tensor, s] : idx.weight_map) listed_[s].push_back(tensor);
  const std::vector<std::string>& listed = listed_[shard];
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 && errno == ENOENT)
    MIXQ_FAIL(ErrorCode::Io, idx.path, ": shard \"", shard, "\" (", listed.size(),
              " tensor(s), e.g. \"", listed.front(), "\") is missing: ", file, " does not exist");
  std::shared_ptr<SafetensorsFile> f = SafetensorsFile::open(file);
  // The shard and the index must agree exactly, tensor by tensor.
  for (const SafetensorsTensor& t : f->tensors()) {
    const auto it = std::lower_bound(idx.weight_map.begin(), idx.weight_map.end(),
                                     std::make_pair(t.name, std::string()));
    MIXQ_CHECK(it != idx.weight_map.end() && it->first == t.name, ErrorCode::Format, file,
               ": holds tensor \"", t.name, "\", which the index ", idx.path, " does not list");
    MIXQ_CHECK(it->second == shard, ErrorCode::Format, file, ": holds tensor \"", t.name,
               "\", which the index ", idx.path, " puts in shard \"", it->second, "\"");
  }
  if (f->tensors().size() != listed.size()) {
    for (const std::string& name : listed)
      MIXQ_CHECK(f->find(name) != nullptr, ErrorCode::Format, idx.path, ": lists tensor \"", name,
                 "\" in shard \"", shard, "\", which does not hold it (", f->tensors().size(),
                 " of the ", listed.size(), " listed tensors are there)");
  }
  add_file(std::move(f), names);
}

void SafetensorsCheckpoint::add_file(std::shared_ptr<SafetensorsFile> f,
                                     const std::vector<std::string>* names) {
  std::set<std::string> wanted;
  if (names && index_) wanted.insert(names->begin(), names->end());
  tensors_.reserve(tensors_.size() + f->tensors().size());
  if (index_) by_name_.reserve(by_name_.size() + f->tensors().size());
  for (const SafetensorsTensor& t : f->tensors()) {
    if (!wanted.empty() && !wanted.count(t.name)) continue;
    // Each shard agrees with the index, which names every tensor once: no duplicates here. One
    // file needs no map of its own (SafetensorsFile::find is one).
    if (index_) by_name_.emplace(t.name, &t);
    tensors_.push_back(&t);
  }
  for (const auto& [key, value] : f->metadata()) {
    const auto [it, inserted] = metadata_.emplace(key, value);
    // mixq's layout describes each weight in the metadata: two shards that disagree about one
    // would make the weight depend on which shard was read first.
    MIXQ_CHECK(inserted || it->second == value || key.compare(0, 5, "mixq.") != 0,
               ErrorCode::Format, f->path(), ": metadata \"", key, "\" = \"", value,
               "\" disagrees with another shard's \"", it->second, "\"");
  }
  if (files_.empty() && index_)
    for (const auto& [key, value] : index_->metadata) metadata_.emplace("index." + key, value);
  files_.push_back(std::move(f));
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  if (!index_) return files_.empty() ? nullptr : files_[0]->find(name);
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const SafetensorsTensor& SafetensorsCheckpoint::get(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  MIXQ_CHECK(t != nullptr, ErrorCode::InvalidArgument, path_, ": no tensor named \"", name, "\"");
  return *t;
}

std::vector<std::string> SafetensorsCheckpoint::files() const {
  if (!index_) return {anchor_};
  std::vector<std::string> out{anchor_};
  for (const std::string& s : index_->shards) out.push_back(index_->shard_path(s));
  return out;
}

}  // namespace mixq::formats
