// NamePattern: parse to a small syntax tree, compile to NFA instructions, run breadth-first (see
// name_pattern.hpp).
#include "mixq/formats/name_pattern.hpp"

#include <cstdint>
#include <memory>

#include "mixq/error.hpp"

namespace mixq::formats {

namespace {

using Inst = NamePattern::Inst;

constexpr size_t kMaxPatternBytes = 4096;
constexpr int kMaxDepth = 64;
constexpr size_t kMaxInsts = 10000;
constexpr int kMaxRepeat = 1000;

struct Node {
  enum class Kind { Empty, Set, Begin, End, Concat, Alt, Repeat } kind = Kind::Empty;
  std::bitset<256> set;
  std::vector<std::unique_ptr<Node>> kids;
  int min = 0, max = 0;  // Repeat; max -1 = unbounded
};

using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  NodePtr n(new Node());
  n->kind = k;
  return n;
}

std::bitset<256> range_set(int lo, int hi) {
  std::bitset<256> s;
  for (int c = lo; c <= hi; ++c) s.set(static_cast<size_t>(c));
  return s;
}

std::bitset<256> digit_set() { return range_set('0', '9'); }
std::bitset<256> word_set() {
  return range_set('a', 'z') | range_set('A', 'Z') | digit_set() | range_set('_', '_');
}
std::bitset<256> space_set() {
  std::bitset<256> s;
  for (const char c : {' ', '\t', '\n', '\r', '\f', '\v'}) s.set(static_cast<unsigned char>(c));
  return s;
}

// Recursive descent over the pattern; depth is bounded by kMaxDepth nested groups.
class Parser {
 public:
  explicit Parser(const std::string& p) : p_(p) {}

  NodePtr parse() {
    NodePtr n = alternation(0);
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unmatched ')'" : "unexpected character");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    MIXQ_FAIL(ErrorCode::InvalidArgument, "invalid pattern '", p_, "': ", why, " at offset ", i_);
  }
  bool more() const { return i_ < p_.size(); }
  char peek() const { return p_[i_]; }

  NodePtr alternation(int depth) {
    if (depth > kMaxDepth) fail("groups nested deeper than 64");
    NodePtr first = concatenation(depth);
    if (!more() || peek() != '|') return first;
    NodePtr alt = make(Node::Kind::Alt);
    alt->kids.push_back(std::move(first));
    while (more() && peek() == '|') {
      ++i_;
      alt->kids.push_back(concatenation(depth));
    }
    return alt;
  }

  NodePtr concatenation(int depth) {
    NodePtr cat = make(Node::Kind::Concat);
    while (more() && peek() != '|' && peek() != ')') cat->kids.push_back(repetition(depth));
    return cat;
  }

  NodePtr repetition(int depth) {
    NodePtr atom_node = atom(depth);
    if (!more()) return atom_node;
    int lo, hi;
    const char c = peek();
    if (c == '*') {
      lo = 0, hi = -1, ++i_;
    } else if (c == '+') {
      lo = 1, hi = -1, ++i_;
    } else if (c == '?') {
      lo = 0, hi = 1, ++i_;
    } else if (c != '{' || !counted(&lo, &hi)) {
      return atom_node;  // a '{' that is not a repeat count is a literal
    }
    if (atom_node->kind == Node::Kind::Begin || atom_node->kind == Node::Kind::End)
      fail("nothing to repeat");
    if (more() && peek() == '?') ++i_;  // lazy: same answer to "does it match"
    // As in ECMAScript, a quantifier cannot follow another one (a** is an error).
    if (more() && (peek() == '*' || peek() == '+' || peek() == '?')) fail("nothing to repeat");
    NodePtr r = make(Node::Kind::Repeat);
    r->min = lo;
    r->max = hi;
    r->kids.push_back(std::move(atom_node));
    return r;
  }

  // {m}, {m,}, {m,n}; false (nothing consumed) when the text is not of that form.
  bool counted(int* lo, int* hi) {
    size_t j = i_ + 1;
    auto number = [&](int* out) {
      const size_t start = j;
      long v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && j - start < 6)
        v = v * 10 + (p_[j++] - '0');
      *out = static_cast<int>(v);
      return j > start;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) *hi = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    if (*lo > kMaxRepeat || *hi > kMaxRepeat) fail("repeat count above 1000");
    if (*hi != -1 && *hi < *lo) fail("repeat range {m,n} with n < m");
    return true;
  }

  NodePtr set_node(const std::bitset<256>& s) {
    NodePtr n = make(Node::Kind::Set);
    n->set = s;
    return n;
  }

  NodePtr atom(int depth) {
    if (!more()) fail("pattern ends early");
    const char c = p_[i_++];
    switch (c) {
      case '(': {
        if (more() && peek() == '?') {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
            i_ += 2;
          } else {
            fail("look-around and named groups are not supported");
          }
        }
        NodePtr inner = alternation(depth + 1);
        if (!more() || peek() != ')') fail("missing ')'");
        ++i_;
        return inner;
      }
      case '[':
        return set_node(char_class());
      case '.': {
        std::bitset<256> s;
        s.set();
        s.reset('\n');
        s.reset('\r');
        return set_node(s);
      }
      case '^':
        return make(Node::Kind::Begin);
      case '$':
        return make(Node::Kind::End);
      case '\\':
        return set_node(escape(false));
      case '*':
      case '+':
      case '?':
        --i_;
        fail("nothing to repeat");
      default: {
        std::bitset<256> s;
        s.set(static_cast<unsigned char>(c));
        return set_node(s);
      }
    }
  }

  // After a backslash. In a class, \b is a backspace in ECMAScript; outside it is refused.
  std::bitset<256> escape(bool in_class) {
    if (!more()) fail("pattern ends with '\\'");
    const char c = p_[i_++];
    std::bitset<256> s;
    switch (c) {
      case 'd': return digit_set();
      case 'D': return ~digit_set();
      case 'w': return word_set();
      case 'W': return ~word_set();
      case 's': return space_set();
      case 'S': return ~space_set();
      case 't': s.set('\t'); return s;
      case 'n': s.set('\n'); return s;
      case 'r': s.set('\r'); return s;
      case 'f': s.set('\f'); return s;
      case 'v': s.set('\v'); return s;
      case 'x': {
        auto hex = [&](char h) -> int {
          if (h >= '0' && h <= '9') return h - '0';
          if (h >= 'a' && h <= 'f') return h - 'a' + 10;
          if (h >= 'A' && h <= 'F') return h - 'A' + 10;
          return -1;
        };
        if (i_ + 1 >= p_.size() || hex(p_[i_]) < 0 || hex(p_[i_ + 1]) < 0) fail("\\x needs two hex digits");
        s.set(static_cast<size_t>(hex(p_[i_]) * 16 + hex(p_[i_ + 1])));
        i_ += 2;
        return s;
      }
      case 'b':
        if (in_class) {
          s.set('\b');
          return s;
        }
        --i_;
        fail("\\b (word boundary) is not supported");
      default:
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          --i_;
          fail(std::string("escape \\") + c + " is not supported (back-references, \\B, \\p ...)");
        }
        s.set(static_cast<unsigned char>(c));  // \. \\ \[ \( ... : the character itself
        return s;
    }
  }

  std::bitset<256> char_class() {
    bool negate = false;
    if (more() && peek() == '^') {
      negate = true;
      ++i_;
    }
    std::bitset<256> s;
    bool first = true;
    for (;;) {
      if (!more()) fail("missing ']'");
      char c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      ++i_;
      std::bitset<256> item;
      int lo = -1;
      if (c == '\\') {
        item = escape(true);
        if (item.count() == 1)
          for (int b = 0; b < 256; ++b)
            if (item.test(static_cast<size_t>(b))) lo = b;
      } else {
        lo = static_cast<unsigned char>(c);
        item.set(static_cast<size_t>(lo));
      }
      // a-z: a range when '-' is followed by something other than ']'
      if (lo >= 0 && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        int hi;
        const char d = p_[i_++];
        if (d == '\\') {
          const std::bitset<256> e = escape(true);
          if (e.count() != 1) fail("class range ends in a class escape");
          hi = -1;
          for (int b = 0; b < 256; ++b)
            if (e.test(static_cast<size_t>(b))) hi = b;
        } else {
          hi = static_cast<unsigned char>(d);
        }
        if (hi < lo) fail("class range out of order");
        item = range_set(lo, hi);
      }
      s |= item;
    }
    return negate ? ~s : s;
  }

  const std::string& p_;
  size_t i_ = 0;
};

// Emits Thompson-construction code for a node; recursion follows the tree, whose depth the parser
// bounded.
class Compiler {
 public:
  std::vector<Inst> prog;

  void emit(const Node& n, const std::string& pattern) {
    switch (n.kind) {
      case Node::Kind::Empty:
        return;
      case Node::Kind::Set: {
        Inst i{Inst::Op::Byte, n.set, 0, 0};
        push(i, pattern);
        return;
      }
      case Node::Kind::Begin:
        push({Inst::Op::Begin, {}, 0, 0}, pattern);
        return;
      case Node::Kind::End:
        push({Inst::Op::End, {}, 0, 0}, pattern);
        return;
      case Node::Kind::Concat:
        for (const auto& k : n.kids) emit(*k, pattern);
        return;
      case Node::Kind::Alt: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k + 1 < n.kids.size(); ++k) {
          const size_t split = push({Inst::Op::Split, {}, 0, 0}, pattern);
          prog[split].x = static_cast<int>(prog.size());
          emit(*n.kids[k], pattern);
          jumps.push_back(push({Inst::Op::Jump, {}, 0, 0}, pattern));
          prog[split].y = static_cast<int>(prog.size());
        }
        emit(*n.kids.back(), pattern);
        for (const size_t j : jumps) prog[j].x = static_cast<int>(prog.size());
        return;
      }
      case Node::Kind::Repeat: {
        const Node& body = *n.kids[0];
        for (int r = 0; r < n.min; ++r) emit(body, pattern);
        if (n.max == -1) {  // L: split(body, out); body; jump L
          const size_t split = push({Inst::Op::Split, {}, 0, 0}, pattern);
          prog[split].x = static_cast<int>(prog.size());
          emit(body, pattern);
          const size_t j = push({Inst::Op::Jump, {}, 0, 0}, pattern);
          prog[j].x = static_cast<int>(split);
          prog[split].y = static_cast<int>(prog.size());
          return;
        }
        std::vector<size_t> splits;  // each optional copy may be skipped to the end
        for (int r = n.min; r < n.max; ++r) {
          const size_t split = push({Inst::Op::Split, {}, 0, 0}, pattern);
          prog[split].x = static_cast<int>(prog.size());
          splits.push_back(split);
          emit(body, pattern);
        }
        for (const size_t s : splits) prog[s].y = static_cast<int>(prog.size());
        return;
      }
    }
  }

  size_t push(const Inst& i, const std::string& pattern) {
    MIXQ_CHECK_ARG(prog.size() < kMaxInsts, "invalid pattern '", pattern,
                   "': it compiles to more than ", kMaxInsts,
                   " instructions (large repeat counts multiply the pattern)");
    prog.push_back(i);
    return prog.size() - 1;
  }
};

}  // namespace

NamePattern::NamePattern(const std::string& pattern) : pattern_(pattern) {
  MIXQ_CHECK_ARG(pattern.size() <= kMaxPatternBytes, "invalid pattern of ", pattern.size(),
                 " bytes: the limit is ", kMaxPatternBytes);
  Parser parser(pattern_);
  const NodePtr root = parser.parse();
  Compiler c;
  c.emit(*root, pattern_);
  c.push({Inst::Op::Match, {}, 0, 0}, pattern_);
  prog_ = std::move(c.prog);
}

bool NamePattern::search(const std::string& text) const {
  const size_t n = text.size(), m = prog_.size();
  // clist/nlist: threads waiting at a Byte instruction; `mark` de-duplicates per position, which
  // also stops empty loops such as (a*)*.
  std::vector<int> clist, nlist, stack;
  std::vector<size_t> mark(m, SIZE_MAX);
  clist.reserve(m);
  nlist.reserve(m);
  stack.reserve(m);
  // Follows the epsilon edges from `pc` at position `pos`; true when Match is reachable.
  auto add = [&](std::vector<int>& list, int pc0, size_t pos) {
    stack.push_back(pc0);
    bool matched = false;
    while (!stack.empty()) {
      const int pc = stack.back();
      stack.pop_back();
      if (mark[static_cast<size_t>(pc)] == pos) continue;
      mark[static_cast<size_t>(pc)] = pos;
      const Inst& in = prog_[static_cast<size_t>(pc)];
      switch (in.op) {
        case Inst::Op::Byte: list.push_back(pc); break;
        case Inst::Op::Jump: stack.push_back(in.x); break;
        case Inst::Op::Split: stack.push_back(in.y); stack.push_back(in.x); break;
        case Inst::Op::Begin: if (pos == 0) stack.push_back(pc + 1); break;
        case Inst::Op::End: if (pos == n) stack.push_back(pc + 1); break;
        case Inst::Op::Match: matched = true; break;
      }
    }
    return matched;
  };
  for (size_t pos = 0;; ++pos) {
    // Unanchored search: a new thread starts at every position.
    if (add(clist, 0, pos)) return true;
    if (pos == n || clist.empty()) {
      if (pos == n) return false;
      continue;
    }
    const unsigned char byte = static_cast<unsigned char>(text[pos]);
    nlist.clear();
    bool matched = false;
    for (const int pc : clist)
      if (prog_[static_cast<size_t>(pc)].set.test(byte)) matched |= add(nlist, pc + 1, pos + 1);
    if (matched) return true;
    clist.swap(nlist);
  }
}

}  // namespace mixq::formats
