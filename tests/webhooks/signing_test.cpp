#include "webhooks/signing.hpp"

#include <gtest/gtest.h>

#include <map>

namespace hookgate::webhooks {
namespace {

// GitHub's documented example ("Validating webhook deliveries"); re-derived with
// `printf 'Hello, World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody"`.
constexpr const char* kGithubSecret = "It's a Secret to Everybody";
constexpr const char* kGithubPayload = "Hello, World!";
constexpr const char* kGithubHex =
    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

// The Standard Webhooks reference vector (standard-webhooks libraries' tests); re-derived with
// python3 hmac/base64.
constexpr const char* kSwSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kSwMsgId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSwTimestamp = 1614265330;
constexpr const char* kSwBody = R"({"test": 2432232314})";
constexpr const char* kSwSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

// The value of a Result that must be ok (temporaries cannot use Result's operator*).
template <class T>
T unwrap(Result<T> result) {
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
  return result.ok() ? std::move(result).value() : T{};
}

std::map<std::string, std::string> as_map(const HeaderList& headers) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : headers) out[name] = value;
  return out;
}

Delivery make_delivery(std::string body) {
  Delivery delivery;
  delivery.id = kSwMsgId;
  delivery.webhook = "siem";
  delivery.event_id = "evt-1";
  delivery.event_type = "auth.failure";
  delivery.body = std::make_shared<const std::string>(std::move(body));
  return delivery;
}

TEST(SigningTest, HmacMatchesGithubPublishedVector) {
  EXPECT_EQ(hmac_sha256_hex(kGithubSecret, kGithubPayload), kGithubHex);
}

TEST(SigningTest, HmacOfRfc4231TestCase2) {
  // RFC 4231 §4.3: key "Jefe", data "what do ya want for nothing?".
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(SigningTest, HmacAcceptsEmptyKeyAndMessage) {
  // python3 -c 'import hmac,hashlib;print(hmac.new(b"",b"",hashlib.sha256).hexdigest())'
  EXPECT_EQ(hmac_sha256_hex("", ""),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(SigningTest, Base64RoundTripsRfc4648Vectors) {
  const std::pair<const char*, const char*> kVectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : kVectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
    auto decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded;
    EXPECT_EQ(*decoded, plain);
  }
  std::string binary("\x00\xff\x10\x80", 4);
  EXPECT_EQ(unwrap(base64_decode(base64_encode(binary))), binary);
}

TEST(SigningTest, Base64DecodeAcceptsMissingPaddingAndRejectsGarbage) {
  EXPECT_EQ(unwrap(base64_decode("Zm9vYg")), "foob");
  EXPECT_FALSE(base64_decode("Zm9v!").ok());
  EXPECT_FALSE(base64_decode("Zm9 v").ok());
  EXPECT_FALSE(base64_decode("Z").ok());
  EXPECT_FALSE(base64_decode("Zm9=Yg==").ok());
  EXPECT_FALSE(base64_decode("Zg=").ok());
}

TEST(SigningTest, StandardWebhooksKeyDecodesWhsecAndKeepsOtherSecretsRaw) {
  auto key = standard_webhooks_key(kSwSecret);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, unwrap(base64_decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")));
  EXPECT_EQ(key->size(), 24u);
  EXPECT_EQ(unwrap(standard_webhooks_key("plain-secret")), "plain-secret");
  EXPECT_EQ(unwrap(standard_webhooks_key("WHSEC_abc")),
            "WHSEC_abc");  // the prefix is case-sensitive
}

TEST(SigningTest, StandardWebhooksKeyRejectsUndecodableWhsecWithoutEchoingIt) {
  auto key = standard_webhooks_key("whsec_not*base64");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error().message.find("not*base64"), std::string::npos);
  EXPECT_FALSE(standard_webhooks_key("whsec_").ok());
}

TEST(SigningTest, StandardWebhooksSignatureMatchesReferenceVector) {
  auto signature = standard_webhooks_signature({kSwSecret}, kSwMsgId, kSwTimestamp, kSwBody);
  ASSERT_TRUE(signature.ok());
  EXPECT_EQ(*signature, kSwSignature);
}

TEST(SigningTest, StandardWebhooksSignatureChangesWithTimestampIdAndBody) {
  auto base = unwrap(standard_webhooks_signature({kSwSecret}, kSwMsgId, kSwTimestamp, kSwBody));
  EXPECT_NE(unwrap(standard_webhooks_signature({kSwSecret}, kSwMsgId, kSwTimestamp + 1, kSwBody)),
            base);
  EXPECT_NE(unwrap(standard_webhooks_signature({kSwSecret}, "msg_other", kSwTimestamp, kSwBody)),
            base);
  EXPECT_NE(unwrap(standard_webhooks_signature({kSwSecret}, kSwMsgId, kSwTimestamp, "{}")), base);
  EXPECT_EQ(unwrap(standard_webhooks_signature({}, kSwMsgId, kSwTimestamp, kSwBody)), "");
}

TEST(SigningTest, RotationSignsWithEverySecretNewestFirst) {
  const std::string old_secret = "old-raw-secret";
  auto signature =
      standard_webhooks_signature({kSwSecret, old_secret}, kSwMsgId, kSwTimestamp, kSwBody);
  ASSERT_TRUE(signature.ok());
  const std::string old_entry =
      "v1," +
      base64_encode(hmac_sha256_raw(
          old_secret, std::string(kSwMsgId) + "." + std::to_string(kSwTimestamp) + "." + kSwBody));
  EXPECT_EQ(*signature, std::string(kSwSignature) + " " + old_entry);
}

TEST(SigningTest, AttemptHeadersForSignedCloudEventWebhook) {
  config::WebhookConfig webhook;
  webhook.name = "siem";
  webhook.secrets = {kGithubSecret};
  webhook.sign_github = true;
  auto headers = build_attempt_headers(webhook, make_delivery(kGithubPayload), kSwTimestamp);
  ASSERT_TRUE(headers.ok()) << headers.error().message;
  auto h = as_map(*headers);
  EXPECT_EQ(h["User-Agent"], std::string("hookgate/") + HOOKGATE_VERSION);
  EXPECT_EQ(h["Content-Type"], "application/cloudevents+json");
  EXPECT_EQ(h["X-Hookgate-Event"], "auth.failure");
  EXPECT_EQ(h["X-Hookgate-Delivery"], kSwMsgId);
  EXPECT_EQ(h["X-Signature"], std::string("sha256=") + kGithubHex);
  EXPECT_EQ(h["X-Hub-Signature-256"], std::string("sha256=") + kGithubHex);
  EXPECT_EQ(h["webhook-id"], kSwMsgId);
  EXPECT_EQ(h["webhook-timestamp"], std::to_string(kSwTimestamp));
  EXPECT_EQ(h["webhook-signature"], unwrap(standard_webhooks_signature(
                                        {kGithubSecret}, kSwMsgId, kSwTimestamp, kGithubPayload)));
  EXPECT_EQ(headers->size(), 9u);
}

TEST(SigningTest, AttemptHeadersCarryTheStandardWebhooksVector) {
  config::WebhookConfig webhook;
  webhook.name = "sw";
  webhook.secrets = {kSwSecret};
  webhook.body = config::BodyMode::Data;
  auto h = as_map(unwrap(build_attempt_headers(webhook, make_delivery(kSwBody), kSwTimestamp)));
  EXPECT_EQ(h["webhook-signature"], kSwSignature);
  EXPECT_EQ(h["Content-Type"], "application/json");
  // X-Signature keys on the secret exactly as configured, whsec_ prefix and all.
  EXPECT_EQ(h["X-Signature"], "sha256=" + hmac_sha256_hex(kSwSecret, kSwBody));
  EXPECT_EQ(h.count("X-Hub-Signature-256"), 0u);
}

TEST(SigningTest, RotationHeadersUseNewestSecretForXSignature) {
  config::WebhookConfig webhook;
  webhook.name = "rotating";
  webhook.secrets = {"new-secret", "old-secret"};
  webhook.sign_github = true;
  auto h = as_map(unwrap(build_attempt_headers(webhook, make_delivery("{}"), 1700000000)));
  EXPECT_EQ(h["X-Signature"], "sha256=" + hmac_sha256_hex("new-secret", "{}"));
  EXPECT_EQ(h["X-Hub-Signature-256"], "sha256=" + hmac_sha256_hex("new-secret", "{}"));
  const std::string& signature = h["webhook-signature"];
  auto space = signature.find(' ');
  ASSERT_NE(space, std::string::npos);
  EXPECT_EQ(signature.substr(0, space),
            unwrap(standard_webhooks_signature({"new-secret"}, kSwMsgId, 1700000000, "{}")));
  EXPECT_EQ(signature.substr(space + 1),
            unwrap(standard_webhooks_signature({"old-secret"}, kSwMsgId, 1700000000, "{}")));
}

TEST(SigningTest, UnsignedWebhookHasNoSignatureHeaders) {
  config::WebhookConfig webhook;
  webhook.name = "open";
  webhook.sign_github = true;  // nothing to sign with
  auto h = as_map(unwrap(build_attempt_headers(webhook, make_delivery("{}"), 1)));
  for (const char* name : {"X-Signature", "webhook-id", "webhook-timestamp", "webhook-signature",
                           "X-Hub-Signature-256"})
    EXPECT_EQ(h.count(name), 0u) << name;
  EXPECT_EQ(h["X-Hookgate-Delivery"], kSwMsgId);
}

TEST(SigningTest, CustomHeadersAddAndReplaceButNeverOverrideIdsOrSignatures) {
  config::WebhookConfig webhook;
  webhook.name = "custom";
  webhook.secrets = {"s3cret"};
  webhook.headers = {{"Authorization", "Splunk token"},
                     {"content-type", "application/vnd.splunk+json"},
                     {"X-Signature", "sha256=forged"},
                     {"WEBHOOK-ID", "forged"},
                     {"X-Empty", ""}};
  auto headers = build_attempt_headers(webhook, make_delivery("{}"), 1);
  ASSERT_TRUE(headers.ok());
  auto h = as_map(*headers);
  EXPECT_EQ(h["Authorization"], "Splunk token");
  EXPECT_EQ(h["Content-Type"], "application/vnd.splunk+json");
  EXPECT_EQ(h.count("content-type"), 0u);
  EXPECT_EQ(h["X-Signature"], "sha256=" + hmac_sha256_hex("s3cret", "{}"));
  EXPECT_EQ(h["webhook-id"], kSwMsgId);
  EXPECT_EQ(h.count("WEBHOOK-ID"), 0u);
  EXPECT_EQ(h["X-Empty"], "");
  EXPECT_TRUE(is_reserved_header("x-hookgate-delivery"));
  EXPECT_FALSE(is_reserved_header("Authorization"));
}

TEST(SigningTest, HeaderInjectionIsRefusedOrNeutralized) {
  config::WebhookConfig webhook;
  webhook.name = "inject";
  webhook.headers = {{"X-Bad", "a\r\nX-Injected: 1"}};
  EXPECT_FALSE(build_attempt_headers(webhook, make_delivery("{}"), 1).ok());
  webhook.headers = {{"Bad Name", "v"}};
  EXPECT_FALSE(build_attempt_headers(webhook, make_delivery("{}"), 1).ok());

  webhook.headers.clear();
  Delivery delivery = make_delivery("{}");
  delivery.event_type = "evil\r\nX-Injected: 1";
  auto h = as_map(unwrap(build_attempt_headers(webhook, delivery, 1)));
  EXPECT_EQ(h["X-Hookgate-Event"], "evil%0D%0AX-Injected: 1");
}

// Found in review: a value with another control character (\x01, ESC, DEL) was sent, and strict
// receivers answer 400 (final: every delivery dead-lettered); a whitespace-only value was dropped
// by libcurl (which reads "Name:   " as "do not send Name") but sent by the built-in client.
TEST(SigningTest, HeaderValuesAreTrimmedAndFreeOfControlCharacters) {
  config::WebhookConfig webhook;
  webhook.name = "values";
  for (std::string bad : {"a\x01b", "\x1b[31m", "a\x7f"}) {
    webhook.headers = {{"X-Bad", bad}};
    auto built = build_attempt_headers(webhook, make_delivery("{}"), 1);
    ASSERT_FALSE(built.ok());
    EXPECT_NE(built.error().message.find("control character"), std::string::npos);
    EXPECT_EQ(built.error().message.find(bad), std::string::npos);  // not quoted
  }
  webhook.headers = {{"X-Blank", "   "}, {"X-Padded", " \tv a\tl\t "}};
  auto h = as_map(unwrap(build_attempt_headers(webhook, make_delivery("{}"), 1)));
  EXPECT_EQ(h["X-Blank"], "");
  EXPECT_EQ(h["X-Padded"], "v a\tl");
}

// Found in review: a custom Content-Length went out beside the client's own (a 400, final, so
// every delivery dead-lettered), and beside Transfer-Encoding it lets a proxy and the receiver
// disagree on where the signed body ends. Framing headers are a configuration error now.
TEST(SigningTest, CustomFramingHeadersAreRefused) {
  config::WebhookConfig webhook;
  webhook.name = "framing";
  for (const char* name : {"Content-Length", "transfer-encoding", "Host", "Connection"}) {
    webhook.headers = {{name, "1"}};
    auto built = build_attempt_headers(webhook, make_delivery("{}"), 1);
    ASSERT_FALSE(built.ok()) << name;
    EXPECT_NE(built.error().message.find("set by hookgate"), std::string::npos);
  }
  webhook.headers = {{"Authorization", "Splunk t"}};
  EXPECT_TRUE(build_attempt_headers(webhook, make_delivery("{}"), 1).ok());
}

TEST(SigningTest, UndecodableWhsecSecretFailsTheHeaderBuild) {
  config::WebhookConfig webhook;
  webhook.name = "broken";
  webhook.secrets = {"whsec_***"};
  auto headers = build_attempt_headers(webhook, make_delivery("{}"), 1);
  ASSERT_FALSE(headers.ok());
  EXPECT_NE(headers.error().message.find("broken"), std::string::npos);
}

TEST(SigningTest, HmacKeyMatchesOneShotHmacForPartsAndEmptyKey) {
  HmacKey github(kGithubSecret);
  EXPECT_EQ(github.mac({"Hello, ", "", "World!"}), hmac_sha256_raw(kGithubSecret, kGithubPayload));
  HmacKey empty("");
  EXPECT_EQ(empty.mac({}), hmac_sha256_raw("", ""));
  HmacKey moved = std::move(github);
  EXPECT_EQ(moved.mac({kGithubPayload}), hmac_sha256_raw(kGithubSecret, kGithubPayload));
}

// HmacKey schedules the key itself (RFC 2104): a key longer than SHA-256's 64-byte block is
// hashed first, one of exactly 64 bytes is not.
TEST(SigningTest, HmacKeyHandlesKeysAroundTheBlockSize) {
  // RFC 4231 §4.7, test case 6: a 131-byte key.
  const std::string long_key(131, '\xaa');
  const std::string message = "Test Using Larger Than Block-Size Key - Hash Key First";
  ASSERT_EQ(hmac_sha256_hex(long_key, message),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(HmacKey(long_key).mac({message}), hmac_sha256_raw(long_key, message));
  for (size_t size : {63u, 64u, 65u}) {
    const std::string key(size, 'k');
    EXPECT_EQ(HmacKey(key).mac({"a message ", "in parts"}),
              hmac_sha256_raw(key, "a message in parts"))
        << size << "-byte key";
  }
}

TEST(SigningTest, SigningKeysMatchTheReferenceVectorsAndTheUnkeyedHeaderBuild) {
  auto keys = unwrap(SigningKeys::make({kSwSecret, kGithubSecret}));
  ASSERT_NE(keys, nullptr);
  EXPECT_EQ(keys->signature_hex(kGithubPayload), hmac_sha256_hex(kSwSecret, kGithubPayload));
  EXPECT_EQ(keys->standard_signature(kSwMsgId, kSwTimestamp, kSwBody),
            unwrap(standard_webhooks_signature({kSwSecret, kGithubSecret}, kSwMsgId, kSwTimestamp,
                                               kSwBody)));
  EXPECT_EQ(keys->standard_signature(kSwMsgId, kSwTimestamp, kSwBody).substr(0, 47), kSwSignature);

  config::WebhookConfig webhook;
  webhook.name = "keyed";
  webhook.url = "http://127.0.0.1:9/";
  webhook.secrets = {kSwSecret, kGithubSecret};
  webhook.sign_github = true;
  Delivery delivery = make_delivery(kSwBody);
  EXPECT_EQ(unwrap(build_attempt_headers(webhook, *keys, delivery, kSwTimestamp)),
            unwrap(build_attempt_headers(webhook, delivery, kSwTimestamp)));

  EXPECT_TRUE(unwrap(SigningKeys::make({}))->empty());
  EXPECT_FALSE(SigningKeys::make({"whsec_!!!"}).ok());
}

}  // namespace
}  // namespace hookgate::webhooks
