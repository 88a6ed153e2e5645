#include "webhooks/ssrf_guard.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace hookgate::webhooks {
namespace {

IpAddress ip(const char* text) {
  auto address = IpAddress::parse(text);
  EXPECT_TRUE(address.has_value()) << text;
  return address.value_or(IpAddress{});
}

AddressPolicy policy(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  auto created = AddressPolicy::create(allow, deny);
  EXPECT_TRUE(created.ok()) << created.error().message;
  return created.ok() ? created.value() : AddressPolicy();
}

TEST(SsrfGuardTest, ParsesCidrsInBothFamilies) {
  struct Case {
    const char* text;
    const char* canonical;
  };
  const Case kValid[] = {
      {"10.0.0.0/8", "10.0.0.0/8"},
      {"169.254.169.254", "169.254.169.254/32"},
      {"0.0.0.0/0", "0.0.0.0/0"},
      {"fe80::/10", "fe80::/10"},
      {"::1", "::1/128"},
      {"2001:db8::/32", "2001:db8::/32"},
      {"::/0", "::/0"},
      {"::ffff:169.254.0.0/112", "169.254.0.0/16"},
  };
  for (const auto& c : kValid) {
    auto cidr = Cidr::parse(c.text);
    ASSERT_TRUE(cidr.ok()) << c.text << ": " << cidr.error().message;
    EXPECT_EQ(cidr->str(), c.canonical);
  }
  const char* kInvalid[] = {"",           "10.0.0.0/33", "fe80::/129",    "10.0.0.0/",
                            "10.0.0/8",   "10.0.0.0/x",  "example.com/8", "10.1.2.3/8",
                            "fe80::1/10", "10.0.0.0/-1", "[::1]/128"};
  for (const char* text : kInvalid) EXPECT_FALSE(Cidr::parse(text).ok()) << text;
  EXPECT_NE(Cidr::parse("10.1.2.3/8").error().message.find("bits set"), std::string::npos);
}

TEST(SsrfGuardTest, CidrContainment) {
  auto v4 = Cidr::parse("192.168.0.0/23").value();
  EXPECT_TRUE(v4.contains(ip("192.168.1.255")));
  EXPECT_FALSE(v4.contains(ip("192.168.2.0")));
  EXPECT_FALSE(v4.contains(ip("::ffff:192.168.2.0")));
  EXPECT_TRUE(v4.contains(ip("::ffff:192.168.0.7")));  // IPv4-mapped counts as IPv4
  EXPECT_FALSE(v4.contains(ip("fe80::1")));
  auto v6 = Cidr::parse("fe80::/10").value();
  EXPECT_TRUE(v6.contains(ip("febf:ffff::1")));
  EXPECT_FALSE(v6.contains(ip("fec0::1")));
  EXPECT_TRUE(Cidr::parse("0.0.0.0/0").value().contains(ip("8.8.8.8")));
}

struct PolicyCase {
  const char* address;
  bool allowed;
};

TEST(SsrfGuardTest, DefaultPolicyRefusesLinkLocalMetadataAndThisNetwork) {
  const PolicyCase kCases[] = {
      {"169.254.169.254", false},
      {"169.254.0.1", false},
      {"::ffff:169.254.169.254", false},
      {"fe80::1", false},
      {"fe80::a:b:c:d", false},
      {"0.0.0.0", false},
      {"0.1.2.3", false},
      {"::", false},
      {"fd00:ec2::254", false},
      {"fd00:ec2::23", false},        // AWS EKS Pod Identity agent
      {"fd20:ce::254", false},        // Google Cloud metadata
      {"fd00:c1::a9fe:a9fe", false},  // Oracle Cloud metadata
      {"fd20:ce::253", true},
      {"100.100.100.200", false},
      {"168.63.129.16", false},  // Azure WireServer
      {"168.63.129.17", true},
      {"127.0.0.1", true},
      {"::1", true},
      {"10.1.2.3", true},
      {"172.16.0.1", true},
      {"192.168.1.1", true},
      {"fd12:3456::1", true},
      {"93.184.216.34", true},
      {"2606:2800:220:1::1", true},
      {"169.253.255.255", true},
      {"169.255.0.0", true},
      {"::ffff:10.0.0.1", true},
      // NAT64's well-known prefix carries an IPv4 address in its last 32 bits.
      {"64:ff9b::a9fe:a9fe", false},
      {"64:ff9b::0.1.2.3", false},
      {"64:ff9b::1.2.3.4", true},
      {"64:ff9b::6464:64c8", false},
      {"64:ff9b::168.63.129.16", false},
      {"64:ff9b::5db8:d822", true},  // 93.184.216.34
      // So do 6to4 (bits 16-47) and the deprecated IPv4-compatible form (the last 32 bits).
      {"2002:a9fe:a9fe::1", false},
      {"2002:0001:0203::", false},
      {"2002:6464:64c8:1::", false},
      {"2002:a83f:8110::1", false},
      {"2002:5db8:d822::1", true},
      {"::169.254.169.254", false},
      {"::100.100.100.200", false},
      {"::168.63.129.16", false},
      {"::93.184.216.34", true},
      // And SIIT's IPv4-translated form, ::ffff:0:a.b.c.d.
      {"::ffff:0:a9fe:a9fe", false},
      {"::ffff:0:0.1.2.3", false},
      {"::ffff:0:6464:64c8", false},
      {"::ffff:0:a83f:8110", false},
      {"::ffff:0:5db8:d822", true},
  };
  AddressPolicy defaults;
  for (const auto& c : kCases)
    EXPECT_EQ(defaults.check(ip(c.address)).ok(), c.allowed) << c.address;
}

TEST(SsrfGuardTest, RefusalReasonNamesTheAddressAndTheWayOut) {
  auto status = AddressPolicy().check(ip("169.254.169.254"));
  ASSERT_FALSE(status.ok());
  const auto& message = status.error().message;
  EXPECT_EQ(message.rfind("address 169.254.169.254 refused by SSRF policy", 0), 0u) << message;
  EXPECT_NE(message.find("169.254.0.0/16"), std::string::npos);
  EXPECT_NE(message.find("allow_cidrs"), std::string::npos);
}

TEST(SsrfGuardTest, AllowListLiftsDefaultsAndDenyListRefusesMore) {
  auto p = policy({"169.254.169.254/32", "fe80::/10"}, {"10.0.0.0/8", "::1"});
  const PolicyCase kCases[] = {
      {"169.254.169.254", true},
      {"::ffff:169.254.169.254", true},
      {"169.254.1.1", false},
      {"fe80::1", true},
      {"10.9.9.9", false},
      {"::ffff:10.9.9.9", false},
      {"::1", false},
      {"127.0.0.1", true},
      {"192.168.0.1", true},
  };
  for (const auto& c : kCases) EXPECT_EQ(p.check(ip(c.address)).ok(), c.allowed) << c.address;
  auto denied = p.check(ip("10.9.9.9"));
  EXPECT_NE(denied.error().message.find("deny_cidrs (10.0.0.0/8)"), std::string::npos);
}

TEST(SsrfGuardTest, MostSpecificListEntryWinsAndDenyWinsTies) {
  auto p = policy({"10.1.2.3/32", "192.168.0.0/16"}, {"10.0.0.0/8", "192.168.0.0/16"});
  EXPECT_TRUE(p.check(ip("10.1.2.3")).ok());
  EXPECT_FALSE(p.check(ip("10.1.2.4")).ok());
  EXPECT_FALSE(p.check(ip("192.168.3.3")).ok());  // tie: deny
  auto everything = policy({"0.0.0.0/0"}, {});
  EXPECT_TRUE(everything.check(ip("169.254.169.254")).ok());
}

TEST(SsrfGuardTest, CreateRejectsBadCidrsNamingTheList) {
  auto bad = AddressPolicy::create({"10.0.0.0/8"}, {"not-a-cidr"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("deny_cidrs"), std::string::npos);
  EXPECT_FALSE(AddressPolicy::create({"1.2.3.4/40"}, {}).ok());
}

TEST(SsrfGuardTest, ChecksSockaddrsOfBothFamilies) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  inet_pton(AF_INET, "169.254.169.254", &v4.sin_addr);
  EXPECT_FALSE(AddressPolicy().check(reinterpret_cast<sockaddr*>(&v4)).ok());
  inet_pton(AF_INET, "127.0.0.1", &v4.sin_addr);
  EXPECT_TRUE(AddressPolicy().check(reinterpret_cast<sockaddr*>(&v4)).ok());

  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:169.254.169.254", &v6.sin6_addr);
  EXPECT_FALSE(AddressPolicy().check(reinterpret_cast<sockaddr*>(&v6)).ok());
  inet_pton(AF_INET6, "::1", &v6.sin6_addr);
  EXPECT_TRUE(AddressPolicy().check(reinterpret_cast<sockaddr*>(&v6)).ok());

  sockaddr other{};
  other.sa_family = AF_UNIX;
  EXPECT_FALSE(AddressPolicy().check(&other).ok());
}

struct UrlCase {
  const char* url;
  bool allowed;
};

TEST(SsrfGuardTest, UrlLiteralCheck) {
  const UrlCase kCases[] = {
      {"http://169.254.169.254/latest/meta-data", false},
      {"https://169.254.169.254:443/", false},
      {"http://[fe80::1]/", false},
      {"http://[fe80::1%25eth0]:8080/", false},
      {"http://[::ffff:169.254.169.254]/", false},
      {"http://2852039166/", false},           // 169.254.169.254 as one number
      {"http://0xa9.0xfe.0xa9.0xfe/", false},  // ... in hex
      {"http://0.0.0.0:8080/", false},
      {"HTTP://169.254.169.254/", false},
      {"http://user:pw@169.254.169.254/", false},
      {"ftp://example.com/", false},
      {"file:///etc/passwd", false},
      {"gopher://127.0.0.1/", false},
      {"example.com/hook", false},  // no scheme
      {"http://", false},
      {"http://:80/", false},
      {"not a url", false},
      {"https:///path", false},          // found in a config torture pass: host "path"
      {"http://e.com:0/", false},        // port 0
      {"http://e.com:80/a:///b", true},  // three slashes later in the path are fine
      {"http://127.0.0.1:8080/hook", true},
      {"https://siem.example.com/services/collector/event", true},
      {"http://10.0.0.5/", true},
      {"http://[::1]:9000/", true},
      {"HTTPS://Example.COM/", true},
      {"http://metadata.google.internal/", true},  // a name: judged when connecting
  };
  AddressPolicy defaults;
  for (const auto& c : kCases) {
    auto status = defaults.check_url_literal(c.url);
    EXPECT_EQ(status.ok(), c.allowed)
        << c.url << (status.ok() ? "" : ": " + status.error().message);
  }
  auto scheme = defaults.check_url_literal("ftp://example.com/");
  EXPECT_NE(scheme.error().message.find("only http and https"), std::string::npos);
  auto refused = defaults.check_url_literal("http://169.254.169.254/");
  EXPECT_NE(refused.error().message.find("address 169.254.169.254 refused by SSRF policy"),
            std::string::npos);
  EXPECT_TRUE(policy({"169.254.169.254"}, {}).check_url_literal("http://169.254.169.254/").ok());
  EXPECT_FALSE(policy({}, {"127.0.0.0/8"}).check_url_literal("http://127.0.0.1:80/").ok());
  // Found in a security pass: libcurl read the URL up to a NUL, so the rest was cut off unseen.
  auto nul = defaults.check_url_literal(std::string("http://127.0.0.1:80/u") + '\0' + "x");
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(nul.error().message.find("NUL"), std::string::npos) << nul.error().message;
}

TEST(SsrfGuardTest, PolicyKeyIdentifiesEqualPolicies) {
  EXPECT_TRUE(AddressPolicy().is_default());
  EXPECT_FALSE(policy({"10.0.0.0/8"}, {}).is_default());
  EXPECT_EQ(policy({"10.0.0.0/8", "::1"}, {}).key(), policy({"::1", "10.0.0.0/8"}, {}).key());
  EXPECT_NE(policy({"10.0.0.0/8"}, {}).key(), policy({}, {"10.0.0.0/8"}).key());
}

}  // namespace
}  // namespace hookgate::webhooks
