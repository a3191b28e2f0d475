// Internal: a small strict JSON parser for safetensors headers and the quantization config files
// beside checkpoints (quantize_config.json, config.json, quant_config.json).
//
// Strict means: RFC 8259 grammar only (no comments, no trailing commas, no NaN), valid UTF-8,
// \u escapes including surrogate pairs (lone surrogates rejected), duplicate object keys rejected,
// nesting depth limited (so hostile input cannot exhaust the stack). Numbers written without
// fraction/exponent that fit in int64 are Int; everything else is Float, so callers that need
// sizes or offsets can insist on Int and reject 1.0, 1e3 or 2^64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace mixq::formats::json {

struct Value {
  enum class Kind { Null, Bool, Int, Float, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;  // Float (and Int, converted)
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // file order, keys unique

  bool is_object() const { return kind == Kind::Object; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int; }
  bool is_bool() const { return kind == Kind::Bool; }
  // Member lookup (objects only); nullptr when absent or when this is not an object.
  const Value* get(const std::string& key) const;
};

const char* kind_name(Value::Kind k);

// Parses exactly one JSON value spanning [text, text + size) (surrounding whitespace allowed).
// Throws mixq::Error(Format) "<what>: JSON ... at byte <offset>".
Value parse(const char* text, size_t size, const std::string& what);

// Parses one JSON object spanning [text, text + size) member by member: each member's value is
// handed to `on_member` and dropped, so memory stays that of one member however many there are
// (a safetensors header has one member per tensor). Duplicate keys are the caller's to detect
// (it gets each key's byte offset for the message). Same grammar and errors as parse().
void parse_members(const char* text, size_t size, const std::string& what,
                   const std::function<void(std::string&& key, Value&& value, size_t key_at)>&
                       on_member);

// Appends `s` as a JSON string literal (quotes and escapes included).
void append_quoted(std::string& out, const std::string& s);

}  // namespace mixq::formats::json
