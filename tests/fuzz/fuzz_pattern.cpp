// Differential: the iterative matcher and the compiled Pattern against a dynamic-programming
// reference (the textbook wildcard DP, O(|p|·|t|)).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gateway/pattern.hpp"

namespace {
bool reference(std::string_view p, std::string_view t) {
  // match[j] = pattern prefix p[0..i) matches text prefix t[0..j)
  std::vector<char> match(t.size() + 1, 0), next(t.size() + 1, 0);
  match[0] = 1;
  for (size_t i = 0; i < p.size(); ++i) {
    next.assign(t.size() + 1, 0);
    if (p[i] == '*') {
      char any = 0;
      for (size_t j = 0; j <= t.size(); ++j) next[j] = any = static_cast<char>(any || match[j]);
    } else {
      for (size_t j = 1; j <= t.size(); ++j)
        next[j] = static_cast<char>(match[j - 1] && p[i] == t[j - 1]);
    }
    match.swap(next);
  }
  return match[t.size()];
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view pattern = in.substr(0, nl);
  std::string_view text = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  bool expected = reference(pattern, text);
  if (hookgate::glob_match(pattern, text) != expected) __builtin_trap();
  if (hookgate::Pattern(std::string(pattern)).matches(text) != expected) __builtin_trap();
  return 0;
}
