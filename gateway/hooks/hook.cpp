#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

const char* to_string(HookKind kind) {
  switch (kind) {
    case HookKind::Veto:
      return "veto";
    case HookKind::Transform:
      return "transform";
    case HookKind::Observe:
      return "observe";
  }
  return "unknown";
}

const char* to_string(HookForm form) {
  switch (form) {
    case HookForm::Declarative:
      return "declarative";
    case HookForm::Program:
      return "program";
    case HookForm::OneShot:
      return "oneshot";
    case HookForm::Native:
      return "native";
  }
  return "unknown";
}

std::optional<HookKind> parse_hook_kind(std::string_view text) {
  if (text == "veto") return HookKind::Veto;
  if (text == "transform") return HookKind::Transform;
  if (text == "observe") return HookKind::Observe;
  return std::nullopt;
}

}  // namespace hookgate::hooks
