// The program-hook protocol reader: handshake lines and answer lines as a co-process might print
// them, garbage included. Failures are fine; crashes and verdicts without a valid event are not.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/hooks/program_protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  std::string_view line(reinterpret_cast<const char*>(data), size);
  (void)hookgate::hooks::parse_handshake(line, true);
  (void)hookgate::hooks::parse_handshake(line, false);
  auto answer =
      hookgate::hooks::interpret_answer(line, 7, "fuzz", hookgate::hooks::HookKind::Transform);
  if (answer && answer->ok()) {
    const auto& v = answer->value();
    if (v.action == hookgate::hooks::Action::Replace &&
        (!v.replacement || v.replacement->type().empty()))
      __builtin_trap();
  }
  return 0;
}
