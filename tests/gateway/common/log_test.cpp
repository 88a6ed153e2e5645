#include "gateway/common/log.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "gateway/common/clock.hpp"

namespace hookgate {
namespace {

// Found in review: a hook printing garbage to stderr in a loop logged every line.
TEST(LogLimiterTest, LetsThroughItsRateAndSuppressesTheRest) {
  // Start right after a second boundary, so the 20 calls fall in one second.
  const int64_t second = now_steady_ns() / 1000000000;
  while (now_steady_ns() / 1000000000 == second) std::this_thread::yield();
  LogLimiter limiter(3, "test lines");
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += limiter.allow() ? 1 : 0;
  EXPECT_EQ(allowed, 3);
}

TEST(LogLimiterTest, OnePerNameSharedAcrossCallers) {
  LogLimiter& a = log_limiter_for("log_test a", 5);
  EXPECT_EQ(&a, &log_limiter_for("log_test a", 5));
  EXPECT_NE(&a, &log_limiter_for("log_test b", 5));
}

}  // namespace
}  // namespace hookgate
