#pragma once
// Logging goes through spdlog's default logger. setup_logging() picks text or JSON lines.
// Rule: never pass a secret, a signature or an Authorization value to a log call; redact_secrets()
// is the last line of defence for strings that come from outside (URLs with credentials, peer
// text).
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>
#include <vector>

namespace hookgate {

// level: trace|debug|info|warn|error|off; format: text|json. Logs go to stderr.
void setup_logging(std::string_view level, std::string_view format);
// Whether `level` is one of the names above (spdlog reads any other name as "off").
bool is_log_level(std::string_view level);
// Registers values that must never appear in logs (webhook secrets, header values marked secret,
// and the ${VAR} values the config put into them: config/loader.cpp).
void register_secret(std::string_view secret);
// Replaces every registered secret in `text` with "[REDACTED]", and strips userinfo from URLs.
std::string redact_secrets(std::string_view text);
// Whether `value` is a registered secret, or contains one of 16 characters or more (shorter ones
// would match ordinary text, such as a PATH). Hook children do not inherit such variables.
bool holds_secret(std::string_view value);
// `text` with control characters (tabs aside) written as \n, \r or \xNN: text from outside
// (an event's type, a hook's output) cannot forge or hide lines in a log or a terminal.
std::string escape_controls(std::string text);
// JSON string escaping for hand-built JSON log lines and diagnostics.
std::string json_escape(std::string_view text);

}  // namespace hookgate
