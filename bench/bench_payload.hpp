#pragma once
// Shared by hookgate-bench-load and hookgate-bench-sub-ceiling: the benchmark event payload, the
// clock `sent_ns` is taken from, and a pacing loop. Both programs send byte-for-byte the same kind
// of message, so the raw SUB ceiling and the gateway runs are comparable.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace hookgate::bench {

// CLOCK_MONOTONIC is system-wide on Linux: the load generator and the sink (separate processes on
// the same machine) read the same clock. Override with BENCH_CLOCK=realtime if needed; the sink
// must use the same setting (bench/run passes it to both).
inline clockid_t bench_clock() {
  const char* c = std::getenv("BENCH_CLOCK");
  return (c && std::strcmp(c, "realtime") == 0) ? CLOCK_REALTIME : CLOCK_MONOTONIC;
}

inline int64_t now_ns(clockid_t clk) {
  timespec ts{};
  clock_gettime(clk, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// The published envelope (after the Publisher fills specversion, id, source, time and
// datacontenttype) is ~400 bytes: realistic auth-failure fields, a sequence number, the send
// timestamp, and padding toward the target size. The fixed fields alone overshoot it a little:
// the envelope comes out at 425 bytes for `auth.failure` (hookgate-bench-load reports the size it
// measured, and bench/run prints it in the report).
inline constexpr size_t kEnvelopeTarget = 400;
// What the Publisher adds around `data` for a type of `type_len` characters (measured with
// Event::to_json on a normalized event: {"type":"…","source":"unknown","specversion":"1.0",
// "id":"<uuid>","time":"2024-01-01T00:00:00.000Z","datacontenttype":"application/json","data":…}).
inline size_t envelope_overhead(size_t type_len) {
  return 160 + type_len;
}

class PayloadBuilder {
 public:
  explicit PayloadBuilder(std::string_view type) {
    // (JSON numbers cannot be zero-padded: sizes vary by the digits of seq, a few bytes at most.)
    size_t base = std::snprintf(nullptr, 0, kFormat, 100000ULL, 1000000000000000LL, "");
    size_t want = kEnvelopeTarget > envelope_overhead(type.size()) + base
                      ? kEnvelopeTarget - envelope_overhead(type.size()) - base
                      : 0;
    pad_.assign(want, 'x');
    buf_.resize(base + want + 64);
  }
  // The data JSON for message `seq`, stamped with `sent_ns`.
  std::string_view build(uint64_t seq, int64_t sent_ns) {
    int n = std::snprintf(buf_.data(), buf_.size(), kFormat, static_cast<unsigned long long>(seq),
                          static_cast<long long>(sent_ns), pad_.c_str());
    return {buf_.data(), static_cast<size_t>(n)};
  }

 private:
  static constexpr const char* kFormat =
      "{\"user\":\"alice.smith@example.com\",\"ip\":\"203.0.113.42\",\"reason\":\"invalid_"
      "password\","
      "\"user_agent\":\"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
      "Chrome/124.0 Safari/537.36\",\"seq\":%llu,\"sent_ns\":%lld,\"pad\":\"%s\"}";
  std::string pad_;
  std::string buf_;
};

}  // namespace hookgate::bench
