#include "webhooks/retry_policy.hpp"
#include "gateway/common/text.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace hookgate::webhooks {
namespace {

// curl results that no retry can fix: the request itself is unusable. Not
// CURLE_UNSUPPORTED_PROTOCOL: the config admits only http:// and https:// URLs, so at run time it
// means a reply that is not HTTP (libcurl's "HTTP/0.9"), which the built-in client reports as a
// weird reply and retries: a port answering garbage for a moment (a rotating load balancer).
bool is_permanent_transport_error(int curl_code) {
  switch (curl_code) {
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_BAD_FUNCTION_ARGUMENT:
      return true;
    default:
      return false;
  }
}

std::string transport_reason(const AttemptResult& result) {
  std::string detail =
      result.transport_error.empty()
          ? std::string(curl_easy_strerror(static_cast<CURLcode>(result.curl_code)))
          : result.transport_error;
  if (result.curl_code == CURLE_OPERATION_TIMEDOUT) return "timeout: " + detail;
  return "transport error: " + detail;
}

}  // namespace

std::optional<int64_t> parse_retry_after(std::string_view value, int64_t now_unix_ms,
                                         int64_t max_ms) {
  std::string text(trim(value));
  if (text.empty()) return std::nullopt;
  max_ms = std::clamp<int64_t>(max_ms, 0, kMaxRetryAfterMs);
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // Delta-seconds; anything longer than the clamp needs no exact value (and may overflow).
    // Leading zeros say nothing: "0000000000001" is one second.
    text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
    if (text.size() > 12) return max_ms;
    int64_t seconds = std::stoll(text);
    return std::min(seconds * 1000, max_ms);
  }
  // Every HTTP-date form names its month in letters; requiring one keeps curl_getdate()'s
  // leniency from reading "-5" or "1.5" as some date. It parses all three RFC 9110 forms.
  if (std::none_of(text.begin(), text.end(), [](unsigned char c) { return std::isalpha(c); }))
    return std::nullopt;
  time_t when = curl_getdate(text.c_str(), nullptr);
  if (when == static_cast<time_t>(-1)) return std::nullopt;
  // Compare in seconds first: a date centuries away would overflow once turned into ms.
  const int64_t when_s = static_cast<int64_t>(when);
  if (when_s > (now_unix_ms + max_ms) / 1000 + 1) return max_ms;
  if (when_s < now_unix_ms / 1000 - 1) return 0;
  return std::clamp<int64_t>(when_s * 1000 - now_unix_ms, 0, max_ms);
}

Classification classify_attempt(const AttemptResult& result, int64_t now_unix_ms,
                                const config::RetryConfig& retry) {
  if (!result.final_error.empty()) return {Verdict::Final, result.final_error, std::nullopt};
  if (result.curl_code != CURLE_OK) {
    return {is_permanent_transport_error(result.curl_code) ? Verdict::Final : Verdict::Retry,
            transport_reason(result), std::nullopt};
  }
  const long status = result.http_status;
  const std::string status_text = "HTTP " + std::to_string(status);
  if (status >= 200 && status < 300) return {Verdict::Delivered, "", std::nullopt};
  // Said in the reason too: a hookgate.delivery.dead subscriber sees the pause, not only a loss.
  if (status == 410)
    return {Verdict::Gone,
            status_text + " Gone (the webhook is paused until a reload or a restart)",
            std::nullopt};
  if (status == 408 || status == 429 || (status >= 500 && status < 600)) {
    return {Verdict::Retry, status_text,
            parse_retry_after(result.retry_after, now_unix_ms, retry.max_retry_after_ms)};
  }
  if (status >= 300 && status < 500) {
    std::string reason = status_text;
    // 304 is no redirect (found in a receivers pass), but it is no success for a POST either.
    if (status < 400)
      reason += status == 304 ? " (not a 2xx: final)" : " (redirects are not followed)";
    return {Verdict::Final, reason, std::nullopt};
  }
  // No status, 1xx as final answer, or beyond 599: the peer is not speaking HTTP properly; this
  // may be transient (a proxy or a restarting server), so try again.
  return {Verdict::Retry, status == 0 ? "no HTTP status in the response" : status_text,
          std::nullopt};
}

int64_t backoff_cap_ms(const config::RetryConfig& retry, int attempts_made) {
  const int64_t max_backoff = std::max<int64_t>(retry.max_backoff_ms, 0);
  int64_t cap = std::clamp<int64_t>(retry.initial_backoff_ms, 0, max_backoff);
  for (int i = 1; i < attempts_made && cap < max_backoff; ++i) {
    cap = cap > max_backoff / 2 ? max_backoff : cap * 2;
  }
  return cap;
}

int64_t jittered_backoff_ms(const config::RetryConfig& retry, int attempts_made,
                            std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> uniform(0, backoff_cap_ms(retry, attempts_made));
  return uniform(rng);
}

RetryDecision decide_outcome(const Delivery& delivery, const Classification& classification,
                             int64_t now_ms, const config::RetryConfig& retry,
                             std::mt19937_64& rng) {
  using Kind = AttemptOutcome::Kind;
  RetryDecision decision{{Kind::Dead, 0, classification.reason}, classification.verdict};
  const int attempts_made = delivery.attempts + 1;
  switch (classification.verdict) {
    case Verdict::Delivered:
      decision.outcome = {Kind::Delivered, 0, ""};
      break;
    case Verdict::Gone:
      decision.pause_webhook = true;
      break;
    case Verdict::Final:
      break;
    case Verdict::Retry:
      if (attempts_made >= std::max(retry.max_attempts, 1)) {
        decision.exhausted = true;
        decision.outcome.error = "attempts exhausted (" + std::to_string(attempts_made) + "/" +
                                 std::to_string(std::max(retry.max_attempts, 1)) +
                                 "), last: " + classification.reason;
      } else {
        // Retry-After is a lower bound: it may lengthen the backoff, never shorten it (a
        // `Retry-After: 0` would otherwise burn every attempt within a second).
        const int64_t delay = std::max(classification.retry_after_ms.value_or(0),
                                       jittered_backoff_ms(retry, attempts_made, rng));
        decision.outcome = {Kind::Retry, now_ms + delay, classification.reason};
      }
      break;
  }
  return decision;
}

}  // namespace hookgate::webhooks
