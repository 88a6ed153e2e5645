#include "webhooks/retry_policy.hpp"

#include <curl/curl.h>
#include <gtest/gtest.h>

namespace hookgate::webhooks {
namespace {

// 2015-10-21T07:28:00Z, the Retry-After example date of RFC 9110.
constexpr int64_t kNowMs = 1445412480000;

config::RetryConfig retry_config() {
  config::RetryConfig retry;
  retry.max_attempts = 5;
  retry.initial_backoff_ms = 100;
  retry.max_backoff_ms = 1000;
  retry.max_retry_after_ms = 60000;
  return retry;
}

struct ClassifyCase {
  const char* name;
  int curl_code;
  long status;
  const char* retry_after;
  Verdict verdict;
  std::optional<int64_t> retry_after_ms;
};

const ClassifyCase kClassifyCases[] = {
    {"200", CURLE_OK, 200, "", Verdict::Delivered, std::nullopt},
    {"204", CURLE_OK, 204, "", Verdict::Delivered, std::nullopt},
    {"299", CURLE_OK, 299, "", Verdict::Delivered, std::nullopt},
    {"301 not followed", CURLE_OK, 301, "", Verdict::Final, std::nullopt},
    {"304", CURLE_OK, 304, "", Verdict::Final, std::nullopt},
    {"400", CURLE_OK, 400, "", Verdict::Final, std::nullopt},
    {"401", CURLE_OK, 401, "", Verdict::Final, std::nullopt},
    {"404", CURLE_OK, 404, "", Verdict::Final, std::nullopt},
    {"404 ignores Retry-After", CURLE_OK, 404, "5", Verdict::Final, std::nullopt},
    {"408", CURLE_OK, 408, "", Verdict::Retry, std::nullopt},
    {"410", CURLE_OK, 410, "", Verdict::Gone, std::nullopt},
    {"413", CURLE_OK, 413, "", Verdict::Final, std::nullopt},
    {"429", CURLE_OK, 429, "", Verdict::Retry, std::nullopt},
    {"429 Retry-After seconds", CURLE_OK, 429, "7", Verdict::Retry, 7000},
    {"503 Retry-After date", CURLE_OK, 503, "Wed, 21 Oct 2015 07:28:30 GMT", Verdict::Retry, 30000},
    {"503 Retry-After clamped", CURLE_OK, 503, "86400", Verdict::Retry, 60000},
    {"503 Retry-After garbage", CURLE_OK, 503, "soon", Verdict::Retry, std::nullopt},
    {"500", CURLE_OK, 500, "", Verdict::Retry, std::nullopt},
    {"599", CURLE_OK, 599, "", Verdict::Retry, std::nullopt},
    {"no status", CURLE_OK, 0, "", Verdict::Retry, std::nullopt},
    {"connection refused", CURLE_COULDNT_CONNECT, 0, "", Verdict::Retry, std::nullopt},
    {"dns", CURLE_COULDNT_RESOLVE_HOST, 0, "", Verdict::Retry, std::nullopt},
    {"timeout", CURLE_OPERATION_TIMEDOUT, 0, "", Verdict::Retry, std::nullopt},
    {"timeout after headers", CURLE_OPERATION_TIMEDOUT, 200, "", Verdict::Retry, std::nullopt},
    {"empty reply", CURLE_GOT_NOTHING, 0, "", Verdict::Retry, std::nullopt},
    {"tls", CURLE_SSL_CONNECT_ERROR, 0, "", Verdict::Retry, std::nullopt},
    // Only http(s) URLs pass the config, so this is libcurl refusing a non-HTTP (0.9) reply.
    {"a reply that is not HTTP", CURLE_UNSUPPORTED_PROTOCOL, 0, "", Verdict::Retry, std::nullopt},
    {"malformed url", CURLE_URL_MALFORMAT, 0, "", Verdict::Final, std::nullopt},
};

// Found in a receivers pass: a 304 was reported as "redirects are not followed".
TEST(RetryPolicyTest, A304IsNotCalledARedirect) {
  AttemptResult result;
  result.http_status = 304;
  EXPECT_EQ(classify_attempt(result, kNowMs, retry_config()).reason.find("redirect"),
            std::string::npos);
  result.http_status = 301;
  EXPECT_NE(classify_attempt(result, kNowMs, retry_config()).reason.find("redirects are not"),
            std::string::npos);
}

class RetryPolicyClassifyTest : public ::testing::TestWithParam<ClassifyCase> {};

TEST_P(RetryPolicyClassifyTest, Classifies) {
  const auto& c = GetParam();
  AttemptResult result;
  result.curl_code = c.curl_code;
  result.http_status = c.status;
  result.retry_after = c.retry_after;
  auto classification = classify_attempt(result, kNowMs, retry_config());
  EXPECT_EQ(classification.verdict, c.verdict);
  EXPECT_EQ(classification.retry_after_ms, c.retry_after_ms);
  if (c.verdict != Verdict::Delivered) {
    EXPECT_FALSE(classification.reason.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Table, RetryPolicyClassifyTest, ::testing::ValuesIn(kClassifyCases),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(RetryPolicyTest, ReasonsNameTheStatusOrTransportError) {
  AttemptResult result;
  result.http_status = 503;
  EXPECT_EQ(classify_attempt(result, kNowMs, retry_config()).reason, "HTTP 503");
  result.http_status = 410;
  EXPECT_EQ(classify_attempt(result, kNowMs, retry_config()).reason,
            "HTTP 410 Gone (the webhook is paused until a reload or a restart)");
  result = {};
  result.curl_code = CURLE_OPERATION_TIMEDOUT;
  result.transport_error = "Operation timed out after 500 milliseconds";
  EXPECT_EQ(classify_attempt(result, kNowMs, retry_config()).reason,
            "timeout: Operation timed out after 500 milliseconds");
}

TEST(RetryPolicyTest, FinalErrorWinsOverTheTransportResult) {
  AttemptResult result;
  result.curl_code = CURLE_COULDNT_CONNECT;
  result.final_error = "address 169.254.169.254 refused by SSRF policy: link-local";
  auto classification = classify_attempt(result, kNowMs, retry_config());
  EXPECT_EQ(classification.verdict, Verdict::Final);
  EXPECT_EQ(classification.reason, result.final_error);
}

struct RetryAfterCase {
  const char* value;
  std::optional<int64_t> expected_ms;
};

TEST(RetryPolicyTest, ParsesRetryAfterForms) {
  const RetryAfterCase kCases[] = {
      {"0", 0},
      {"  12  ", 12000},
      {"Wed, 21 Oct 2015 07:28:10 GMT", 10000},      // IMF-fixdate
      {"Wednesday, 21-Oct-15 07:28:10 GMT", 10000},  // obsolete RFC 850
      {"Wed Oct 21 07:28:10 2015", 10000},           // obsolete asctime
      {"Wed, 21 Oct 2015 07:00:00 GMT", 0},          // in the past
      {"99999999999999999999", 60000},               // clamped, no overflow
      {"0000000000001", 1000},                       // leading zeros: one second
      {"0000000000000", 0},
      {"Fri, 31 Dec 9999 23:59:59 GMT", 60000},        // far future: clamped
      {"Fri, 31 Dec 2147483647 23:59:59 GMT", 60000},  // seconds that overflow as ms
      {"", std::nullopt},
      {"soon", std::nullopt},
      {"-5", std::nullopt},
      {"1.5", std::nullopt},
  };
  for (const auto& c : kCases) {
    EXPECT_EQ(parse_retry_after(c.value, kNowMs, 60000), c.expected_ms) << '"' << c.value << '"';
  }
}

TEST(RetryPolicyTest, BackoffCapDoublesUpToTheMaximum) {
  auto retry = retry_config();  // 100 ms initial, 1000 ms max
  const std::pair<int, int64_t> kCaps[] = {{1, 100},  {2, 200},  {3, 400},   {4, 800},
                                           {5, 1000}, {6, 1000}, {60, 1000}, {1000, 1000}};
  for (const auto& [attempts, cap] : kCaps) EXPECT_EQ(backoff_cap_ms(retry, attempts), cap);
  retry.max_backoff_ms = 3600000;
  retry.initial_backoff_ms = 1000;
  EXPECT_EQ(backoff_cap_ms(retry, 100), 3600000);  // no overflow on many attempts
}

TEST(RetryPolicyTest, FullJitterSpansZeroToCap) {
  auto retry = retry_config();
  std::mt19937_64 rng(42);
  int64_t lowest = INT64_MAX;
  int64_t highest = 0;
  for (int i = 0; i < 2000; ++i) {
    int64_t delay = jittered_backoff_ms(retry, 3, rng);  // cap 400
    ASSERT_GE(delay, 0);
    ASSERT_LE(delay, 400);
    lowest = std::min(lowest, delay);
    highest = std::max(highest, delay);
  }
  // Full jitter, not "equal jitter": the spread reaches both ends of [0, cap].
  EXPECT_LT(lowest, 40);
  EXPECT_GT(highest, 360);
}

Delivery delivery_with_attempts(int attempts) {
  Delivery delivery;
  delivery.id = "msg_1";
  delivery.attempts = attempts;
  return delivery;
}

TEST(RetryPolicyTest, DecisionSchedulesRetriesWithinTheCap) {
  std::mt19937_64 rng(7);
  auto retry = retry_config();
  Classification retryable{Verdict::Retry, "HTTP 500", std::nullopt};
  auto decision = decide_outcome(delivery_with_attempts(1), retryable, kNowMs, retry, rng);
  EXPECT_EQ(decision.outcome.kind, AttemptOutcome::Kind::Retry);
  EXPECT_GE(decision.outcome.next_attempt_ms, kNowMs);
  EXPECT_LE(decision.outcome.next_attempt_ms, kNowMs + 200);  // second failure: cap 200
  EXPECT_EQ(decision.outcome.error, "HTTP 500");
  EXPECT_FALSE(decision.exhausted);
}

TEST(RetryPolicyTest, DecisionHonoursRetryAfter) {
  std::mt19937_64 rng(7);
  Classification throttled{Verdict::Retry, "HTTP 429", 30000};
  auto decision = decide_outcome(delivery_with_attempts(0), throttled, kNowMs, retry_config(), rng);
  EXPECT_EQ(decision.outcome.kind, AttemptOutcome::Kind::Retry);
  EXPECT_EQ(decision.outcome.next_attempt_ms, kNowMs + 30000);
}

// Found in review: `Retry-After: 0` (or a date in the past) made every retry due at once, so a
// throttling endpoint burned all attempts in a second. Retry-After is a lower bound on the
// backoff, never a way around it.
TEST(RetryPolicyTest, ARetryAfterShorterThanTheBackoffDoesNotShortenIt) {
  std::mt19937_64 rng(7);
  Classification now_please{Verdict::Retry, "HTTP 503", 0};
  int64_t total = 0;
  for (int i = 0; i < 200; ++i) {
    auto decision =
        decide_outcome(delivery_with_attempts(3), now_please, kNowMs, retry_config(), rng);
    ASSERT_EQ(decision.outcome.kind, AttemptOutcome::Kind::Retry);
    EXPECT_GE(decision.outcome.next_attempt_ms, kNowMs);
    EXPECT_LE(decision.outcome.next_attempt_ms, kNowMs + 800);  // the cap after 4 failures
    total += decision.outcome.next_attempt_ms - kNowMs;
  }
  EXPECT_GT(total / 200, 200);  // full jitter over 0..800 ms, not 0
}

// A clamp of any size cannot overflow the due time (found in review: INT64_MAX "always honour").
TEST(RetryPolicyTest, AHugeRetryAfterClampStaysInRange) {
  EXPECT_EQ(parse_retry_after("99999999999999", kNowMs, INT64_MAX), kMaxRetryAfterMs);
  EXPECT_EQ(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", kNowMs, INT64_MAX),
            kMaxRetryAfterMs);
  EXPECT_EQ(parse_retry_after("7", kNowMs, INT64_MAX), 7000);
}

TEST(RetryPolicyTest, DecisionIsDeadAfterMaxAttempts) {
  std::mt19937_64 rng(7);
  auto retry = retry_config();  // 5 attempts
  Classification retryable{Verdict::Retry, "HTTP 503", std::nullopt};
  EXPECT_EQ(decide_outcome(delivery_with_attempts(3), retryable, kNowMs, retry, rng).outcome.kind,
            AttemptOutcome::Kind::Retry);
  auto last = decide_outcome(delivery_with_attempts(4), retryable, kNowMs, retry, rng);
  EXPECT_EQ(last.outcome.kind, AttemptOutcome::Kind::Dead);
  EXPECT_TRUE(last.exhausted);
  EXPECT_EQ(last.outcome.error, "attempts exhausted (5/5), last: HTTP 503");

  retry.max_attempts = 1;  // no retries at all
  EXPECT_EQ(decide_outcome(delivery_with_attempts(0), retryable, kNowMs, retry, rng).outcome.kind,
            AttemptOutcome::Kind::Dead);
}

TEST(RetryPolicyTest, DecisionForDeliveredFinalAndGone) {
  std::mt19937_64 rng(7);
  auto retry = retry_config();
  auto delivered = decide_outcome(delivery_with_attempts(2), {Verdict::Delivered, "", std::nullopt},
                                  kNowMs, retry, rng);
  EXPECT_EQ(delivered.outcome.kind, AttemptOutcome::Kind::Delivered);

  auto final_answer = decide_outcome(
      delivery_with_attempts(0), {Verdict::Final, "HTTP 404", std::nullopt}, kNowMs, retry, rng);
  EXPECT_EQ(final_answer.outcome.kind, AttemptOutcome::Kind::Dead);
  EXPECT_EQ(final_answer.outcome.error, "HTTP 404");
  EXPECT_FALSE(final_answer.exhausted);
  EXPECT_FALSE(final_answer.pause_webhook);

  auto gone = decide_outcome(
      delivery_with_attempts(0),
      {Verdict::Gone, "HTTP 410 Gone (the webhook is paused until a reload or a restart)",
       std::nullopt},
      kNowMs, retry, rng);
  EXPECT_EQ(gone.outcome.kind, AttemptOutcome::Kind::Dead);
  EXPECT_TRUE(gone.pause_webhook);
}

}  // namespace
}  // namespace hookgate::webhooks
