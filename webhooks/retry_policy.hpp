#pragma once
// What one attempt's result means for its delivery (PRODUCT.md "Delivery semantics"):
//   2xx                                        -> Delivered
//   connection errors, timeouts, 408, 429, 5xx -> Retry (Retry-After honoured, clamped)
//   3xx (redirects are not followed), other 4xx -> Final (dead-lettered at once)
//   410 Gone                                   -> Gone (final, and the webhook is paused)
// and when the next attempt happens: exponential backoff with full jitter, until max_attempts.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "webhooks/delivery.hpp"

namespace hookgate::webhooks {

// The raw facts of one finished attempt.
struct AttemptResult {
  int curl_code = 0;            // CURLcode; 0 (CURLE_OK) means an HTTP response arrived
  long http_status = 0;         // 0 when no response
  std::string retry_after;      // the Retry-After header value, "" when absent
  std::string transport_error;  // curl's message for curl_code != 0 (no secrets in it)
  // A local reason that makes the attempt final whatever curl says, e.g. the SSRF guard's
  // "address 169.254.169.254 refused by SSRF policy: ..." (retrying cannot change the answer) or
  // a request that cannot be built. Empty normally.
  std::string final_error;
};

enum class Verdict { Delivered, Retry, Final, Gone };

struct Classification {
  Verdict verdict;
  std::string reason;  // "HTTP 503", "timeout: ...", ""; for logs, diagnostics and last_error
  std::optional<int64_t> retry_after_ms;  // parsed, clamped Retry-After (Retry only)
};

// Parses a Retry-After value: delta-seconds ("120") or an HTTP-date (IMF-fixdate, RFC 850 or
// asctime). Returns the delay in ms from `now_unix_ms` (0 for dates in the past), clamped to
// `max_ms`; nullopt when the value is empty or unparseable.
// The clamp never exceeds this, whatever `max_ms` says (a due time must not overflow).
inline constexpr int64_t kMaxRetryAfterMs = config::kMaxDurationMs;
std::optional<int64_t> parse_retry_after(std::string_view value, int64_t now_unix_ms,
                                         int64_t max_ms);

Classification classify_attempt(const AttemptResult& result, int64_t now_unix_ms,
                                const config::RetryConfig& retry);

// The exponential cap before the attempt after `attempts_made` failures:
// min(max_backoff_ms, initial_backoff_ms * 2^(attempts_made - 1)), attempts_made >= 1.
int64_t backoff_cap_ms(const config::RetryConfig& retry, int attempts_made);
// Full jitter: uniform in [0, backoff_cap_ms(...)].
int64_t jittered_backoff_ms(const config::RetryConfig& retry, int attempts_made,
                            std::mt19937_64& rng);

// The outcome to record for a delivery after one more attempt (delivery.attempts counts the
// attempts made BEFORE this one). Retry becomes Dead once max_attempts attempts have been made.
// `now_ms` is the schedule clock (schedule_now_ms()): a retry is due at now_ms + the backoff.
struct RetryDecision {
  AttemptOutcome outcome;
  Verdict verdict;             // the classification that led here
  bool exhausted = false;      // Dead because max_attempts was reached
  bool pause_webhook = false;  // 410 Gone
};
RetryDecision decide_outcome(const Delivery& delivery, const Classification& classification,
                             int64_t now_ms, const config::RetryConfig& retry,
                             std::mt19937_64& rng);

}  // namespace hookgate::webhooks
