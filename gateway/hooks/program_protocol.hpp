#pragma once
// Small helpers shared by the program, one-shot and native hook forms: kind names, bounded
// excerpts of peer text for failure reasons, and the check every replaced event must pass.
#include <optional>
#include <string>
#include <string_view>

#include "gateway/event.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// "veto" | "transform" | "observe".
std::optional<HookKind> kind_from_text(std::string_view text);
const char* kind_text(HookKind kind);

// At most `max` bytes of `text` (cut on a UTF-8 boundary, "..." appended when cut), for reasons
// that quote what a hook sent.
std::string excerpt(std::string_view text, size_t max = 200);

std::string_view trim(std::string_view text);

// A replacement must be a JSON object with a non-empty string "type". Returns the event, or
// the problem in a few words.
Result<Event, std::string> replacement_event(const JsonValue& value);
Result<Event, std::string> replacement_event(std::string_view json);

}  // namespace hookgate::hooks
