#include "gateway/hooks/program_protocol.hpp"

namespace hookgate::hooks {

std::optional<HookKind> kind_from_text(std::string_view text) {
  if (text == "veto") return HookKind::Veto;
  if (text == "transform") return HookKind::Transform;
  if (text == "observe") return HookKind::Observe;
  return std::nullopt;
}

const char* kind_text(HookKind kind) {
  switch (kind) {
    case HookKind::Veto:
      return "veto";
    case HookKind::Transform:
      return "transform";
    case HookKind::Observe:
      return "observe";
  }
  return "observe";
}

std::string excerpt(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  // Back off continuation bytes (10xxxxxx) so a multi-byte character is not split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string_view trim(std::string_view text) {
  const char* ws = " \t\r\n\f\v";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
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

}  // namespace hookgate::hooks
