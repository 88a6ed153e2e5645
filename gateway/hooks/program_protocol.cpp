#include "gateway/hooks/program_protocol.hpp"

#include <spdlog/spdlog.h>

#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::hooks {

std::string garbage_reason(std::string_view hook_name, std::string_view what,
                           std::string_view output, std::string_view kind) {
  spdlog::debug("hook {}: the garbage {} was: {}", hook_name, kind, excerpt(output));
  return "garbage " + std::string(kind) + ": " + std::string(what) + " (" +
         std::to_string(output.size()) + " bytes; the debug log quotes them)";
}

namespace {

std::optional<std::string> replacement_problem(const JsonValue& value) {
  if (!value.IsObject()) return std::string("replacement event is not a JSON object");
  auto type = value.FindMember("type");
  if (type == value.MemberEnd() || !type->value.IsString() || type->value.GetStringLength() == 0) {
    return std::string("replacement event has no non-empty string \"type\"");
  }
  return std::nullopt;
}

}  // namespace

Result<Event, std::string> replacement_event(const JsonValue& value) {
  if (auto problem = replacement_problem(value)) return *problem;
  Event ev;
  ev.doc().CopyFrom(value, ev.allocator());
  return ev;
}

Result<Event, std::string> replacement_event(std::string_view json) {
  auto parsed = Event::parse(json);
  if (!parsed) return parsed.error().message;
  if (auto problem = replacement_problem(parsed->doc())) return *problem;
  return std::move(parsed).value();
}

Result<Handshake, std::string> parse_handshake(std::string_view line, bool need_kind,
                                               bool use_events) {
  const std::string want = R"(want {"hookgate":1,"kind":"veto|transform|observe","events":[...]})";
  // Event::parse: strict and iterative, so a hostile line cannot exhaust the stack.
  auto parsed = Event::parse(line);
  if (!parsed) return "invalid handshake line (" + want + "): " + excerpt(line);
  const JsonDocument& doc = parsed->doc();
  auto version = doc.FindMember("hookgate");
  if (version == doc.MemberEnd()) return "handshake has no \"hookgate\" version (" + want + ")";
  if (!version->value.IsInt() || version->value.GetInt() != 1) {
    return "handshake speaks protocol version " + to_json(version->value) +
           " (this gateway speaks 1)";
  }
  Handshake hs;
  auto events = use_events ? doc.FindMember("events") : doc.MemberEnd();
  if (events != doc.MemberEnd()) {
    if (!events->value.IsArray() || events->value.Empty()) {
      return std::string("handshake \"events\" must be a non-empty array of patterns");
    }
    hs.events.clear();
    for (const auto& e : events->value.GetArray()) {
      if (!e.IsString() || e.GetStringLength() == 0) {
        return std::string("handshake \"events\" must hold non-empty strings");
      }
      hs.events.emplace_back(e.GetString(), e.GetStringLength());
    }
  }
  if (!need_kind) return hs;  // a YAML descriptor sets the kind
  auto kind = doc.FindMember("kind");
  if (kind == doc.MemberEnd()) {
    return std::string(
        "handshake names no kind: print {\"hookgate\":1,\"kind\":\"veto|transform|observe\"} or "
        "set kind in a YAML descriptor");
  }
  if (!kind->value.IsString() || !(hs.kind = parse_hook_kind(kind->value.GetString()))) {
    return "handshake kind " + to_json(kind->value) + " is not veto, transform or observe";
  }
  return hs;
}

std::optional<HookResult> interpret_answer(std::string_view line, uint64_t id,
                                           const std::string& hook_name, HookKind kind) {
  auto garbage = [&](std::string_view what) {
    return HookResult(HookFailure{HookFailure::Kind::Error, garbage_reason(hook_name, what, line)});
  };
  // The event rules for the whole line (strict UTF-8, iterative parse, no infinities or lone
  // surrogates, bounded depth with one level for the answer around "event"): a replacement that
  // passes can always be written back as the webhook body.
  // Said of the line: it is the answer, not an event, that may not be an object.
  auto parsed = Event::parse(line, 1, "the answer line");
  if (!parsed) return garbage(parsed.error().message);
  const JsonDocument& doc = parsed->doc();
  auto id_it = doc.FindMember("id");
  if (id_it == doc.MemberEnd() || !id_it->value.IsUint64())
    return garbage("no unsigned integer \"id\"");
  if (id_it->value.GetUint64() != id) {
    // Rate-limited: a hook stuck repeating an old answer must not flood the log.
    if (log_limiter_for("hook " + std::string(hook_name) + " stale answers", 20).allow())
      spdlog::warn("hook {}: discarding answer for id {} (waiting for {})", hook_name,
                   id_it->value.GetUint64(), id);
    return std::nullopt;
  }
  auto action = doc.FindMember("action");
  if (action == doc.MemberEnd() || !action->value.IsString())
    return garbage("no string \"action\"");
  std::string_view a(action->value.GetString(), action->value.GetStringLength());
  HookVerdict v;
  if (a == "continue") {
    v.action = Action::Continue;
  } else if (a == "skip") {
    v.action = Action::Skip;
  } else if (a == "veto") {
    v.action = Action::Veto;
    auto reason = doc.FindMember("reason");
    if (reason != doc.MemberEnd() && reason->value.IsString() &&
        reason->value.GetStringLength() > 0) {
      v.reason.assign(reason->value.GetString(), reason->value.GetStringLength());
    } else {
      v.reason = "vetoed by hook " + hook_name;
    }
  } else if (a == "replace") {
    if (kind == HookKind::Veto) return HookResult(ignored_replacement());
    auto ev = doc.FindMember("event");
    if (ev == doc.MemberEnd()) return garbage("replace without an event");
    auto replacement = replacement_event(ev->value);
    if (!replacement) return garbage(replacement.error());
    v.action = Action::Replace;
    v.replacement = std::move(replacement).value();
  } else {
    return garbage("unknown action (want continue, skip, veto or replace)");
  }
  return HookResult(std::move(v));
}

}  // namespace hookgate::hooks
