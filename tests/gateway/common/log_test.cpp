#include "gateway/common/log.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "gateway/common/clock.hpp"
#include "tests/support/log_capture.hpp"

namespace hookgate {
namespace {

// Found in review: `deliveries show` printed a body's ESC and C1 (U+009B, a terminal's CSI)
// bytes as they were; then wrote DEL as \x7f, which is not JSON. Other UTF-8, tabs included,
// stays as it is, and the escapes are JSON's.
TEST(EscapeControlsTest, EscapesC0AndC1ControlsOnly) {
  EXPECT_EQ(escape_controls("plain\ttext \xc2\xa9 caf\xc3\xa9"),
            "plain\ttext \xc2\xa9 caf\xc3\xa9");
  EXPECT_EQ(escape_controls("a\nb\x1b[2J\x7f"), "a\\nb\\u001b[2J\\u007f");
  EXPECT_EQ(escape_controls("csi \xc2\x9b"
                            "31m, nel \xc2\x85"),
            "csi \\u009b31m, nel \\u0085");
  EXPECT_EQ(escape_controls(std::string("nul\0end", 7)), "nul\\u0000end");
  // Not UTF-8 (a lone lead byte, stray bytes): U+FFFD, as the JSON log writes them.
  EXPECT_EQ(escape_controls("cut \xc2"), "cut \xEF\xBF\xBD");
  EXPECT_EQ(escape_controls("hook said \xff\xfe\n"), "hook said \xEF\xBF\xBD\xEF\xBF\xBD\\n");
}

// Found in review: a hook printing garbage to stderr in a loop logged every line.
// "warning" is the name the log prints, so an operator types it: it means warn.
TEST(LogLevelTest, WarningIsWarn) {
  EXPECT_TRUE(is_log_level("warning"));
  EXPECT_TRUE(is_log_level("warn"));
  EXPECT_FALSE(is_log_level("verbose"));
  setup_logging("warning", "text");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::warn);
  setup_logging("info", "text");
}

TEST(LogLimiterTest, LetsThroughItsRateAndSuppressesTheRest) {
  // Start right after a second boundary, so the 20 calls fall in one second.
  const int64_t second = now_steady_ns() / 1000000000;
  while (now_steady_ns() / 1000000000 == second) std::this_thread::yield();
  LogLimiter limiter(3, "test lines");
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += limiter.allow() ? 1 : 0;
  EXPECT_EQ(allowed, 3);
}

// Found in an exploratory run: the count of a burst's last second waited for the next line of its
// kind (19 s later), and without one never came. report_suppressed() says it once the second ends.
TEST(LogLimiterTest, TheSuppressedCountIsReportedWithoutAnotherLine) {
  using namespace std::chrono_literals;
  testing::LogCapture log;
  const int64_t second = now_steady_ns() / 1000000000;
  while (now_steady_ns() / 1000000000 == second) std::this_thread::yield();
  LogLimiter limiter(1, "burst lines");
  for (int i = 0; i < 5; ++i) (void)limiter.allow();  // 1 allowed, 4 suppressed
  LogLimiter::report_suppressed();
  EXPECT_FALSE(log.contains("burst lines: 4 more not logged"));  // the second has not ended
  const int64_t burst = now_steady_ns() / 1000000000;
  while (now_steady_ns() / 1000000000 == burst) std::this_thread::sleep_for(10ms);
  LogLimiter::report_suppressed();
  EXPECT_EQ(log.lines_containing("burst lines: 4 more not logged").size(), 1u);
  LogLimiter::report_suppressed();  // once
  EXPECT_EQ(log.lines_containing("burst lines: 4 more not logged").size(), 1u);
}

// At a stop no later call comes: the final report takes the current second's count too.
TEST(LogLimiterTest, TheFinalReportIncludesTheCurrentSecond) {
  testing::LogCapture log;
  const int64_t second = now_steady_ns() / 1000000000;
  while (now_steady_ns() / 1000000000 == second) std::this_thread::yield();
  LogLimiter limiter(1, "last lines");
  for (int i = 0; i < 3; ++i) (void)limiter.allow();  // 1 allowed, 2 suppressed
  LogLimiter::report_suppressed(/*final=*/true);
  EXPECT_EQ(log.lines_containing("last lines: 2 more not logged").size(), 1u);
}

TEST(LogLimiterTest, OnePerNameSharedAcrossCallers) {
  LogLimiter& a = log_limiter_for("log_test a", 5);
  EXPECT_EQ(&a, &log_limiter_for("log_test a", 5));
  EXPECT_NE(&a, &log_limiter_for("log_test b", 5));
}

}  // namespace
}  // namespace hookgate
