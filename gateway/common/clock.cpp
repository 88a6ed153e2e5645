#include "gateway/common/clock.hpp"

#include "gateway/common/metrics.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <ctime>

namespace hookgate {

int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

ScheduleClock::ScheduleClock()
    : steps_back_(metrics::counter("hookgate_clock_steps_back_total",
                                   "Times the wall clock went back by more than a second; "
                                   "delivery schedules carried on from where they were")) {}

ClockReading ScheduleClock::read() {
  std::lock_guard lock(mu_);
  const int64_t wall = now_unix_ms();
  return {wall, advance_locked(wall)};
}

int64_t ScheduleClock::now(int64_t wall_ms) {
  std::lock_guard lock(mu_);
  return advance_locked(wall_ms);
}

int64_t ScheduleClock::advance_locked(int64_t wall_ms) {
  int64_t t = wall_ms + skew_;
  if (last_ != INT64_MIN && t < last_ - kStepMs) {
    const int64_t step = last_ - t;
    skew_ += step;
    t = last_;
    steps_back_.inc();
    spdlog::warn(
        "clock: the wall clock went back by {} ms; deliveries stay on schedule (hookgate's "
        "schedule clock is now {} ms ahead of the wall clock)",
        step, skew_);
  } else if (t < last_) {
    t = last_;
  }
  last_ = t;
  return t;
}

void ScheduleClock::not_before(int64_t ms) {
  std::lock_guard lock(mu_);
  if (ms > last_) last_ = ms;
}

int64_t ScheduleClock::skew_ms() const {
  std::lock_guard lock(mu_);
  return skew_;
}

ScheduleClock& schedule_clock() {
  static ScheduleClock clock;
  return clock;
}

int64_t schedule_now_ms() {
  return schedule_clock().read().schedule_ms;
}

ClockReading read_clocks() {
  return schedule_clock().read();
}

int64_t now_steady_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string format_rfc3339(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

}  // namespace hookgate
