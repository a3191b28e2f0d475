#include "formats/safetensors/st_quant_config.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "formats/safetensors/st_json.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"

namespace mixq::formats {

namespace {

constexpr size_t kMaxConfigBytes = 64u << 20;

bool read_small_file(const std::string& path, std::string* out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;  // absent: no config of this kind
  const std::vector<uint8_t> bytes = InputFile(path, "config file").read_all(kMaxConfigBytes);
  out->assign(bytes.begin(), bytes.end());
  return true;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string printable(const json::Value& v) {
  switch (v.kind) {
    case json::Value::Kind::Null:
      return "null";
    case json::Value::Kind::Bool:
      return v.boolean ? "true" : "false";
    case json::Value::Kind::Int:
      return std::to_string(v.integer);
    case json::Value::Kind::Float: {
      std::ostringstream os;
      os << v.number;
      return os.str();
    }
    case json::Value::Kind::String:
      return v.string;
    case json::Value::Kind::Array: {
      std::string s = "[";
      for (size_t i = 0; i < v.array.size(); ++i) s += (i ? ", " : "") + printable(v.array[i]);
      return s + "]";
    }
    case json::Value::Kind::Object:
      return "{...}";
  }
  return "";
}

void apply(QuantConfig& c, const json::Value& q, const std::string& file) {
  auto int_field = [&](const char* key, int64_t* out) {
    const json::Value* v = q.get(key);
    if (!v || v->kind == json::Value::Kind::Null) return;
    MIXQ_CHECK(v->is_int(), ErrorCode::Format, file, ": \"", key, "\" must be an integer, got a ",
               json::kind_name(v->kind));
    *out = v->integer;
  };
  auto bool_field = [&](const char* key, bool* out, bool* present = nullptr) {
    const json::Value* v = q.get(key);
    if (!v || v->kind == json::Value::Kind::Null) return;
    MIXQ_CHECK(v->is_bool(), ErrorCode::Format, file, ": \"", key, "\" must be true or false");
    *out = v->boolean;
    if (present) *present = true;
  };
  auto str_field = [&](const char* key, std::string* out) {
    const json::Value* v = q.get(key);
    if (!v || v->kind == json::Value::Kind::Null) return;
    MIXQ_CHECK(v->is_string(), ErrorCode::Format, file, ": \"", key, "\" must be a string");
    *out = lower(v->string);
  };
  str_field("quant_method", &c.quant_method);
  if (c.quant_method.empty()) str_field("method", &c.quant_method);
  int64_t bits = 0;
  int_field("bits", &bits);
  if (bits == 0) int_field("w_bit", &bits);
  MIXQ_CHECK(bits >= 0 && bits <= 64, ErrorCode::Format, file, ": bits ", bits, " out of range");
  c.bits = static_cast<int>(bits);
  int_field("group_size", &c.group_size);
  if (c.group_size == 0) int_field("q_group_size", &c.group_size);
  MIXQ_CHECK(c.group_size == 0 || c.group_size == -1 || c.group_size >= 1, ErrorCode::Format, file,
             ": group_size ", c.group_size, " must be -1 or positive");
  bool_field("desc_act", &c.desc_act);
  bool_field("sym", &c.sym);
  str_field("checkpoint_format", &c.checkpoint_format);
  if (c.checkpoint_format.empty()) str_field("format", &c.checkpoint_format);
  bool_field("zero_point", &c.zero_point, &c.has_zero_point);
  str_field("version", &c.version);
  if (const json::Value* b = q.get("weight_block_size"); b && b->kind != json::Value::Kind::Null) {
    MIXQ_CHECK(b->kind == json::Value::Kind::Array && b->array.size() == 2 &&
                   b->array[0].is_int() && b->array[1].is_int() && b->array[0].integer >= 1 &&
                   b->array[1].integer >= 1 && b->array[0].integer <= (1 << 20) &&
                   b->array[1].integer <= (1 << 20),
               ErrorCode::Format, file, ": weight_block_size must be [block_n, block_k] positive");
    c.block_n = b->array[0].integer;
    c.block_k = b->array[1].integer;
  }
  for (const auto& kv : q.object)
    c.printable.emplace_back("quantization." + kv.first, printable(kv.second));
}

}  // namespace

QuantConfig read_quant_config(const std::string& st_path) {
  QuantConfig c;
  const size_t slash = st_path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : st_path.substr(0, slash);
  std::string text;
  // quantize_config.json (GPTQ) is the most specific, then HF config.json, then AutoAWQ's file.
  const std::string gptq = dir + "/quantize_config.json";
  if (read_small_file(gptq, &text)) {
    const json::Value v = json::parse(text.data(), text.size(), gptq);
    MIXQ_CHECK(v.is_object(), ErrorCode::Format, gptq, ": not a JSON object");
    c.source = gptq;
    apply(c, v, gptq);
    if (c.quant_method.empty()) c.quant_method = "gptq";
    return c;
  }
  const std::string hf = dir + "/config.json";
  if (read_small_file(hf, &text)) {
    const json::Value v = json::parse(text.data(), text.size(), hf);
    MIXQ_CHECK(v.is_object(), ErrorCode::Format, hf, ": not a JSON object");
    if (const json::Value* q = v.get("quantization_config")) {
      MIXQ_CHECK(q->is_object(), ErrorCode::Format, hf, ": quantization_config must be an object");
      c.source = hf;
      apply(c, *q, hf);
      return c;
    }
  }
  const std::string awq = dir + "/quant_config.json";
  if (read_small_file(awq, &text)) {
    const json::Value v = json::parse(text.data(), text.size(), awq);
    MIXQ_CHECK(v.is_object(), ErrorCode::Format, awq, ": not a JSON object");
    c.source = awq;
    apply(c, v, awq);
    if (c.quant_method.empty()) c.quant_method = "awq";
  }
  return c;
}

}  // namespace mixq::formats
