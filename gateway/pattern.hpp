#pragma once
// Event-type glob patterns (PRODUCT.md "Patterns"): `*` matches any run of characters (`.` and `:`
// included), everything else is literal, anchored at both ends.
#include <string>
#include <string_view>
#include <vector>

namespace hookgate {

bool glob_match(std::string_view pattern, std::string_view text);

// A compiled pattern: the common shapes (exact, `*`, `prefix*`, `*suffix`) skip the general
// matcher.
class Pattern {
 public:
  explicit Pattern(std::string text);
  bool matches(std::string_view type) const;
  const std::string& text() const { return text_; }

 private:
  enum class Shape { Exact, Any, Prefix, Suffix, General };
  std::string text_;
  std::string literal_;
  Shape shape_;
};

// Any-of a list of patterns; an empty list matches nothing.
class PatternSet {
 public:
  PatternSet() = default;
  explicit PatternSet(const std::vector<std::string>& patterns);
  bool matches(std::string_view type) const;
  std::vector<std::string> texts() const;
  bool empty() const { return patterns_.empty(); }

 private:
  std::vector<Pattern> patterns_;
  bool match_all_ = false;
};

}  // namespace hookgate
