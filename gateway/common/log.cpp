#include "gateway/common/log.hpp"

#include "gateway/common/clock.hpp"
#include "gateway/common/text.hpp"

#include <algorithm>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace hookgate {
namespace {

std::mutex g_secret_mu;
// Longest first: a secret that holds another (`${KEY}${SUFFIX}` registers both) is redacted
// whole before the shorter one could leave its rest in the text.
struct LongestFirst {
  bool operator()(const std::string& a, const std::string& b) const {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  }
};
std::set<std::string, LongestFirst>& secrets() {
  static std::set<std::string, LongestFirst> s;
  return s;
}

// Formats each record as one JSON object; the message is escaped and passed through the redactor.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto secs =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    std::string line =
        "{\"ts_ms\":" + std::to_string(secs) + ",\"level\":\"" +
        std::string(spdlog::level::to_string_view(msg.level).data(),
                    spdlog::level::to_string_view(msg.level).size()) +
        "\",\"msg\":\"" +
        json_escape(redact_secrets(std::string_view(msg.payload.data(), msg.payload.size()))) +
        "\"}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

class RedactingTextFormatter final : public spdlog::formatter {
 public:
  RedactingTextFormatter()
      // UTC, marked: a local time without its offset (found in an exploratory run) cannot be
      // lined up with a receiver's logs or the JSON format's ts_ms.
      : inner_(std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v",
                                                           spdlog::pattern_time_type::utc)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string redacted =
        escape_controls(redact_secrets(std::string_view(msg.payload.data(), msg.payload.size())));
    spdlog::details::log_msg copy = msg;
    copy.payload = redacted;
    inner_->format(copy, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<RedactingTextFormatter>();
  }

 private:
  std::unique_ptr<spdlog::formatter> inner_;
};

}  // namespace

// One record, one line: control characters that came from outside (an event's source, a hook's
// output) are written as \n, \r or \u00NN, so they cannot forge or hide log lines; the JSON
// spellings, so a JSON body `deliveries show` prints stays JSON. Tabs stay. Bytes that are not
// UTF-8 become U+FFFD, as in the JSON log (found in an SRE pass: a hook's stderr reached the text
// log raw, and log shippers that expect UTF-8 drop or mangle such lines).
std::string escape_controls(std::string text) {
  if (!valid_utf8(text)) text = to_valid_utf8(text);
  // 0xc2 leads the UTF-8 of U+0080–U+009F, the C1 controls (U+009B starts a terminal escape
  // sequence as ESC [ does); it is checked with the byte after it below.
  auto is_control = [](unsigned char c) {
    return (c < 0x20 && c != '\t') || c == 0x7f || c == 0xc2;
  };
  if (std::none_of(text.begin(), text.end(), [&](char c) { return is_control(c); })) return text;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0xc2) {
      const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
      if (next >= 0x80 && next <= 0x9f) {
        out += "\\u00";
        out.push_back(kHex[next >> 4]);
        out.push_back(kHex[next & 0xf]);
        ++i;
      } else {
        out.push_back(static_cast<char>(c));
      }
    } else if (!is_control(c)) {
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

// "warning" too: the log itself prints that name (spdlog's from_str takes both). Any case, as the
// config's keywords (`INFO`).
bool is_log_level(std::string_view level) {
  for (std::string_view name : {"trace", "debug", "info", "warn", "warning", "error", "off"})
    if (iequals(level, name)) return true;
  return false;
}

void setup_logging(std::string_view level, std::string_view format) {
  auto logger = std::make_shared<spdlog::logger>("hookgate",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_formatter(std::make_unique<RedactingTextFormatter>());
  }
  logger->set_level(spdlog::level::from_str(ascii_lower(std::string(level))));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// Shorter ones are too short to redact without mangling ordinary text; a variable holding one is
// still kept from hooks (found in a security pass: a 3-byte secret was in every hook's
// environment).
constexpr size_t kMinRedacted = 4;

void register_secret(std::string_view secret) {
  if (secret.empty()) return;
  std::lock_guard lock(g_secret_mu);
  secrets().emplace(secret);
}

bool holds_secret(std::string_view value) {
  constexpr size_t kMinContained = 16;
  std::lock_guard lock(g_secret_mu);
  for (const auto& s : secrets()) {
    if (value == s || (s.size() >= kMinContained && value.find(s) != std::string_view::npos))
      return true;
  }
  return false;
}

std::string redact_secrets(std::string_view text) {
  std::string out(text);
  {
    std::lock_guard lock(g_secret_mu);
    for (const auto& s : secrets()) {
      if (s.size() < kMinRedacted) continue;
      for (size_t pos = out.find(s); pos != std::string::npos; pos = out.find(s, pos + 10))
        out.replace(pos, s.size(), "[REDACTED]");
    }
  }
  // scheme://user:pass@host -> scheme://[REDACTED]@host
  for (size_t scheme = out.find("://"); scheme != std::string::npos;
       scheme = out.find("://", scheme + 3)) {
    size_t start = scheme + 3;
    size_t end = out.find_first_of("/ \t\"'", start);
    size_t at = out.find('@', start);
    if (at != std::string::npos && (end == std::string::npos || at < end))
      out.replace(start, at - start, "[REDACTED]");
  }
  return out;
}

std::string json_escape(std::string_view raw) {
  const std::string text = to_valid_utf8(raw);  // a JSON document is UTF-8, whatever was logged
  std::string out;
  out.reserve(text.size() + 8);
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

LogLimiter& log_limiter_for(std::string_view what, int per_second) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<LogLimiter>, std::less<>> limiters;
  std::lock_guard lock(mu);
  auto it = limiters.find(what);
  if (it == limiters.end())
    it =
        limiters
            .emplace(std::string(what), std::make_unique<LogLimiter>(per_second, std::string(what)))
            .first;
  return *it->second;
}

namespace {
// Every live LogLimiter, for report_suppressed(). Never destroyed: limiters with static storage
// unregister at exit, after a static set would be gone.
struct LimiterRegistry {
  std::mutex mu;
  std::set<LogLimiter*> limiters;
};
LimiterRegistry& limiter_registry() {
  static auto* registry = new LimiterRegistry;
  return *registry;
}
}  // namespace

LogLimiter::LogLimiter(int per_second, std::string what)
    : per_second_(per_second), what_(std::move(what)) {
  std::lock_guard lock(limiter_registry().mu);
  limiter_registry().limiters.insert(this);
}

LogLimiter::~LogLimiter() {
  std::lock_guard lock(limiter_registry().mu);
  limiter_registry().limiters.erase(this);
}

uint64_t LogLimiter::take_report_locked(int64_t now) {
  if (now <= second_) return 0;
  const uint64_t report = suppressed_;
  second_ = now;
  used_ = 0;
  suppressed_ = 0;
  return report;
}

void LogLimiter::report_suppressed(bool final) {
  std::vector<std::pair<std::string, uint64_t>> reports;
  {
    auto& registry = limiter_registry();
    std::lock_guard lock(registry.mu);
    const int64_t now = now_steady_ns() / 1000000000;
    for (LogLimiter* limiter : registry.limiters) {
      std::lock_guard limiter_lock(limiter->mu_);
      if (limiter->suppressed_ == 0) continue;
      // A final report takes the current second's count too, and leaves its window as it is.
      const uint64_t n =
          final ? std::exchange(limiter->suppressed_, 0) : limiter->take_report_locked(now);
      if (n > 0) reports.emplace_back(limiter->what_, n);
    }
  }
  for (const auto& [what, n] : reports) spdlog::warn("{}: {} more not logged", what, n);
}

bool LogLimiter::allow() {
  uint64_t report = 0;  // lines suppressed in the second that just ended
  bool allowed = false;
  {
    std::lock_guard lock(mu_);
    // Read under the lock: a thread that read an older second must not move the window back.
    report = take_report_locked(now_steady_ns() / 1000000000);
    allowed = used_ < per_second_;
    if (allowed) {
      ++used_;
    } else {
      ++suppressed_;
    }
  }
  if (report > 0) spdlog::warn("{}: {} more not logged", what_, report);
  return allowed;
}

}  // namespace hookgate
