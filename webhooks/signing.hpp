#pragma once
// Request signing and the header set of one delivery attempt (PRODUCT.md "Webhooks").
//
// Three signature schemes ride on every signed request:
//   X-Signature: sha256=<hex>          HMAC-SHA256(newest secret as configured, body)
//   webhook-id / webhook-timestamp / webhook-signature: v1,<base64> ...
//                                      Standard Webhooks over "<id>.<timestamp>.<body>", one entry
//                                      per secret (rotation), key = base64-decode(secret minus
//                                      "whsec_") or the raw secret
//   X-Hub-Signature-256: sha256=<hex>  GitHub's spelling of X-Signature, when `sign_github`
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"
#include "webhooks/delivery.hpp"

namespace hookgate::webhooks {

// Lower-case hex of HMAC-SHA256(key, message).
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
// The raw 32-byte HMAC-SHA256(key, message).
std::string hmac_sha256_raw(std::string_view key, std::string_view message);

// Standard base64 (RFC 4648 §4) with padding.
std::string base64_encode(std::string_view bytes);
// Standard base64; padding optional; whitespace and any other character are errors.
Result<std::string> base64_decode(std::string_view text);

inline constexpr std::string_view kStandardWebhooksSecretPrefix = "whsec_";

// The HMAC key the Standard Webhooks scheme uses for `secret`: base64-decode of the rest when the
// secret starts with "whsec_" (as the standardwebhooks/svix libraries do), else the secret's bytes.
// Fails only for a "whsec_" secret whose remainder is not base64; the message never contains it.
Result<std::string> standard_webhooks_key(std::string_view secret);

// The webhook-signature value: "v1,<b64> v1,<b64>", one entry per secret in the given order
// (newest first), each over "<msg_id>.<timestamp_s>.<body>". Empty when there are no secrets.
Result<std::string> standard_webhooks_signature(const std::vector<std::string>& secrets,
                                                std::string_view msg_id, int64_t timestamp_s,
                                                std::string_view body);

// An HMAC-SHA256 key scheduled once (RFC 2104): the SHA-256 states after the key's inner and
// outer pad blocks, copied per message. HMAC() (EVP_Q_mac) fetches the algorithms and keys a new
// context on every call, and even a keyed EVP_MAC_CTX costs about ten allocations per duplicate
// on OpenSSL 3.0; the dispatcher signs every attempt twice. mac() only reads the states, so one
// HmacKey may be used from several threads at once.
class HmacKey {
 public:
  explicit HmacKey(std::string_view key);
  ~HmacKey();
  HmacKey(HmacKey&& other) noexcept;
  HmacKey& operator=(HmacKey&& other) noexcept;
  HmacKey(const HmacKey&) = delete;
  HmacKey& operator=(const HmacKey&) = delete;

  // The raw 32-byte HMAC-SHA256 over the concatenation of `parts`.
  std::string mac(std::initializer_list<std::string_view> parts) const;

 private:
  struct States;
  std::unique_ptr<States> states_;  // never null (a moved-from key has none and must not be used)
};

// Every key a webhook signs with, derived from its `secrets` once (when webhooks are configured)
// instead of on every attempt: the X-Signature key (newest secret's bytes) and the Standard
// Webhooks keys (whsec_ base64-decoded). Immutable after make(), so safe to share across threads.
class SigningKeys {
 public:
  // Fails like standard_webhooks_key() on an undecodable "whsec_" secret.
  static Result<std::shared_ptr<const SigningKeys>> make(const std::vector<std::string>& secrets);

  bool empty() const { return standard_.empty(); }
  // Lower-case hex of HMAC-SHA256(newest secret, body); requires !empty().
  std::string signature_hex(std::string_view body) const;
  // The webhook-signature value, as standard_webhooks_signature() computes it.
  std::string standard_signature(std::string_view msg_id, int64_t timestamp_s,
                                 std::string_view body) const;

 private:
  SigningKeys() = default;
  std::unique_ptr<HmacKey> raw_;  // the newest secret as configured
  std::vector<HmacKey> standard_;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// True for the header names hookgate sets itself and that a webhook's custom `headers` cannot
// replace (case-insensitive): the X-Hookgate-* ids and every signature header. Custom
// `Content-Type` and `User-Agent` do replace the defaults.
bool is_reserved_header(std::string_view name);
// Headers that frame the HTTP message (Host, Content-Length, Transfer-Encoding, Connection...):
// the client sets them, and a custom `headers:` entry naming one is a configuration error.
bool is_framing_header(std::string_view name);
// Whether a custom `headers:` entry can be sent: a valid name, no line break or control character
// in the value, not a framing header. The error names the header, never its value.
Status check_custom_header(std::string_view name, std::string_view value);

// Every header of one attempt, in a stable order: User-Agent, Content-Type, X-Hookgate-Event,
// X-Hookgate-Delivery, then (with secrets) X-Signature, webhook-id, webhook-timestamp,
// webhook-signature, X-Hub-Signature-256 (sign_github), then the webhook's custom headers.
// `timestamp_s` is the attempt's Unix time: signatures are fresh on every attempt while the
// delivery id stays the same. Fails on an undecodable "whsec_" secret or a custom header that
// would break the request (empty/invalid name, CR/LF in the value).
Result<HeaderList> build_attempt_headers(const config::WebhookConfig& webhook,
                                         const Delivery& delivery, int64_t timestamp_s);
// The same with keys already derived from `webhook.secrets` (SigningKeys::make): what the
// dispatcher calls per attempt.
Result<HeaderList> build_attempt_headers(const config::WebhookConfig& webhook,
                                         const SigningKeys& keys, const Delivery& delivery,
                                         int64_t timestamp_s);

}  // namespace hookgate::webhooks
