#include "webhooks/settings_check.hpp"

#include "webhooks/signing.hpp"
#include "webhooks/ssrf_guard.hpp"

namespace hookgate::webhooks {

config::Diagnostics webhook_settings_problems(const config::WebhookConfig& webhook,
                                              LiteralAddresses literal) {
  config::Diagnostics problems;
  auto add = [&](const config::Position& where, std::string message) {
    problems.push_back({where, std::move(message)});
  };
  // One list at a time, so each error points at the list it is in.
  auto allow = AddressPolicy::create(webhook.allow_cidrs, {});
  if (!allow) add(webhook.allow_cidrs_where, allow.error().message);
  auto deny = AddressPolicy::create({}, webhook.deny_cidrs);
  if (!deny) add(webhook.deny_cidrs_where, deny.error().message);
  if (auto host = webhook_url_host(webhook.url); !host) {
    add(webhook.url_where, host.error().message);
  } else if (literal == LiteralAddresses::Reported && allow && deny) {
    if (auto refused = AddressPolicy::for_webhook(webhook)->check_url_literal(webhook.url);
        !refused)
      add(webhook.url_where, refused.error().message);
  }
  if (auto keys = SigningKeys::make(webhook.secrets); !keys)
    add(webhook.secrets_where, keys.error().message);
  for (size_t i = 0; i < webhook.headers.size(); ++i) {
    const auto& [name, value] = webhook.headers[i];
    if (auto usable = check_custom_header(name, value); !usable)
      add(i < webhook.header_where.size() ? webhook.header_where[i] : webhook.where,
          usable.error().message);
  }
  return problems;
}

}  // namespace hookgate::webhooks
