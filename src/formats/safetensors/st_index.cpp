// Sharded safetensors index files (see safetensors_index.hpp).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "formats/safetensors/st_json.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"
#include "mixq/formats/safetensors_index.hpp"

namespace mixq::formats {

namespace {

// Index files of real checkpoints are a few MB (one line per tensor); bound hostile ones.
constexpr uint64_t kMaxIndexBytes = 256u << 20;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string scalar_text(const json::Value& v) {
  switch (v.kind) {
    case json::Value::Kind::String:
      return v.string;
    case json::Value::Kind::Int:
      return std::to_string(v.integer);
    case json::Value::Kind::Bool:
      return v.boolean ? "true" : "false";
    case json::Value::Kind::Null:
      return "null";
    default:
      return std::string("(") + json::kind_name(v.kind) + ")";
  }
}

// A shard name must stay inside the index's directory: a hostile index must not make mixq map
// /etc/passwd or ../../something.
void check_shard_name(const std::string& shard, const std::string& tensor,
                      const std::string& path) {
  const bool plain = !shard.empty() && shard != "." && shard != ".." &&
                     shard.find('/') == std::string::npos && shard.find('\0') == std::string::npos;
  MIXQ_CHECK(plain, ErrorCode::Format, path, ": weight_map[\"", tensor, "\"] = \"", shard,
             "\" is not a plain file name in the index's directory");
  MIXQ_CHECK(ends_with(shard, ".safetensors"), ErrorCode::Format, path, ": weight_map[\"", tensor,
             "\"] = \"", shard, "\" is not a .safetensors file");
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         s.find_first_not_of("0123456789") == std::string::npos;
}

// "<stem>-00002-of-00005.safetensors" -> stem, 2, "00005"; false for other names.
bool parse_series_name(const std::string& shard, std::string* stem, long* number,
                       std::string* count) {
  const std::string base = shard.substr(0, shard.size() - std::strlen(".safetensors"));
  const size_t of = base.rfind("-of-");
  if (of == std::string::npos) return false;
  *count = base.substr(of + 4);
  const size_t dash = base.rfind('-', of == 0 ? 0 : of - 1);
  if (dash == std::string::npos || dash >= of) return false;
  const std::string num = base.substr(dash + 1, of - dash - 1);
  if (!all_digits(num) || !all_digits(*count)) return false;
  *stem = base.substr(0, dash);
  *number = std::stol(num);
  return true;
}

// Shards named as one series must agree with each other and be complete: an index that lists
// shards 1 and 3 of 3 was edited or belongs to another download.
void check_series(const std::vector<std::string>& shards, const std::string& path) {
  std::string stem0, count0;
  std::set<long> numbers;
  for (const std::string& s : shards) {
    std::string stem, count;
    long n = 0;
    if (!parse_series_name(s, &stem, &n, &count)) return;  // not a numbered series: no checks
    if (numbers.empty()) {
      stem0 = stem;
      count0 = count;
    }
    MIXQ_CHECK(stem == stem0 && count == count0, ErrorCode::Format, path, ": shards \"",
               shards.front(), "\" and \"", s, "\" belong to different series");
    const long total = std::stol(count);
    MIXQ_CHECK(n >= 1 && n <= total, ErrorCode::Format, path, ": shard \"", s,
               "\" is numbered outside 1..", total);
    numbers.insert(n);
  }
  const long total = std::stol(count0);
  if (static_cast<long>(numbers.size()) == total) return;
  long missing = 1;
  while (numbers.count(missing)) ++missing;
  MIXQ_FAIL(ErrorCode::Format, path, ": weight_map names ", numbers.size(), " of the ", total,
            " shards \"", stem0, "-*-of-", count0, ".safetensors\" (no tensor is in shard ",
            missing, ")");
}

}  // namespace

bool is_safetensors_index_path(const std::string& path) {
  return ends_with(path, ".json");
}

SafetensorsIndex parse_safetensors_index(const char* text, size_t size, const std::string& path) {
  SafetensorsIndex idx;
  idx.path = path;
  idx.dir = dir_of(path);
  const json::Value root = json::parse(text, size, path);
  MIXQ_CHECK(root.is_object(), ErrorCode::Format, path, ": a safetensors index must be a JSON ",
             "object, got a ", json::kind_name(root.kind));
  const json::Value* meta = root.get("metadata");
  if (meta && meta->kind != json::Value::Kind::Null) {
    MIXQ_CHECK(meta->is_object(), ErrorCode::Format, path, ": \"metadata\" must be an object, got a ",
               json::kind_name(meta->kind));
    for (const auto& kv : meta->object) idx.metadata.emplace_back(kv.first, scalar_text(kv.second));
  }
  const json::Value* map = root.get("weight_map");
  MIXQ_CHECK(map != nullptr, ErrorCode::Format, path,
             ": no \"weight_map\" (not a safetensors index file)");
  MIXQ_CHECK(map->is_object(), ErrorCode::Format, path, ": \"weight_map\" must be an object, got a ",
             json::kind_name(map->kind));
  MIXQ_CHECK(!map->object.empty(), ErrorCode::Format, path, ": \"weight_map\" is empty");
  std::set<std::string> shards;
  idx.weight_map.reserve(map->object.size());
  for (const auto& kv : map->object) {
    MIXQ_CHECK(kv.second.is_string(), ErrorCode::Format, path, ": weight_map[\"", kv.first,
               "\"] must be a file name string, got a ", json::kind_name(kv.second.kind));
    MIXQ_CHECK(kv.first != "__metadata__", ErrorCode::Format, path,
               ": weight_map names the reserved tensor \"__metadata__\"");
    check_shard_name(kv.second.string, kv.first, path);
    shards.insert(kv.second.string);
    idx.weight_map.emplace_back(kv.first, kv.second.string);
  }
  std::sort(idx.weight_map.begin(), idx.weight_map.end());
  idx.shards.assign(shards.begin(), shards.end());
  check_series(idx.shards, path);
  return idx;
}

SafetensorsIndex read_safetensors_index(const std::string& path) {
  const std::vector<uint8_t> bytes = InputFile(path, "index").read_all(kMaxIndexBytes);
  return parse_safetensors_index(reinterpret_cast<const char*>(bytes.data()), bytes.size(), path);
}

std::string checkpoint_in_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  MIXQ_CHECK(d != nullptr, ErrorCode::Io, "checkpoint directory '", dir, "': cannot open: ",
             std::strerror(errno));
  std::vector<std::string> indexes;
  bool has_model = false;
  size_t n_safetensors = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (ends_with(name, ".safetensors.index.json")) indexes.push_back(name);
    if (ends_with(name, ".safetensors")) ++n_safetensors;
    if (name == "model.safetensors") has_model = true;
  }
  ::closedir(d);
  std::sort(indexes.begin(), indexes.end());
  const std::string base = dir.size() > 1 && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  if (indexes.size() == 1) return base + "/" + indexes[0];
  MIXQ_CHECK(indexes.empty(), ErrorCode::InvalidArgument, "checkpoint directory '", dir,
             "' holds ", indexes.size(), " index files (\"", indexes[0], "\", \"", indexes[1],
             "\"...): name the one to read");
  if (has_model) return base + "/model.safetensors";
  MIXQ_FAIL(ErrorCode::Io, "checkpoint directory '", dir,
            "' holds no *.safetensors.index.json and no model.safetensors (", n_safetensors,
            " other .safetensors file(s)): name the file to read");
}

}  // namespace mixq::formats
