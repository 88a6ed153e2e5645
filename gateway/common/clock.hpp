#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "gateway/common/metrics.hpp"

namespace hookgate {

// Wall-clock milliseconds since the Unix epoch: event times, signature timestamps, HTTP dates.
int64_t now_unix_ms();

// Both clocks from one wall-clock read: for code that needs the wall time (an event's time, a
// Retry-After date) and the schedule time (a due time) of the same moment.
struct ClockReading {
  int64_t wall_ms;
  int64_t schedule_ms;
};

// The clock deliveries are scheduled by (due times, creation and update times in the spool). It is
// the wall clock (persisted schedules survive restarts, so they cannot be steady_clock values),
// except that it never runs backwards: when the wall clock steps back by more than kStepMs (an
// operator or a VM restore correcting a clock that ran ahead), it carries on from where it was,
// kStepMs or more ahead of the wall clock from then on. Otherwise every pending delivery would
// wait out the step. Smaller backward moves (or two threads reading it in the same instant) hold
// it still instead. Thread-safe.
class ScheduleClock {
 public:
  static constexpr int64_t kStepMs = 1000;
  // Registers hookgate_clock_steps_back_total at 0, so an alert on its increase() sees the first.
  ScheduleClock();
  // The wall and schedule times now. The wall clock is read under the lock: a reading taken
  // before a stall and used after another thread moved the clock on would look like a step back.
  ClockReading read();
  // The schedule time for wall-clock reading `wall_ms` (tests).
  int64_t now(int64_t wall_ms);
  // What is already scheduled reaches `ms` (the spool's latest time at start): a wall clock that
  // is behind it counts as a step back.
  void not_before(int64_t ms);
  // How far this clock is ahead of the wall clock (the sum of the steps back it has absorbed).
  int64_t skew_ms() const;

 private:
  int64_t advance_locked(int64_t wall_ms);

  metrics::Counter& steps_back_;
  mutable std::mutex mu_;
  int64_t last_ = INT64_MIN;
  int64_t skew_ = 0;
};

// The process's schedule clock, and its reading now.
ScheduleClock& schedule_clock();
int64_t schedule_now_ms();
ClockReading read_clocks();
// Monotonic nanoseconds, for measuring durations.
int64_t now_steady_ns();
// RFC 3339 UTC with millisecond precision, e.g. 2026-11-21T12:00:00.123Z.
std::string format_rfc3339(int64_t unix_ms);

}  // namespace hookgate
