#pragma once
// Turns a final event into deliveries: one per webhook whose patterns match its type. Each body
// is serialized once per event and shared by every delivery that uses that body mode.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "gateway/event.hpp"
#include "gateway/pattern.hpp"
#include "webhooks/delivery.hpp"

namespace hookgate {

class Router {
 public:
  explicit Router(const std::vector<config::WebhookConfig>& webhooks);

  // Appends the deliveries for `event` to `out`, created and due at `schedule_ms` (the schedule
  // clock, gateway/common/clock.hpp); returns how many were appended.
  // `except_webhook` is left out: a delivery diagnostic is not sent to the webhook whose
  // delivery failed (it would queue behind the very failure it reports, once per attempt).
  size_t route(const Event& event, int64_t schedule_ms, std::vector<webhooks::Delivery>& out,
               std::string_view except_webhook = {}) const;
  // Names of the webhooks an event of `type` would reach (for `hooks test`).
  std::vector<std::string> matching(std::string_view type) const;
  bool empty() const { return routes_.empty(); }
  bool has_webhook(std::string_view name) const;

 private:
  struct Route {
    PatternSet patterns;
    config::WebhookConfig webhook;
  };
  std::vector<Route> routes_;
};

}  // namespace hookgate
