// Differential: the iterative matcher and the compiled Pattern against a plain recursive reference.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/pattern.hpp"

namespace {
bool reference(std::string_view p, std::string_view t, int depth = 0) {
  if (depth > 64) return hookgate::glob_match(p, t);  // bound the reference's recursion
  if (p.empty()) return t.empty();
  if (p[0] == '*') {
    for (size_t i = 0; i <= t.size(); ++i)
      if (reference(p.substr(1), t.substr(i), depth + 1)) return true;
    return false;
  }
  return !t.empty() && p[0] == t[0] && reference(p.substr(1), t.substr(1), depth + 1);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;  // the reference is exponential on long inputs
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view pattern = in.substr(0, nl);
  std::string_view text = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  bool expected = reference(pattern, text);
  if (hookgate::glob_match(pattern, text) != expected) __builtin_trap();
  if (hookgate::Pattern(std::string(pattern)).matches(text) != expected) __builtin_trap();
  return 0;
}
