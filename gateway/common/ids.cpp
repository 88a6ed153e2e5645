#include "gateway/common/ids.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>

#include "gateway/common/clock.hpp"
#include "gateway/common/text.hpp"

namespace hookgate {
namespace {

// Monotonic within a process: the 12-bit rand_a field carries a counter for ids minted in the same
// millisecond (RFC 9562 method 1), so ids from one gateway are strictly ordered.
struct V7State {
  std::mutex mu;
  int64_t last_ms = 0;
  uint16_t seq = 0;
  std::mt19937_64 rng{std::random_device{}()};
};

V7State& state() {
  static V7State s;
  return s;
}

std::array<uint8_t, 16> v7_bytes() {
  auto& s = state();
  int64_t ms = now_unix_ms();
  uint16_t seq;
  uint64_t rand_b;
  {
    std::lock_guard lock(s.mu);
    if (ms <= s.last_ms) {
      ms = s.last_ms;
      if (++s.seq > 0x0fff) {  // counter exhausted: borrow the next millisecond
        ms = ++s.last_ms;
        s.seq = 0;
      }
    } else {
      s.last_ms = ms;
      s.seq = static_cast<uint16_t>(s.rng() & 0x01ff);  // random start leaves headroom
    }
    seq = s.seq;
    rand_b = s.rng();
  }
  std::array<uint8_t, 16> b{};
  for (int i = 0; i < 6; ++i) b[i] = static_cast<uint8_t>(ms >> (40 - 8 * i));
  b[6] = static_cast<uint8_t>(0x70 | ((seq >> 8) & 0x0f));
  b[7] = static_cast<uint8_t>(seq & 0xff);
  for (int i = 8; i < 16; ++i) b[i] = static_cast<uint8_t>(rand_b >> (8 * (i - 8)));
  b[8] = static_cast<uint8_t>(0x80 | (b[8] & 0x3f));
  return b;
}

}  // namespace

std::string new_uuid_v7() {
  static constexpr char hex[] = "0123456789abcdef";
  auto b = v7_bytes();
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(hex[b[i] >> 4]);
    out.push_back(hex[b[i] & 0xf]);
  }
  return out;
}

std::string new_delivery_id() {
  const auto b = v7_bytes();
  std::string out = "msg_";
  out.reserve(4 + 2 * b.size());  // one allocation: this runs for every delivery
  append_hex(out, std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
  return out;
}

}  // namespace hookgate
