#include "gateway/router.hpp"

#include "gateway/common/ids.hpp"

namespace hookgate {

Router::Router(const std::vector<config::WebhookConfig>& webhooks) {
  for (const auto& w : webhooks) routes_.push_back({w.name, PatternSet(w.events), w.body});
}

size_t Router::route(const Event& event, int64_t now_unix_ms, std::vector<webhooks::Delivery>& out) const {
  std::string_view type = event.type();
  std::shared_ptr<const std::string> cloudevent_body, data_body;
  size_t added = 0;
  for (const auto& r : routes_) {
    if (!r.patterns.matches(type)) continue;
    auto& body = r.body == config::BodyMode::Data ? data_body : cloudevent_body;
    if (!body) {
      body = std::make_shared<const std::string>(r.body == config::BodyMode::Data ? event.data_json()
                                                                                  : event.to_json());
    }
    webhooks::Delivery d;
    d.id = new_delivery_id();
    d.webhook = r.webhook;
    d.event_id = std::string(event.id());
    d.event_type = std::string(type);
    d.body = body;
    d.created_ms = now_unix_ms;
    d.next_attempt_ms = now_unix_ms;
    out.push_back(std::move(d));
    ++added;
  }
  return added;
}

std::vector<std::string> Router::matching(std::string_view type) const {
  std::vector<std::string> names;
  for (const auto& r : routes_)
    if (r.patterns.matches(type)) names.push_back(r.webhook);
  return names;
}

}  // namespace hookgate
