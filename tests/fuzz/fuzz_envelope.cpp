// Bus messages as the gateway receives them: 1..3 frames split at NUL bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bus/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<zmq::message_t> frames;
  while (frames.size() < 3) {
    auto nul = in.find('\0');
    std::string_view part = in.substr(0, nul);
    frames.emplace_back(part.data(), part.size());
    if (nul == std::string_view::npos) break;
    in.remove_prefix(nul + 1);
  }
  auto ev = hookgate::bus::decode_message(frames, 1 << 20, 1700000000000);
  if (ev) {
    // What was accepted must serialize to valid JSON that parses back to the same event (numbers
    // may be re-rounded in the last digit: see kParseFlags in gateway/event.cpp).
    std::string json = ev->to_json();
    auto again = hookgate::Event::parse(json);
    if (!again || again->type() != ev->type() || again->id() != ev->id()) __builtin_trap();
    std::vector<zmq::message_t> out;
    hookgate::bus::encode_message(*ev, out);
  }
  return 0;
}
