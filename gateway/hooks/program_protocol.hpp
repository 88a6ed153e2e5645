#pragma once
// Small helpers shared by the program, one-shot and native hook forms: bounded
// excerpts of peer text for failure reasons, and the check every replaced event must pass.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/common/text.hpp"
#include "gateway/event.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// "garbage answer: <what> (N bytes ...)" for output a hook got wrong. The output itself is quoted
// only in a debug log record: it may hold the unredacted event the hook was given, and reasons
// reach warn logs and webhooks (hookgate.hook.failed).
std::string garbage_reason(std::string_view hook_name, std::string_view what,
                           std::string_view output, std::string_view kind = "answer");

// A replacement must be a JSON object with a non-empty string "type". Returns the event, or
// the problem in a few words.
Result<Event, std::string> replacement_event(const JsonValue& value);
Result<Event, std::string> replacement_event(std::string_view json);

// The program-hook protocol (docs/hooks.md). The first line a co-process prints:
struct Handshake {
  std::optional<HookKind> kind;
  std::vector<std::string> events{"*"};
};
// Parses the handshake; with `need_kind` false (a YAML descriptor sets the kind) a missing kind is
// no error (the descriptor's wins), and with `use_events` false (it sets the events too) the
// handshake's events are not read at all.
Result<Handshake, std::string> parse_handshake(std::string_view line, bool need_kind,
                                               bool use_events = true);

// Interprets one answer line to request `id`: a verdict, a failure (garbage is a failure; the
// process stays), or nullopt for an answer to another id (logged and discarded). A veto hook's
// replace is not looked into: the chain ignores it, valid or not.
std::optional<HookResult> interpret_answer(std::string_view line, uint64_t id,
                                           const std::string& hook_name, HookKind kind);

}  // namespace hookgate::hooks
