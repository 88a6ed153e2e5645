#pragma once
// The gateway's own events (PRODUCT.md "Diagnostic events"). They are routed to webhooks but never
// run through the hook chain, and deliveries of them never raise further diagnostics.
#include <functional>
#include <string>

#include "gateway/event.hpp"

namespace hookgate {

namespace diag {
inline constexpr const char* kEventRejected = "hookgate.event.rejected";
inline constexpr const char* kEventVetoed = "hookgate.event.vetoed";
inline constexpr const char* kHookFailed = "hookgate.hook.failed";
inline constexpr const char* kHookTimeout = "hookgate.hook.timeout";
inline constexpr const char* kHooksReloaded = "hookgate.hooks.reloaded";
inline constexpr const char* kDeliveryFailed = "hookgate.delivery.failed";
inline constexpr const char* kDeliveryDead = "hookgate.delivery.dead";
inline constexpr const char* kAllTypes[] = {kEventRejected, kEventVetoed,   kHookFailed,
                                            kHookTimeout,   kHooksReloaded, kDeliveryFailed,
                                            kDeliveryDead};
}  // namespace diag

struct DiagnosticEvent {
  std::string type;      // one of diag::k*
  std::string hook;      // set for hook diagnostics
  std::string webhook;   // set for delivery diagnostics
  std::string event_id;  // the triggering event, when known
  std::string event_type;
  std::string reason;       // never contains secrets
  std::string delivery_id;  // for delivery diagnostics
  int attempts = 0;
};

// Thread-safe sink; the pipeline implements it by routing the event to subscribed webhooks.
using DiagnosticSink = std::function<void(DiagnosticEvent)>;

// {"specversion":"1.0","type":..., "source":"hookgate", "data":{hook|webhook, event_id,...}}
Event make_diagnostic_event(const DiagnosticEvent& d, int64_t now_unix_ms);

}  // namespace hookgate
