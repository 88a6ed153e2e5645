#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace hookgate {

// Wall-clock milliseconds since the Unix epoch: used for persisted schedules (retry times survive
// restarts, so they cannot be steady_clock values).
int64_t now_unix_ms();
// Monotonic nanoseconds, for measuring durations.
int64_t now_steady_ns();
// RFC 3339 UTC with millisecond precision, e.g. 2026-11-21T12:00:00.123Z.
std::string format_rfc3339(int64_t unix_ms);

}  // namespace hookgate
