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
  // Each secret at its own item: a rotation list's second one may be the mistyped one.
  for (size_t i = 0; i < webhook.secrets.size(); ++i)
    if (auto key = standard_webhooks_key(webhook.secrets[i]); !key)
      add(i < webhook.secret_where.size() ? webhook.secret_where[i] : webhook.secrets_where,
          key.error().message);
  for (size_t i = 0; i < webhook.headers.size(); ++i) {
    const auto& [name, value] = webhook.headers[i];
    if (auto usable = check_custom_header(name, value); !usable)
      add(i < webhook.header_where.size() ? webhook.header_where[i] : webhook.where,
          usable.error().message);
  }
  return problems;
}

}  // namespace hookgate::webhooks
