#pragma once
// What about a webhook's settings would make every attempt fail the same way, found after the
// config loads: CIDR lists that do not parse, a URL no request can use, secrets that do not
// decode, custom headers that cannot be sent, TLS files that are not the PEM material they name.
// Each problem points at its own key. `hookgate check` reports them all; the dispatcher pauses a
// webhook that has any (`run` keeps going for the others), with all of them as its reason.
#include "config/config.hpp"

namespace hookgate::webhooks {

// A literal address in the URL that the SSRF policy refuses: a problem for `hookgate check`;
// the dispatcher refuses it per attempt instead, as it does an address a name resolves to.
enum class LiteralAddresses { RefusedPerAttempt, Reported };

[[nodiscard]] config::Diagnostics webhook_settings_problems(const config::WebhookConfig& webhook,
                                                            LiteralAddresses literal);

}  // namespace hookgate::webhooks
