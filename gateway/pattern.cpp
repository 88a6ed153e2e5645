#include "gateway/pattern.hpp"

#include <algorithm>

namespace hookgate {

bool glob_match(std::string_view p, std::string_view t) {
  // Iterative wildcard match with single backtrack point: O(|p|*|t|) worst case, no recursion.
  size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && p[pi] == t[ti]) {
      ++pi;
      ++ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Pattern::Pattern(std::string text) : text_(std::move(text)) {
  auto stars = std::count(text_.begin(), text_.end(), '*');
  if (stars == 0) {
    shape_ = Shape::Exact;
  } else if (text_.find_first_not_of('*') == std::string::npos) {
    shape_ = Shape::Any;
  } else if (stars == 1 && text_.back() == '*') {
    shape_ = Shape::Prefix;
    literal_ = text_.substr(0, text_.size() - 1);
  } else if (stars == 1 && text_.front() == '*') {
    shape_ = Shape::Suffix;
    literal_ = text_.substr(1);
  } else {
    shape_ = Shape::General;
  }
}

bool Pattern::matches(std::string_view type) const {
  switch (shape_) {
    case Shape::Exact:
      return type == text_;
    case Shape::Any:
      return true;
    case Shape::Prefix:
      return type.starts_with(literal_);
    case Shape::Suffix:
      return type.ends_with(literal_);
    case Shape::General:
      return glob_match(text_, type);
  }
  return false;
}

PatternSet::PatternSet(const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    patterns_.emplace_back(p);
    if (p.find_first_not_of('*') == std::string::npos && !p.empty()) match_all_ = true;
  }
}

bool PatternSet::matches(std::string_view type) const {
  if (match_all_) return true;
  for (const auto& p : patterns_)
    if (p.matches(type)) return true;
  return false;
}

std::vector<std::string> PatternSet::texts() const {
  std::vector<std::string> out;
  for (const auto& p : patterns_) out.push_back(p.text());
  return out;
}

}  // namespace hookgate
