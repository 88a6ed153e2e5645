#include "gateway/pattern.hpp"

#include <gtest/gtest.h>

namespace hookgate {
namespace {

struct Case {
  const char* pattern;
  const char* type;
  bool match;
};

// Every example from PRODUCT.md "Patterns", plus edge cases of the backtracking matcher.
const Case kCases[] = {
    {"plan:build:*", "plan:build:failed", true},
    {"plan:build:*", "plan:build:", true},
    {"plan:build:*", "plan:deploy:failed", false},
    {"*:complete", "plan:build:complete", true},
    {"*:complete", "plan:build:completed", false},
    {"*", "anything.at:all", true},
    {"*", "", true},
    {"plan.build:start", "plan.build:start", true},
    {"plan.build:start", "planXbuild:start", false},
    {"plan.build:start", "plan.build:start2", false},
    {"auth.*", "auth.failure", true},
    {"auth.*", "auth_failure", false},
    {"auth_failure", "auth_failure", true},
    {"a*b*c", "aXXbYYc", true},
    {"a*b*c", "aXXbYY", false},
    {"a*a*a", "aaa", true},
    {"a*a*a", "aa", false},
    {"*.*", "user.created", true},
    {"*.*", "usercreated", false},
    {"**", "x", true},
    {"", "", true},
    {"", "x", false},
    {"x", "", false},
};

class GlobTest : public ::testing::TestWithParam<Case> {};

TEST_P(GlobTest, MatchesLikeProductSays) {
  const Case& c = GetParam();
  EXPECT_EQ(glob_match(c.pattern, c.type), c.match) << c.pattern << " vs " << c.type;
  EXPECT_EQ(Pattern(c.pattern).matches(c.type), c.match) << c.pattern << " vs " << c.type;
}

INSTANTIATE_TEST_SUITE_P(Product, GlobTest, ::testing::ValuesIn(kCases));

TEST(PatternSetTest, AnyOfAndEmpty) {
  PatternSet set({"auth.failure", "user.*"});
  EXPECT_TRUE(set.matches("auth.failure"));
  EXPECT_TRUE(set.matches("user.created"));
  EXPECT_FALSE(set.matches("auth.success"));
  EXPECT_FALSE(PatternSet().matches("anything"));
  EXPECT_TRUE(PatternSet({"*"}).matches("anything"));
}

}  // namespace
}  // namespace hookgate
