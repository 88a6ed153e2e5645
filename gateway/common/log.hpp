#pragma once
// Logging goes through spdlog's default logger. setup_logging() picks text or JSON lines.
// Rule: never pass a secret, a signature or an Authorization value to a log call; redact_secrets()
// is the last line of defence for strings that come from outside (URLs with credentials, peer
// text).
#include <spdlog/spdlog.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace hookgate {

// level: trace|debug|info|warn|error|off; format: text|json. Logs go to stderr.
void setup_logging(std::string_view level, std::string_view format);
// Whether `level` is one of the names above (spdlog reads any other name as "off").
bool is_log_level(std::string_view level);
// Registers values that must never appear in logs (webhook secrets, header values marked secret,
// a URL's credentials, and the ${VAR} values the config put into them: config/loader.cpp).
void register_secret(std::string_view secret);
// Replaces every registered secret of 4 bytes or more in `text` with "[REDACTED]", and strips
// userinfo from URLs.
std::string redact_secrets(std::string_view text);
// Whether `value` is a registered secret, or contains one of 16 characters or more (shorter ones
// would match ordinary text, such as a PATH). Hook children do not inherit such variables.
bool holds_secret(std::string_view value);
// `text` with control characters (tabs aside), the UTF-8 C1 controls (U+0080–U+009F) among
// them, written as \n, \r or \u00NN (JSON's spellings): text from outside
// (an event's type, a hook's output) cannot forge or hide lines in a log or a terminal.
std::string escape_controls(std::string text);
// JSON string escaping for hand-built JSON log lines and diagnostics.
std::string json_escape(std::string_view text);

// Lets through `per_second` lines a second and counts the rest, so a flood of bad input (or a
// hook's chatter) cannot turn into a flood of log lines; the metrics still see every case. The
// first line asked for after a second with suppressed lines logs "<what>: N more not logged"
// first, and so does report_suppressed() for every limiter, which the gateway calls once a second
// and at its stop (found in an exploratory run: the count of a burst's last second waited for the
// next line of its kind, and without one never came). Thread-safe.
class LogLimiter {
 public:
  LogLimiter(int per_second, std::string what);
  ~LogLimiter();
  LogLimiter(const LogLimiter&) = delete;
  LogLimiter& operator=(const LogLimiter&) = delete;
  [[nodiscard]] bool allow();
  // Logs "<what>: N more not logged" for each limiter whose lines were suppressed in a second
  // that has ended, or with `final` (at a stop: no later call will come) in the current one too.
  static void report_suppressed(bool final = false);

 private:
  // The count to report, if the window has moved past the second it counted; resets it.
  uint64_t take_report_locked(int64_t now);

  const int per_second_;
  const std::string what_;
  std::mutex mu_;
  int64_t second_ = 0;
  int used_ = 0;
  uint64_t suppressed_ = 0;
};

// A process-wide LogLimiter for `what` (e.g. "hook audit stderr"), made on first use: for lines
// whose source is only known by name, such as a hook's. Lives until exit.
LogLimiter& log_limiter_for(std::string_view what, int per_second);

}  // namespace hookgate
