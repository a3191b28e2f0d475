// Regular expressions for selecting tensors by name, matched in time linear in the name.
//
// std::regex backtracks and recurses once per character, so a crafted 50,000-character tensor
// name overflows the stack under an ordinary pattern. NamePattern compiles the pattern to a
// Thompson NFA and runs it breadth-first (a Pike VM without captures): time O(name length x
// pattern size), memory O(pattern size), no recursion on the name at all.
//
// Syntax: the ECMAScript subset that does not need backtracking. Literals; '.' (any byte but
// \n and \r); classes [abc], [^a-z], with \d \w \s inside; escapes \d \D \w \W \s \S \t \n \r
// \f \v \xHH and \<punctuation>; anchors ^ and $ (start and end of the name); groups (...) and
// (?:...); alternation |; quantifiers * + ? {m} {m,} {m,n} (a trailing '?' for laziness is
// accepted and changes nothing, since only "does it match" is asked). Back-references,
// look-around and \b are refused with a clear error. Bytes are matched as bytes (UTF-8 names
// work with literal UTF-8 text). Limits: pattern of 4096 bytes, 64 nested groups, 10000 compiled
// instructions, repeat counts up to 1000.
#pragma once

#include <bitset>
#include <string>
#include <vector>

namespace mixq::formats {

class NamePattern {
 public:
  // Throws mixq::Error(InvalidArgument) "invalid pattern '<pattern>': <why> at offset <i>".
  explicit NamePattern(const std::string& pattern);
  // True when the pattern matches somewhere in `text` (like std::regex_search).
  bool search(const std::string& text) const;
  const std::string& pattern() const { return pattern_; }

  struct Inst {
    enum class Op { Byte, Split, Jump, Begin, End, Match } op;
    std::bitset<256> set;  // Byte: the bytes it accepts
    int x = 0, y = 0;      // Split: both targets; Jump: x
  };

 private:
  std::string pattern_;
  std::vector<Inst> prog_;
};

}  // namespace mixq::formats
