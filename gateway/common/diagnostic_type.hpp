#pragma once
// The event-type prefix of the gateway's own diagnostic events (PRODUCT.md "Diagnostic events").
// It is reserved: the bus rejects it and no hook may give an event such a type, so a receiver can
// trust that a hookgate.* event came from the gateway, and the no-loop rule (deliveries of
// diagnostics raise no diagnostics) never swallows a publisher's failures.
#include <string_view>

namespace hookgate {

inline constexpr std::string_view kDiagnosticTypePrefix = "hookgate.";

inline bool is_diagnostic_type(std::string_view type) {
  return type.substr(0, kDiagnosticTypePrefix.size()) == kDiagnosticTypePrefix;
}

// The reason a bus message or a hook's edit is refused such a type.
inline constexpr const char* kReservedTypeReason =
    "event types starting with \"hookgate.\" are reserved for the gateway's own diagnostic events";

}  // namespace hookgate
