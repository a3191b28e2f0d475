// NamePattern (the linear-time matcher behind quantize --only / --skip): the same answers as
// std::regex_search (ECMAScript) on the supported syntax, bounded time and stack on huge names,
// and clear errors for what it does not support.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "mixq/formats/name_pattern.hpp"
#include "test_util.hpp"

namespace {

using mixq::formats::NamePattern;

const std::vector<std::string> kNames = {
    "",
    "lm_head.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.12.mlp.down_proj.qweight",
    "model.layers.3.mlp.experts.17.w2.weight_scale_inv",
    "blk.0.attn_q.weight",
    "a.b",
    "aaab",
    "x{2}y",
    "tab\there",
    "caf\xc3\xa9.weight",
    "[bracket]",
};

const std::vector<std::string> kPatterns = {
    "",       "weight",          "^lm_head",           "weight$",     "\\.weight$",
    "^$",     "layers\\.\\d+\\.mlp", "layers\\.(0|12)\\.", "q_proj|down_proj", "^(model|blk)\\.",
    "a+b",    "a*b",            "^a?a?a?b",            "a{3}b",       "a{2,}b",
    "a{1,2}b", "x\\{2\\}y",     "x{2}y",               "[0-9]+",      "[^a-z.]",
    "[a-c.]+$", "\\w+\\.\\w+$", "\\s",                 "\\S+",        "\\D\\d",
    "(a|b)*c", "((a)(b))",      "(?:mlp|attn)_",       "experts\\.\\d+\\.w[123]", ".",
    "^.*$",   "caf\xc3\xa9",    "\\[bracket\\]",       "[\\]]",       "a.b",
    "\\x61\\x2e",  "w.*?t",     "^(a*)*b$",            "[\\d_]+",     "e[-x]p",
};

TEST(NamePattern, AgreesWithStdRegexSearch) {
  for (const std::string& p : kPatterns) {
    const NamePattern ours(p);
    const std::regex theirs(p, std::regex::ECMAScript);
    for (const std::string& n : kNames)
      EXPECT_EQ(ours.search(n), std::regex_search(n, theirs)) << "pattern '" << p << "' name '"
                                                             << n << "'";
  }
}

TEST(NamePattern, HugeNamesTakeLinearTimeAndNoStack) {
  // std::regex recurses once per character here and overflows the stack at ~50,000 characters.
  const std::string name(100000, 'a');
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(NamePattern("a.*a").search(name));
  EXPECT_FALSE(NamePattern("^(a*)*b$").search(name));
  EXPECT_FALSE(NamePattern("(a|aa)+c").search(name));
  EXPECT_TRUE(NamePattern("a{100,200}$").search(name));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // ~0.3 s in a release build, ~3 s under ASan: the bound only catches super-linear behaviour
  EXPECT_LT(s, 20.0);
}

TEST(NamePattern, RefusesWhatItCannotMatchInLinearTime) {
  EXPECT_MIXQ_ERROR(NamePattern("(a)\\1"), "invalid pattern '(a)\\1'", "back-references");
  EXPECT_MIXQ_ERROR(NamePattern("a(?=b)"), "look-around");
  EXPECT_MIXQ_ERROR(NamePattern("\\bword"), "word boundary");
  EXPECT_MIXQ_ERROR(NamePattern("(a"), "missing ')'", "at offset 2");
  EXPECT_MIXQ_ERROR(NamePattern("a)"), "unmatched ')'");
  EXPECT_MIXQ_ERROR(NamePattern("[ab"), "missing ']'");
  EXPECT_MIXQ_ERROR(NamePattern("*a"), "nothing to repeat");
  EXPECT_MIXQ_ERROR(NamePattern("a**"), "nothing to repeat");
  EXPECT_MIXQ_ERROR(NamePattern("[z-a]"), "out of order");
  EXPECT_MIXQ_ERROR(NamePattern("a{3,2}"), "n < m");
  EXPECT_MIXQ_ERROR(NamePattern("a{5000}"), "above 1000");
  EXPECT_MIXQ_ERROR(NamePattern("(a{1000}){1000}"), "more than 10000 instructions");
  EXPECT_MIXQ_ERROR(NamePattern(std::string(100, '(') + std::string(100, ')')), "nested deeper");
  EXPECT_MIXQ_ERROR(NamePattern(std::string(5000, 'a')), "the limit is 4096");
  EXPECT_MIXQ_ERROR(NamePattern("\\x4"), "two hex digits");
}

}  // namespace
