#pragma once
// Text helpers shared by the modules that read protocol text (HTTP headers, hook output).
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hookgate {

// Lower-case hex of each byte (digests, ids), appended to `out`.
inline void append_hex(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
}

// The value of one hex digit (either case), or -1.
inline int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline std::string to_hex(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  append_hex(out, bytes);
  return out;
}

// `items` with `sep` between them.
inline std::string join(const std::vector<std::string>& items, std::string_view sep = ",") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

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

// Why `token` could not travel as an HTTP bearer token, or "" when it can: words to follow the
// token's name ("admin.token ", "FILE: the token "), naming no character of it (it is a secret).
// A bearer token is one word (RFC 6750), and servers trim whitespace around a header's value.
inline std::string bearer_token_problem(std::string_view token) {
  const auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  if (token.empty()) return "is empty";
  if (blank(token.front()) || blank(token.back()))
    return "starts or ends with whitespace, which no client's Authorization header can carry; "
           "remove it";
  constexpr const char* kOneWord =
      "; a bearer token is one word (RFC 6750), e.g. from openssl rand -hex 32";
  for (unsigned char c : token) {
    if (c == '\0') return std::string("has a NUL byte in it (text saved as UTF-16?)") + kOneWord;
    if (blank(c) || std::iscntrl(c))
      return std::string("has whitespace or a control character inside it") + kOneWord;
    // Clients send other bytes as they please, or not at all (a byte-order mark, Latin-1).
    if (c > 0x7e) return std::string("has a byte outside printable ASCII") + kOneWord;
  }
  return "";
}

// `text` in ASCII lower case (keywords, URL schemes, units); other bytes as they are.
inline std::string ascii_lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

// `text` in ASCII upper case (SQL keywords); other bytes as they are.
inline std::string ascii_upper(std::string text) {
  for (char& c : text)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return text;
}

// `text` without leading and trailing whitespace (space, \t, \r, \n, \f, \v).
inline std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

// The length of the well-formed UTF-8 character at s[i] (no overlong forms, surrogates or code
// points past U+10FFFF), or 0 when the bytes there are not one.
inline size_t utf8_char_length(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? c : c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return n;
}

// Well-formed UTF-8.
inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_char_length(s, i)) == 0) return false;
  return true;
}

// `s` with every byte that does not belong to a well-formed UTF-8 character replaced by U+FFFD:
// text from outside (a hook's output) that goes into JSON, a log or a webhook body.
inline std::string to_valid_utf8(std::string_view s) {
  if (valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    if (size_t n = utf8_char_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// What a name may be made of (webhook names, hook names): letters, digits, '_', '-' and '.'.
inline bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// Whether `s` is UTF-8 text without control characters (what may name things in metrics labels,
// JSON and logs).
inline bool is_display_text(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return valid_utf8(s);
}

// At most `max` bytes of `text` (cut on a UTF-8 boundary, "..." appended when cut), as valid
// UTF-8: for reasons that quote what a hook sent.
inline std::string excerpt(std::string_view text, size_t max = 200) {
  if (text.size() <= max) return to_valid_utf8(text);
  size_t cut = max;
  // Back off continuation bytes (10xxxxxx) so a multi-byte character is not split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return to_valid_utf8(text.substr(0, cut)) + "...";
}

// `s` itself when it is display text; otherwise every byte outside printable ASCII becomes '?'
// (file names are bytes, not text: a Latin-1 name must not break a scrape or a JSON document).
inline std::string display_text(std::string_view s) {
  std::string out(s);
  if (is_display_text(s)) return out;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return out;
}

// At most `max` bytes of sender-supplied `bytes` for a log line or a reason: printable ASCII kept,
// every other byte '?', "..." when cut.
inline std::string printable_prefix(std::string_view bytes, size_t max = 64) {
  std::string out;
  for (unsigned char c : bytes.substr(0, max))
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  if (bytes.size() > max) out += "...";
  return out;
}

}  // namespace hookgate
