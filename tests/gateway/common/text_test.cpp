#include "gateway/common/text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hookgate {
namespace {

using namespace std::string_literals;

TEST(TextTest, Utf8ValidityFollowsTheStandardsEdges) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii"));
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(valid_utf8("\xC3"));                                      // cut short
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));                                  // overlong '/'
  EXPECT_FALSE(valid_utf8("\xE0\x80\xAF"));                              // overlong, 3 bytes
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));                              // a lone surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));                          // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8("a\x80z"));  // a continuation byte alone
}

TEST(TextTest, InvalidBytesBecomeTheReplacementCharacterOneEach) {
  EXPECT_EQ(to_valid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(to_valid_utf8("a\xFF\xFE"
                          "b"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(valid_utf8(to_valid_utf8("\xC3(\xF0\x28\x8C\x28")));
}

// Reasons quote what hooks and receivers send: an excerpt must stay valid UTF-8 when cut.
TEST(TextTest, AnExcerptIsCutOnACharacterBoundary) {
  EXPECT_EQ(excerpt("short", 10), "short");
  EXPECT_EQ(excerpt("abcdef", 3), "abc...");
  const std::string euros = "\xE2\x82\xAC\xE2\x82\xAC";  // two 3-byte characters
  EXPECT_EQ(excerpt(euros, 4), "\xE2\x82\xAC...");       // not a split second euro
  EXPECT_EQ(excerpt(euros, 2), "...");
  EXPECT_TRUE(valid_utf8(excerpt("\xFF\xFE", 10)));
}

// File names and sender bytes go into logs, metrics labels and JSON.
TEST(TextTest, ControlCharactersNeverPassAsDisplayText) {
  EXPECT_TRUE(is_display_text("hook_10.yaml \xC3\xA9"));
  EXPECT_FALSE(is_display_text("line\nbreak"));
  EXPECT_FALSE(is_display_text("esc\x1b[2J"));
  EXPECT_FALSE(is_display_text("del\x7f"));
  EXPECT_FALSE(is_display_text("latin1 \xE9"));
  EXPECT_EQ(display_text("ok.yaml"), "ok.yaml");
  EXPECT_EQ(display_text("a\nb\xE9"), "a?b?");
  EXPECT_EQ(printable_prefix("GET /\r\n\x01", 64), "GET /???");
  EXPECT_EQ(printable_prefix("abcdef", 3), "abc...");
}

TEST(TextTest, TrimAndCaseAreAsciiOnly) {
  EXPECT_EQ(trim("  \tvalue \t "), "value");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(ascii_lower("X-Api-KEY \xC3\x89"), "x-api-key \xC3\x89");  // É stays as it is
  EXPECT_EQ(ascii_upper("normal"), "NORMAL");
  EXPECT_TRUE(iequals("Content-Length", "content-length"));
  EXPECT_FALSE(iequals("Content-Length", "content-lengt"));
}

TEST(TextTest, HexAndJoin) {
  EXPECT_EQ(to_hex(""), "");
  EXPECT_EQ(to_hex("\x00\x7f\xff"s), "007fff");
  EXPECT_EQ(join({"a", "b", "c"}), "a,b,c");
  EXPECT_EQ(join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(join({}), "");
}

TEST(TextTest, ABearerTokenIsOnePrintableWord) {
  EXPECT_EQ(bearer_token_problem("0123456789abcdef0123456789abcdef"), "");
  EXPECT_NE(bearer_token_problem("two words"), "");
  EXPECT_NE(bearer_token_problem("tab\there"), "");
  EXPECT_NE(bearer_token_problem("caf\xC3\xA9"), "");
  // The problem never quotes the token: it is a secret.
  EXPECT_EQ(bearer_token_problem("s3cret value").find("s3cret"), std::string::npos);
}

TEST(TextTest, NameCharacters) {
  for (char c : std::string("aZ09_-.")) EXPECT_TRUE(is_name_char(c)) << c;
  for (char c : std::string(" /:\n\xC3")) EXPECT_FALSE(is_name_char(c)) << int(c);
}

}  // namespace
}  // namespace hookgate
