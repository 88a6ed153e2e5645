#include "webhooks/ssrf_guard.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

#include "gateway/common/text.hpp"

namespace hookgate::webhooks {
namespace {

struct DefaultRefusal {
  const char* cidr;
  const char* why;
};

constexpr DefaultRefusal kDefaultRefusals[] = {
    {"169.254.0.0/16", "link-local (cloud metadata lives at 169.254.169.254)"},
    {"fe80::/10", "IPv6 link-local"},
    {"0.0.0.0/8", "\"this network\" (connects to the local host)"},
    {"::/128", "the unspecified address (connects to the local host)"},
    {"fd00:ec2::254/128", "cloud metadata (AWS IPv6)"},
    {"fd00:ec2::23/128", "cloud credentials (AWS EKS Pod Identity agent, IPv6)"},
    {"fd20:ce::254/128", "cloud metadata (Google Cloud IPv6)"},
    {"fd00:c1::a9fe:a9fe/128", "cloud metadata (Oracle Cloud IPv6)"},
    {"100.100.100.200/32", "cloud metadata (Alibaba Cloud)"},
    {"168.63.129.16/32", "cloud platform endpoint (Azure WireServer)"},
    // The same IPv4 ranges through NAT64's well-known prefix (RFC 6052, 64:ff9b::/96 + IPv4): on
    // an IPv6-only host with DNS64, a name can answer 64:ff9b::a9fe:a9fe for 169.254.169.254.
    {"64:ff9b::a9fe:0/112", "link-local through NAT64 (169.254.0.0/16)"},
    {"64:ff9b::/104", "\"this network\" through NAT64 (0.0.0.0/8)"},
    {"64:ff9b::6464:64c8/128", "cloud metadata through NAT64 (Alibaba Cloud)"},
    {"64:ff9b::a83f:8110/128", "cloud platform endpoint through NAT64 (Azure WireServer)"},
    // And in the other IPv6 forms that carry an IPv4 address: 6to4 (2002::/16, the IPv4 address
    // in bits 16-47, sent through a relay) and the deprecated IPv4-compatible ::a.b.c.d. The
    // latter's "this network" row would be ::/104, which holds ::1, the loopback allowed above.
    {"2002:a9fe::/32", "link-local through 6to4 (169.254.0.0/16)"},
    {"2002::/24", "\"this network\" through 6to4 (0.0.0.0/8)"},
    {"2002:6464:64c8::/48", "cloud metadata through 6to4 (Alibaba Cloud)"},
    {"2002:a83f:8110::/48", "cloud platform endpoint through 6to4 (Azure WireServer)"},
    {"::a9fe:0/112", "link-local as an IPv4-compatible address (169.254.0.0/16)"},
    {"::6464:64c8/128", "cloud metadata as an IPv4-compatible address (Alibaba Cloud)"},
    {"::a83f:8110/128", "cloud platform endpoint as an IPv4-compatible address (Azure WireServer)"},
    // And SIIT's IPv4-translated form (RFC 6145, ::ffff:0:a.b.c.d; found in a security pass).
    {"::ffff:0:a9fe:0/112", "link-local as an IPv4-translated address (169.254.0.0/16)"},
    {"::ffff:0:0:0/104", "\"this network\" as an IPv4-translated address (0.0.0.0/8)"},
    {"::ffff:0:6464:64c8/128", "cloud metadata as an IPv4-translated address (Alibaba Cloud)"},
    {"::ffff:0:a83f:8110/128",
     "cloud platform endpoint as an IPv4-translated address (Azure WireServer)"},
};

struct ParsedDefault {
  Cidr cidr;
  const char* why;
};

const std::vector<ParsedDefault>& default_refusals() {
  static const std::vector<ParsedDefault> parsed = [] {
    std::vector<ParsedDefault> out;
    for (const auto& refusal : kDefaultRefusals)
      out.push_back({Cidr::parse(refusal.cidr).value(), refusal.why});
    return out;
  }();
  return parsed;
}

bool is_mapped_v4(const IpAddress& address) {
  if (address.is_v4) return false;
  for (int i = 0; i < 10; ++i)
    if (address.bytes[i] != 0) return false;
  return address.bytes[10] == 0xff && address.bytes[11] == 0xff;
}

Result<std::vector<Cidr>> parse_all(const std::vector<std::string>& texts, const char* list) {
  std::vector<Cidr> out;
  for (const auto& text : texts) {
    auto cidr = Cidr::parse(text);
    if (!cidr) return make_error(std::string(list) + ": " + cidr.error().message);
    out.push_back(*cidr);
  }
  return out;
}

std::string refused(const IpAddress& address, const std::string& why) {
  return "address " + address.str() + " refused by SSRF policy: " + why;
}

// getaddrinfo() also accepts the old inet_aton() spellings of IPv4 addresses ("2852039166",
// "0xa9.0xfe.0xa9.0xfe", "169.254.43518"); a URL host in one of them is an address, not a name.
std::optional<IpAddress> parse_numeric_host(const std::string& host) {
  if (auto address = IpAddress::parse(host)) return address;
  if (host.empty() || !std::isdigit(static_cast<unsigned char>(host[0]))) return std::nullopt;
  if (!std::all_of(host.begin(), host.end(), [](unsigned char c) {
        return std::isxdigit(c) || c == '.' || c == 'x' || c == 'X';
      }))
    return std::nullopt;
  in_addr v4{};
  if (inet_aton(host.c_str(), &v4) == 0) return std::nullopt;
  IpAddress address;
  std::memcpy(address.bytes.data(), &v4.s_addr, 4);
  return address;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  std::string s(text);
  IpAddress address;
  if (s.find(':') != std::string::npos) {
    address.is_v4 = false;
    if (inet_pton(AF_INET6, s.c_str(), address.bytes.data()) != 1) return std::nullopt;
  } else if (inet_pton(AF_INET, s.c_str(), address.bytes.data()) != 1) {
    return std::nullopt;
  }
  return address;
}

std::optional<IpAddress> IpAddress::from_sockaddr(const sockaddr* address) {
  if (address == nullptr) return std::nullopt;
  IpAddress out;
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    std::memcpy(out.bytes.data(), &v4->sin_addr, 4);
    return out;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    out.is_v4 = false;
    std::memcpy(out.bytes.data(), &v6->sin6_addr, 16);
    return out;
  }
  return std::nullopt;
}

IpAddress IpAddress::unmapped() const {
  if (!is_mapped_v4(*this)) return *this;
  IpAddress v4;
  std::copy(bytes.begin() + 12, bytes.end(), v4.bytes.begin());
  return v4;
}

std::string IpAddress::str() const {
  char buffer[INET6_ADDRSTRLEN] = {};
  inet_ntop(is_v4 ? AF_INET : AF_INET6, bytes.data(), buffer, sizeof buffer);
  return buffer;
}

Result<Cidr> Cidr::parse(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  size_t slash = text.find('/');
  auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) return make_error("invalid CIDR " + quoted + ": not an IP address");
  const int max_len = address->is_v4 ? 32 : 128;
  int prefix_len = max_len;
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
      return make_error("invalid CIDR " + quoted + ": prefix length is not a number");
    prefix_len = std::stoi(std::string(digits));
    if (prefix_len > max_len)
      return make_error("invalid CIDR " + quoted + ": prefix length exceeds " +
                        std::to_string(max_len));
  }
  Cidr cidr{*address, prefix_len};
  // ::ffff:169.254.0.0/112 means 169.254.0.0/16: store it as IPv4 so it matches both forms.
  if (is_mapped_v4(cidr.network) && prefix_len >= 96) {
    cidr.network = cidr.network.unmapped();
    cidr.prefix_len -= 96;
  }
  const int total_bits = cidr.network.is_v4 ? 32 : 128;
  for (int bit = cidr.prefix_len; bit < total_bits; ++bit) {
    if (cidr.network.bytes[bit / 8] & (0x80 >> (bit % 8)))
      return make_error("invalid CIDR " + quoted + ": address has bits set past the /" +
                        std::to_string(prefix_len) + " prefix");
  }
  return cidr;
}

bool Cidr::contains(const IpAddress& address) const {
  IpAddress candidate = address.unmapped();
  if (candidate.is_v4 != network.is_v4) return false;
  int full_bytes = prefix_len / 8;
  if (!std::equal(network.bytes.begin(), network.bytes.begin() + full_bytes,
                  candidate.bytes.begin()))
    return false;
  int rest = prefix_len % 8;
  if (rest == 0) return true;
  auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (network.bytes[full_bytes] & mask) == (candidate.bytes[full_bytes] & mask);
}

std::string Cidr::str() const {
  return network.str() + "/" + std::to_string(prefix_len);
}

AddressPolicy::AddressPolicy() = default;

Result<AddressPolicy> AddressPolicy::create(const std::vector<std::string>& allow_cidrs,
                                            const std::vector<std::string>& deny_cidrs) {
  auto allow = parse_all(allow_cidrs, "allow_cidrs");
  if (!allow) return std::move(allow).error();
  auto deny = parse_all(deny_cidrs, "deny_cidrs");
  if (!deny) return std::move(deny).error();
  AddressPolicy policy;
  policy.allow_ = std::move(allow).value();
  policy.deny_ = std::move(deny).value();
  return policy;
}

Status AddressPolicy::check(const IpAddress& address) const {
  // The webhook's own lists: the most specific match decides, deny winning a tie.
  const Cidr* best_allow = nullptr;
  const Cidr* best_deny = nullptr;
  for (const auto& cidr : allow_)
    if (cidr.contains(address) && (!best_allow || cidr.prefix_len > best_allow->prefix_len))
      best_allow = &cidr;
  for (const auto& cidr : deny_)
    if (cidr.contains(address) && (!best_deny || cidr.prefix_len > best_deny->prefix_len))
      best_deny = &cidr;
  if (best_deny && (!best_allow || best_deny->prefix_len >= best_allow->prefix_len))
    return make_error(refused(address, "in deny_cidrs (" + best_deny->str() + ")"));
  if (best_allow) return {};

  for (const auto& refusal : default_refusals()) {
    if (refusal.cidr.contains(address))
      return make_error(refused(address, std::string(refusal.why) + ", " + refusal.cidr.str() +
                                             "; list it in allow_cidrs to permit it"));
  }
  return {};
}

Status AddressPolicy::check(const sockaddr* address) const {
  auto ip = IpAddress::from_sockaddr(address);
  if (!ip) return make_error("SSRF policy refused a connection: not an IPv4 or IPv6 address");
  return check(*ip);
}

Status AddressPolicy::check_url_literal(std::string_view url) const {
  auto host = webhook_url_host(url);
  if (!host) return std::move(host).error();
  if (auto address = parse_numeric_host(host.value())) return check(*address);
  return {};
}

Result<std::string> webhook_url_host(std::string_view url) {
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  if (!parsed) return make_error("out of memory parsing a URL");
  // libcurl reads a C string: what follows a NUL would be cut off unseen (found in a security
  // pass: a URL with "\u0000" in YAML passed `check` and was sent truncated).
  if (url.find('\0') != std::string_view::npos) return make_error("invalid URL: it has a NUL byte");
  const std::string url_text(url);
  if (CURLUcode rc =
          curl_url_set(parsed.get(), CURLUPART_URL, url_text.c_str(), CURLU_NON_SUPPORT_SCHEME);
      rc != CURLUE_OK)
    return make_error(std::string("invalid URL: ") + curl_url_strerror(rc));

  auto get_part = [&](CURLUPart part) -> std::string {
    char* value = nullptr;
    if (curl_url_get(parsed.get(), part, &value, 0) != CURLUE_OK || value == nullptr) return "";
    std::string out(value);
    curl_free(value);
    return out;
  };
  const std::string scheme = ascii_lower(get_part(CURLUPART_SCHEME));
  if (scheme != "http" && scheme != "https")
    return make_error("URL scheme \"" + scheme + "\" is not allowed: only http and https");
  std::string host = get_part(CURLUPART_HOST);
  if (host.empty()) return make_error("URL has no host");
  // libcurl takes `https:///path` as host "path" and port 0 as "the scheme's": both are typos
  // that `check` passed (found in a config torture pass).
  if (const size_t authority = url.find("://");
      authority != std::string_view::npos && url.substr(authority + 3).starts_with('/'))
    return make_error("URL has no host (three slashes after the scheme)");
  if (get_part(CURLUPART_PORT) == "0") return make_error("URL port 0 is not a port to connect to");
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (size_t zone = host.find('%'); zone != std::string::npos) host.resize(zone);
  return host;
}

std::string AddressPolicy::key() const {
  std::vector<std::string> allow;
  std::vector<std::string> deny;
  for (const auto& cidr : allow_) allow.push_back(cidr.str());
  for (const auto& cidr : deny_) deny.push_back(cidr.str());
  std::sort(allow.begin(), allow.end());
  std::sort(deny.begin(), deny.end());
  std::string out = "allow:";
  for (const auto& text : allow) out += text + ",";
  out += " deny:";
  for (const auto& text : deny) out += text + ",";
  return out;
}

}  // namespace hookgate::webhooks
