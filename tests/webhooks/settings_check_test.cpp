#include "webhooks/settings_check.hpp"

#include <gtest/gtest.h>

#include "tests/support/gateway_process.hpp"
#include "tests/support/tls_receiver.hpp"

namespace hookgate::webhooks {
namespace {

config::Position at(int line) {
  return {"hookgate.yaml", line, 5};
}

config::WebhookConfig usable_webhook() {
  config::WebhookConfig webhook;
  webhook.name = "w";
  webhook.url = "http://127.0.0.1:9/";
  webhook.where = at(1);
  webhook.url_where = at(2);
  webhook.secrets_where = at(3);
  webhook.allow_cidrs_where = at(4);
  webhook.deny_cidrs_where = at(5);
  return webhook;
}

TEST(SettingsCheckTest, AUsableWebhookHasNoProblems) {
  auto webhook = usable_webhook();
  webhook.secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
  webhook.headers = {{"Authorization", "Bearer t"}};
  webhook.header_where = {at(6)};
  EXPECT_TRUE(webhook_settings_problems(webhook, LiteralAddresses::Reported).empty());
}

// Every problem, each at its own key: an operator fixes them in one pass, not one per check.
TEST(SettingsCheckTest, ReportsEveryProblemAtItsKey) {
  auto webhook = usable_webhook();
  webhook.url = "http://127.0.0.1:99999/";
  webhook.allow_cidrs = {"garbage"};
  webhook.deny_cidrs = {"10.0.0.0/33"};
  webhook.secrets = {"whsec_not base64!"};
  webhook.headers = {{"Good", "1"}, {"Bad Name", "2"}, {"X-Two", "a\r\nb"}, {"Host", "h"}};
  webhook.header_where = {at(7), at(8), at(9), at(10)};
  auto problems = webhook_settings_problems(webhook, LiteralAddresses::Reported);
  std::vector<int> lines;
  for (const auto& problem : problems) lines.push_back(problem.where.line);
  EXPECT_EQ(lines, (std::vector<int>{4, 5, 2, 3, 8, 9, 10}));
  ASSERT_EQ(problems.size(), 7u);
  EXPECT_EQ(problems[0].message.rfind("allow_cidrs: ", 0), 0u) << problems[0].message;
  EXPECT_EQ(problems[1].message.rfind("deny_cidrs: ", 0), 0u) << problems[1].message;
  EXPECT_NE(problems[4].message.find("\"Bad Name\" is not a valid HTTP token"), std::string::npos);
  EXPECT_NE(problems[5].message.find("header X-Two has a line break"), std::string::npos);
  EXPECT_NE(problems[6].message.find("header Host describes the HTTP message"), std::string::npos);
}

// Found in a security pass: only a list's first bad CIDR was said, at the list's first item.
TEST(SettingsCheckTest, EachBadCidrIsReportedAtItsOwnItem) {
  auto webhook = usable_webhook();
  webhook.deny_cidrs = {"10.0.0.0/8", "10.0.0.0/33", "::/129"};
  webhook.deny_cidr_where = {at(9), at(10), at(11)};
  // Host bits set, and no per-item positions: reported at the list's own position.
  webhook.allow_cidrs = {"1.2.3.4/8"};
  auto problems = webhook_settings_problems(webhook, LiteralAddresses::Reported);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].where.line, 4);
  EXPECT_EQ(problems[1].where.line, 10);
  EXPECT_NE(problems[1].message.find("10.0.0.0/33"), std::string::npos) << problems[1].message;
  EXPECT_EQ(problems[2].where.line, 11);
  EXPECT_NE(problems[2].message.find("::/129"), std::string::npos) << problems[2].message;
}

// Found in review: a bad secret in a rotation list was reported at the list's first item.
TEST(SettingsCheckTest, EachUndecodableSecretIsReportedAtItsOwnItem) {
  auto webhook = usable_webhook();
  webhook.secrets = {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!notbase64"};
  webhook.secret_where = {at(8), at(9)};
  auto problems = webhook_settings_problems(webhook, LiteralAddresses::Reported);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].where.line, 9);
}

// `check` refuses a metadata address written into the URL; at run time it is refused per
// attempt (as an address a name resolves to is), so it does not pause the webhook.
TEST(SettingsCheckTest, ALiteralAddressThePolicyRefusesIsReportedOnlyWhenAsked) {
  auto webhook = usable_webhook();
  webhook.url = "http://169.254.169.254/latest/";
  auto reported = webhook_settings_problems(webhook, LiteralAddresses::Reported);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].where.line, 2);
  EXPECT_NE(reported[0].message.find("address 169.254.169.254 refused by SSRF policy"),
            std::string::npos);
  EXPECT_TRUE(webhook_settings_problems(webhook, LiteralAddresses::RefusedPerAttempt).empty());
  webhook.allow_cidrs = {"169.254.0.0/16"};
  EXPECT_TRUE(webhook_settings_problems(webhook, LiteralAddresses::Reported).empty());
}

// Found in an exploratory run: `check` said ok to a CA file of garbage, a key that was not the
// certificate's and a wrong key_password, and at run time each attempt failed its handshake until
// the delivery was dead. Each is a problem at its key now, so the webhook is paused instead.
TEST(SettingsCheckTest, TlsFilesMustBeThePemMaterialTheyName) {
  testing::TlsReceiver receiver, other;
  testing::TempDir dir;
  const std::string ca = dir.write("ca.pem", receiver.ca_pem());
  const std::string cert = dir.write("client.pem", receiver.client_cert_pem());
  const std::string key = dir.write("client.key", receiver.client_key_pem());
  const std::string locked = dir.write("locked.key", receiver.client_key_pem("pa55-phrase"));
  const std::string others_key = dir.write("other.key", other.client_key_pem());
  const std::string garbage = dir.write("garbage.pem", "garbage\n");
  const std::string crl_only = dir.write("crl.pem", receiver.ca_crl_pem());
  // A block marked encrypted: without a callback OpenSSL would ask for its pass phrase on the
  // terminal, and `check` would wait there (found in review).
  const std::string sealed = dir.write(
      "sealed.pem",
      "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n"
      "DEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\nAAAAAAAAAAAAAAAAAAAAAA==\n"
      "-----END CERTIFICATE-----\n");
  auto webhook = usable_webhook();
  webhook.url = "https://127.0.0.1:9/";
  webhook.tls_ca_file_where = at(11);
  webhook.tls_cert_file_where = at(12);
  webhook.tls_key_file_where = at(13);
  const auto problems_with = [&](config::TlsConfig tls) {
    webhook.tls = std::move(tls);
    return webhook_settings_problems(webhook, LiteralAddresses::Reported);
  };
  EXPECT_TRUE(problems_with({ca, cert, key}).empty());
  EXPECT_TRUE(problems_with({ca, cert, locked, "pa55-phrase"}).empty());
  EXPECT_TRUE(problems_with({ca, cert, key, "a password an unencrypted key ignores"}).empty());

  struct Case {
    config::TlsConfig tls;
    int line;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {{garbage}, 11, "tls.ca_file: " + garbage + " holds no PEM certificate"},
           {{key}, 11, "holds no PEM certificate"},       // a key is not a CA
           {{crl_only}, 11, "holds no PEM certificate"},  // nor is a revocation list
           {{sealed}, 11, "holds no PEM certificate"},
           {{ca, sealed, key}, 12, "tls.cert_file: " + sealed + " holds no PEM certificate"},
           {{ca, garbage, key}, 12, "tls.cert_file: " + garbage + " holds no PEM certificate"},
           {{ca, cert, garbage}, 13, "tls.key_file: cannot read a PEM private key from " + garbage},
           {{ca, cert, locked}, 13, "an encrypted one: give tls.key_password"},
           {{ca, cert, locked, "wrong-phrase"}, 13, "tls.key_password does not unlock it"},
           {{ca, cert, others_key}, 13, "is not the key of the certificate in " + cert},
           {{dir.path().string() + "/gone.pem"}, 11, "tls.ca_file: cannot read "}}) {
    const auto problems = problems_with(c.tls);
    ASSERT_EQ(problems.size(), 1u) << c.said;
    EXPECT_EQ(problems[0].where.line, c.line) << problems[0].message;
    EXPECT_NE(problems[0].message.find(c.said), std::string::npos) << problems[0].message;
    EXPECT_EQ(problems[0].message.find("phrase"), std::string::npos) << problems[0].message;
  }
}

}  // namespace
}  // namespace hookgate::webhooks
