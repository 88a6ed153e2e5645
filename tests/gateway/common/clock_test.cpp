#include "gateway/common/clock.hpp"

#include <gtest/gtest.h>

#include "gateway/common/metrics.hpp"

namespace hookgate {
namespace {

constexpr int64_t kHour = 3'600'000;
const int64_t kT0 = 1'795'000'000'000;  // 2026-11-19

TEST(ScheduleClockTest, FollowsTheWallClockForwards) {
  ScheduleClock clock;
  EXPECT_EQ(clock.now(kT0), kT0);
  EXPECT_EQ(clock.now(kT0 + 5), kT0 + 5);
  EXPECT_EQ(clock.now(kT0 + kHour), kT0 + kHour);  // a step forward only makes things due sooner
  EXPECT_EQ(clock.skew_ms(), 0);
}

// A wall clock set back by an hour used to hold every pending delivery for that hour.
TEST(ScheduleClockTest, AStepBackCarriesOnFromWhereItWas) {
  auto& steps = metrics::counter("hookgate_clock_steps_back_total", "");
  const uint64_t before = steps.value();
  ScheduleClock clock;
  EXPECT_EQ(clock.now(kT0), kT0);
  EXPECT_EQ(clock.now(kT0 - kHour), kT0);
  EXPECT_EQ(clock.skew_ms(), kHour);
  EXPECT_EQ(clock.now(kT0 - kHour + 250), kT0 + 250);  // runs on at the wall clock's pace
  EXPECT_EQ(steps.value(), before + 1);
}

TEST(ScheduleClockTest, ASmallStepBackHoldsStillInsteadOfAddingSkew) {
  ScheduleClock clock;
  EXPECT_EQ(clock.now(kT0), kT0);
  EXPECT_EQ(clock.now(kT0 - 400), kT0);  // under kStepMs: readers racing, or a small correction
  EXPECT_EQ(clock.skew_ms(), 0);
  EXPECT_EQ(clock.now(kT0 + 10), kT0 + 10);
}

// What a spool recorded before a restart seeds the clock: a wall clock set back while the gateway
// was stopped is a step back too.
TEST(ScheduleClockTest, NotBeforeCountsAWallClockBehindItAsAStepBack) {
  ScheduleClock clock;
  clock.not_before(kT0 + kHour);
  EXPECT_EQ(clock.now(kT0), kT0 + kHour);
  EXPECT_EQ(clock.skew_ms(), kHour);
  ScheduleClock behind;
  behind.not_before(kT0 - kHour);  // the usual case: the file is older than now
  EXPECT_EQ(behind.now(kT0), kT0);
  EXPECT_EQ(behind.skew_ms(), 0);
}

}  // namespace
}  // namespace hookgate
