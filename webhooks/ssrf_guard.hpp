#pragma once
// Which addresses a webhook may connect to (PRODUCT.md "Webhooks", last paragraph).
//
// Refused by default: link-local 169.254.0.0/16 and fe80::/10 (cloud metadata lives at
// 169.254.169.254), 0.0.0.0/8 and :: (they reach the local host on Linux), and the cloud metadata
// addresses outside link-local (AWS's IPv6 fd00:ec2::254, Alibaba's 100.100.100.200). Loopback
// and private ranges are allowed: the SIEM is usually internal.
//
// A webhook's own lists come first, the most specific matching prefix winning (deny on a tie):
// `allow_cidrs` lifts default refusals, `deny_cidrs` refuses more. IPv4-mapped IPv6 addresses
// (::ffff:a.b.c.d) are judged as the IPv4 address they carry, in both addresses and CIDRs.
//
// The dispatcher applies check() to the address each connection actually uses (curl's
// open-socket callback), so DNS answers and rebinding cannot slip past; check_url_literal() is
// the early, config-time check of what can be known from the URL alone.
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::webhooks {

struct IpAddress {
  bool is_v4 = true;
  std::array<uint8_t, 16> bytes{};  // v4 uses the first 4

  // Strict numeric forms only ("10.0.0.1", "fe80::1"); no zone ids, no brackets.
  static std::optional<IpAddress> parse(std::string_view text);
  static std::optional<IpAddress> from_sockaddr(const sockaddr* address);
  // ::ffff:a.b.c.d becomes a.b.c.d; anything else is returned unchanged.
  IpAddress unmapped() const;
  std::string str() const;
};

struct Cidr {
  IpAddress network;
  int prefix_len = 0;

  // "10.0.0.0/8", "fe80::/10", or a bare address (a /32 or /128). Host bits past the prefix are
  // an error: "10.1.2.3/8" is more likely a typo than a wish for 10.0.0.0/8.
  static Result<Cidr> parse(std::string_view text);
  bool contains(const IpAddress& address) const;  // address is unmapped first
  std::string str() const;
};

class AddressPolicy {
 public:
  AddressPolicy();  // the defaults alone
  static Result<AddressPolicy> create(const std::vector<std::string>& allow_cidrs,
                                      const std::vector<std::string>& deny_cidrs);
  static Result<AddressPolicy> for_webhook(const config::WebhookConfig& webhook) {
    return create(webhook.allow_cidrs, webhook.deny_cidrs);
  }

  // Ok, or an error "address 169.254.169.254 refused by SSRF policy: <why>".
  Status check(const IpAddress& address) const;
  Status check(const sockaddr* address) const;
  // For `hookgate check` and config loading: refuses URLs that are not http(s) or lack a host,
  // and URLs whose host is a literal IP address this policy refuses (including the numeric
  // spellings getaddrinfo accepts, like http://2852039166/). Host names pass: they are checked
  // when connecting.
  Status check_url_literal(std::string_view url) const;

  // True when the policy is exactly the defaults (no allow/deny lists): connections opened
  // under it may be shared with any other default-policy webhook.
  bool is_default() const { return allow_.empty() && deny_.empty(); }
  // A canonical text of the lists: equal keys mean equal policies.
  std::string key() const;

 private:
  std::vector<Cidr> allow_;
  std::vector<Cidr> deny_;
};

// The host of an http(s) URL that parses (a port within range, no spaces; brackets and an IPv6
// zone removed), or why no request could use the URL.
Result<std::string> webhook_url_host(std::string_view url);

}  // namespace hookgate::webhooks
