#include "formats/safetensors/st_json.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mixq/error.hpp"

namespace mixq::formats::json {

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto& kv : object)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "boolean";
    case Value::Kind::Int:
      return "integer";
    case Value::Kind::Float:
      return "non-integer number";
    case Value::Kind::String:
      return "string";
    case Value::Kind::Array:
      return "array";
    case Value::Kind::Object:
      return "object";
  }
  return "?";
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const char* text, size_t size, const std::string& what)
      : p_(reinterpret_cast<const unsigned char*>(text)), n_(size), what_(what) {}

  void parse_members(
      const std::function<void(std::string&&, Value&&, size_t)>& on_member) {
    skip_ws();
    if (peek() != '{') fail("expected an object");
    ++i_;
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        skip_ws();
        if (peek() != '"') fail("expected a string key");
        const size_t key_at = i_;
        std::string key = parse_string();
        skip_ws();
        expect(':', "expected ':'");
        skip_ws();
        on_member(std::move(key), parse_value(1), key_at);
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}', "expected ',' or '}'");
        break;
      }
    }
    skip_ws();
    if (i_ != n_) fail("unexpected trailing characters");
  }

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (i_ != n_) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* problem) const {
    MIXQ_FAIL(ErrorCode::Format, what_, ": JSON ", problem, " at byte ", i_);
  }
  bool at_end() const { return i_ >= n_; }
  unsigned char peek() const { return at_end() ? 0 : p_[i_]; }
  void expect(char c, const char* problem) {
    if (at_end() || p_[i_] != static_cast<unsigned char>(c)) fail(problem);
    ++i_;
  }
  void skip_ws() {
    while (!at_end() && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }
  void expect_literal(const char* lit) {
    for (const char* c = lit; *c; ++c) expect(*c, "invalid literal");
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    if (at_end()) fail("unexpected end of input");
    Value v;
    switch (peek()) {
      case '{':
        parse_object(v, depth);
        break;
      case '[':
        parse_array(v, depth);
        break;
      case '"':
        v.kind = Value::Kind::String;
        v.string = parse_string();
        break;
      case 't':
        expect_literal("true");
        v.kind = Value::Kind::Bool;
        v.boolean = true;
        break;
      case 'f':
        expect_literal("false");
        v.kind = Value::Kind::Bool;
        break;
      case 'n':
        expect_literal("null");
        break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          parse_number(v);
        } else {
          fail("unexpected character");
        }
    }
    return v;
  }

  void parse_object(Value& v, int depth) {
    v.kind = Value::Kind::Object;
    ++i_;
    skip_ws();
    if (peek() == '}') {
      ++i_;
      return;
    }
    std::vector<size_t> key_at;  // byte offset of each key, for the duplicate-key message
    for (;;) {
      skip_ws();
      if (peek() != '"') fail("expected a string key");
      key_at.push_back(i_);
      std::string key = parse_string();
      skip_ws();
      expect(':', "expected ':'");
      skip_ws();
      Value member = parse_value(depth + 1);
      v.object.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}', "expected ',' or '}'");
      reject_duplicate_keys(v, key_at);
      return;
    }
  }

  // O(n log n) over indices, without copying keys: a header holds one key per tensor, and a
  // set of copies cost more than the rest of the parse.
  void reject_duplicate_keys(const Value& v, const std::vector<size_t>& key_at) {
    const auto& obj = v.object;
    const size_t n = obj.size();
    auto dup = [&](size_t a, size_t b) {
      const size_t later = std::max(a, b);
      i_ = key_at[later];
      MIXQ_FAIL(ErrorCode::Format, what_, ": JSON duplicate key \"", obj[later].first,
                "\" at byte ", key_at[later]);
    };
    if (n <= 8) {
      for (size_t a = 0; a < n; ++a)
        for (size_t b = a + 1; b < n; ++b)
          if (obj[a].first == obj[b].first) dup(a, b);
      return;
    }
    std::vector<uint32_t> order(n);
    for (size_t k = 0; k < n; ++k) order[k] = static_cast<uint32_t>(k);
    auto less = [&](uint32_t a, uint32_t b) { return obj[a].first < obj[b].first; };
    // Writers usually sort the keys; checking that first makes the common case linear.
    if (!std::is_sorted(order.begin(), order.end(), less)) std::sort(order.begin(), order.end(), less);
    for (size_t k = 1; k < n; ++k)
      if (obj[order[k - 1]].first == obj[order[k]].first) dup(order[k - 1], order[k]);
  }

  void parse_array(Value& v, int depth) {
    v.kind = Value::Kind::Array;
    ++i_;
    skip_ws();
    if (peek() == ']') {
      ++i_;
      return;
    }
    for (;;) {
      skip_ws();
      v.array.push_back(parse_value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect(']', "expected ',' or ']'");
      return;
    }
  }

  void parse_number(Value& v) {
    const size_t start = i_;
    bool integral = true;
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++i_;
    } else {
      fail("invalid number");
    }
    if (peek() == '.') {
      integral = false;
      ++i_;
      if (!(peek() >= '0' && peek() <= '9')) fail("invalid number (digit expected after '.')");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!(peek() >= '0' && peek() <= '9')) fail("invalid number (digit expected in exponent)");
      while (peek() >= '0' && peek() <= '9') ++i_;
    }
    const char* text = reinterpret_cast<const char*>(p_) + start;
    const size_t len = i_ - start;
    v.kind = Value::Kind::Float;
    if (integral) {
      // Accumulate with overflow checks: integers beyond int64 stay Float (callers reject them).
      const bool neg = text[0] == '-';
      uint64_t mag = 0;
      bool overflow = false;
      for (size_t k = neg ? 1 : 0; k < len; ++k) {
        const uint64_t d = static_cast<uint64_t>(text[k] - '0');
        if (mag > (UINT64_MAX - d) / 10) {
          overflow = true;
          break;
        }
        mag = mag * 10 + d;
      }
      const uint64_t limit = neg ? (uint64_t(1) << 63) : (uint64_t(1) << 63) - 1;
      if (!overflow && mag <= limit) {
        v.kind = Value::Kind::Int;
        v.integer = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
        v.number = static_cast<double>(v.integer);
        return;
      }
    }
    v.number = std::strtod(std::string(text, len).c_str(), nullptr);
  }

  unsigned hex4() {
    if (i_ + 4 > n_) fail("truncated \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = p_[i_++];
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= c - '0';
      else if (c >= 'a' && c <= 'f')
        u |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        u |= c - 'A' + 10;
      else
        fail("invalid hex digit in \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Validates one raw UTF-8 sequence starting at i_ (overlongs, surrogates, > U+10FFFF rejected).
  void copy_utf8(std::string& out) {
    const unsigned char c = p_[i_];
    int len;
    uint32_t cp;
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i_;
      return;
    }
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else
      fail("invalid UTF-8 lead byte");
    if (i_ + len > n_) fail("truncated UTF-8 sequence");
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = p_[i_ + k];
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8 continuation byte");
      cp = (cp << 6) | (cc & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("invalid UTF-8 code point");
    out.append(reinterpret_cast<const char*>(p_) + i_, len);
    i_ += len;
  }

  std::string parse_string() {
    expect('"', "expected '\"'");
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const unsigned char c = p_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c != '\\') {
        if (c >= 0x80) {
          copy_utf8(out);
          continue;
        }
        // A run of plain ASCII is appended at once (tensor names are mostly that).
        size_t j = i_ + 1;
        while (j < n_ && p_[j] >= 0x20 && p_[j] < 0x80 && p_[j] != '"' && p_[j] != '\\') ++j;
        out.append(reinterpret_cast<const char*>(p_) + i_, j - i_);
        i_ = j;
        continue;
      }
      ++i_;
      if (at_end()) fail("unterminated escape");
      const unsigned char e = p_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i_ + 2 > n_ || p_[i_] != '\\' || p_[i_ + 1] != 'u')
              fail("high surrogate not followed by a low surrogate");
            i_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --i_;
          fail("invalid escape");
      }
    }
  }

  const unsigned char* p_;
  size_t n_;
  size_t i_ = 0;
  const std::string& what_;
};

}  // namespace

void parse_members(const char* text, size_t size, const std::string& what,
                   const std::function<void(std::string&&, Value&&, size_t)>& on_member) {
  Parser(text, size, what).parse_members(on_member);
}

Value parse(const char* text, size_t size, const std::string& what) {
  return Parser(text, size, what).parse_document();
}

void append_quoted(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

}  // namespace mixq::formats::json
