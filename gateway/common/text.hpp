#pragma once
// ASCII text helpers shared by the modules that read protocol text (HTTP headers, hook output).
#include <cctype>
#include <string_view>

namespace hookgate {

// Case-insensitive equality for ASCII names (HTTP header names, tokens).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// `text` without leading and trailing whitespace (space, \t, \r, \n, \f, \v).
inline std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

}  // namespace hookgate
