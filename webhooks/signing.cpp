// Before any OpenSSL header: HmacKey uses the SHA256_* calls OpenSSL 3 marks deprecated.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "webhooks/signing.hpp"
#include "gateway/common/text.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <iterator>
#include <utility>

namespace hookgate::webhooks {
namespace {

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// RFC 9110 token characters: what a header name may be made of.
bool is_token(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (std::isalnum(c)) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  }
  return true;
}

// Event types are free-form and come from publishers: control characters (CR/LF above all) are
// percent-encoded so a type can never split or inject a header.
std::string header_safe(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

std::string hmac_sha256_raw(std::string_view key, std::string_view message) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_len = 0;
  // HMAC() accepts a null key pointer only with length 0; an empty key is legal HMAC input.
  static const unsigned char kEmpty = 0;
  const void* key_data = key.empty() ? &kEmpty : static_cast<const void*>(key.data());
  const unsigned char* msg_data =
      message.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(message.data());
  HMAC(EVP_sha256(), key_data, static_cast<int>(key.size()), msg_data, message.size(), mac.data(),
       &mac_len);
  return std::string(reinterpret_cast<const char*>(mac.data()), mac_len);
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  return to_hex(hmac_sha256_raw(key, message));
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kBase64Alphabet[(n >> 18) & 63]);
    out.push_back(kBase64Alphabet[(n >> 12) & 63]);
    out.push_back(kBase64Alphabet[(n >> 6) & 63]);
    out.push_back(kBase64Alphabet[n & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kBase64Alphabet[(n >> 18) & 63]);
    out.push_back(kBase64Alphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kBase64Alphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  size_t padding = 0;
  while (!text.empty() && text.back() == '=' && padding < 2) {
    text.remove_suffix(1);
    ++padding;
  }
  if (padding > 0 && (text.size() + padding) % 4 != 0)
    return make_error("base64: padding does not complete a 4-character group");
  if (text.size() % 4 == 1) return make_error("base64: truncated input");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = base64_value(c);
    if (v < 0) return make_error("base64: invalid character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

Result<std::string> standard_webhooks_key(std::string_view secret) {
  if (secret.substr(0, kStandardWebhooksSecretPrefix.size()) != kStandardWebhooksSecretPrefix)
    return std::string(secret);
  auto decoded = base64_decode(secret.substr(kStandardWebhooksSecretPrefix.size()));
  if (!decoded) return make_error("a whsec_ secret is not valid base64 after the prefix");
  if (decoded->empty()) return make_error("a whsec_ secret has no key bytes after the prefix");
  return std::move(decoded).value();
}

Result<std::string> standard_webhooks_signature(const std::vector<std::string>& secrets,
                                                std::string_view msg_id, int64_t timestamp_s,
                                                std::string_view body) {
  auto keys = SigningKeys::make(secrets);
  if (!keys) return std::move(keys).error();
  return (*keys)->standard_signature(msg_id, timestamp_s, body);
}

// The low-level SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, whose digest
// contexts (3.0) cannot be copied without allocating; a SHA256_CTX is a plain struct.
struct HmacKey::States {
  SHA256_CTX inner;  // after the key XOR ipad block
  SHA256_CTX outer;  // after the key XOR opad block
};

HmacKey::HmacKey(std::string_view key) : states_(std::make_unique<States>()) {
  constexpr size_t kBlock = 64;  // SHA-256's block size
  std::array<unsigned char, kBlock> block{};
  if (key.size() > kBlock) {
    SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), block.data());
  } else if (!key.empty()) {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<unsigned char, kBlock> pad{};
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  SHA256_Init(&states_->inner);
  SHA256_Update(&states_->inner, pad.data(), pad.size());
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  SHA256_Init(&states_->outer);
  SHA256_Update(&states_->outer, pad.data(), pad.size());
  OPENSSL_cleanse(block.data(), block.size());
  OPENSSL_cleanse(pad.data(), pad.size());
}

HmacKey::~HmacKey() {
  if (states_) OPENSSL_cleanse(states_.get(), sizeof(States));
}

HmacKey::HmacKey(HmacKey&& other) noexcept = default;

HmacKey& HmacKey::operator=(HmacKey&& other) noexcept {
  if (this != &other) {
    if (states_) OPENSSL_cleanse(states_.get(), sizeof(States));
    states_ = std::move(other.states_);
  }
  return *this;
}

std::string HmacKey::mac(std::initializer_list<std::string_view> parts) const {
  SHA256_CTX c = states_->inner;
  for (auto part : parts) SHA256_Update(&c, part.data(), part.size());
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_Final(digest.data(), &c);
  c = states_->outer;
  SHA256_Update(&c, digest.data(), digest.size());
  SHA256_Final(digest.data(), &c);
  OPENSSL_cleanse(&c, sizeof c);
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

Result<std::shared_ptr<const SigningKeys>> SigningKeys::make(
    const std::vector<std::string>& secrets) {
  std::shared_ptr<SigningKeys> keys(new SigningKeys());
  keys->standard_.reserve(secrets.size());
  for (const auto& secret : secrets) {
    auto key = standard_webhooks_key(secret);
    if (!key) return std::move(key).error();
    keys->standard_.emplace_back(*key);
  }
  if (!secrets.empty()) keys->raw_ = std::make_unique<HmacKey>(secrets.front());
  return std::shared_ptr<const SigningKeys>(std::move(keys));
}

std::string SigningKeys::signature_hex(std::string_view body) const {
  return to_hex(raw_->mac({body}));
}

std::string SigningKeys::standard_signature(std::string_view msg_id, int64_t timestamp_s,
                                            std::string_view body) const {
  // Signed content "<msg_id>.<timestamp>.<body>", fed in pieces: no copy of the body.
  const std::string timestamp = std::to_string(timestamp_s);
  std::string out;
  out.reserve(standard_.size() * 48);
  for (const auto& key : standard_) {
    if (!out.empty()) out.push_back(' ');
    out += "v1,";
    out += base64_encode(key.mac({msg_id, ".", timestamp, ".", body}));
  }
  return out;
}

namespace {
template <size_t N>
bool is_one_of(std::string_view name, const std::string_view (&names)[N]) {
  return std::any_of(std::begin(names), std::end(names),
                     [&](std::string_view listed) { return iequals(name, listed); });
}
}  // namespace

bool is_reserved_header(std::string_view name) {
  static constexpr std::string_view kReserved[] = {
      "X-Hookgate-Event",  "X-Hookgate-Delivery", "X-Signature",         "webhook-id",
      "webhook-timestamp", "webhook-signature",   "X-Hub-Signature-256",
  };
  return is_one_of(name, kReserved);
}

bool is_framing_header(std::string_view name) {
  static constexpr std::string_view kFraming[] = {
      "Host",    "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
      "Trailer", "Expect",         "Proxy-Connection"};
  return is_one_of(name, kFraming);
}

Status check_custom_header(std::string_view name, std::string_view value) {
  if (!is_token(name))
    return make_error("header name \"" + header_safe(name) + "\" is not a valid HTTP token");
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
    return make_error("header " + std::string(name) + " has a line break or NUL in its value");
  // RFC 9110 5.5: strict receivers refuse the other control characters with a 400 (final).
  if (std::any_of(value.begin(), value.end(), [](char c) {
        return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
      }))
    return make_error("header " + std::string(name) + " has a control character in its value");
  // The HTTP client writes these from the request itself: a second Content-Length, or one
  // beside Transfer-Encoding, would make a receiver or a proxy read a different body than the
  // one signed (or refuse every request, which dead-letters everything).
  if (is_framing_header(name))
    return make_error("header " + std::string(name) +
                      " describes the HTTP message itself and is set by hookgate; remove it");
  return {};
}

Result<HeaderList> build_attempt_headers(const config::WebhookConfig& webhook,
                                         const Delivery& delivery, int64_t timestamp_s) {
  auto keys = SigningKeys::make(webhook.secrets);
  if (!keys) return make_error("webhook " + webhook.name + ": " + keys.error().message);
  return build_attempt_headers(webhook, **keys, delivery, timestamp_s);
}

Result<HeaderList> build_attempt_headers(const config::WebhookConfig& webhook,
                                         const SigningKeys& keys, const Delivery& delivery,
                                         int64_t timestamp_s) {
  std::string_view body = delivery.body ? std::string_view(*delivery.body) : std::string_view();

  HeaderList headers;
  headers.reserve(9 + webhook.headers.size());
  headers.emplace_back("User-Agent", "hookgate/" HOOKGATE_VERSION);
  headers.emplace_back("Content-Type", webhook.body == config::BodyMode::CloudEvent
                                           ? "application/cloudevents+json"
                                           : "application/json");
  headers.emplace_back("X-Hookgate-Event", header_safe(delivery.event_type));
  headers.emplace_back("X-Hookgate-Delivery", delivery.id);

  if (!keys.empty()) {
    // X-Signature and X-Hub-Signature-256 key on the configured bytes, exactly as GitHub does.
    std::string hex = keys.signature_hex(body);
    headers.emplace_back("X-Signature", "sha256=" + hex);
    headers.emplace_back("webhook-id", delivery.id);
    headers.emplace_back("webhook-timestamp", std::to_string(timestamp_s));
    headers.emplace_back("webhook-signature",
                         keys.standard_signature(delivery.id, timestamp_s, body));
    if (webhook.sign_github) headers.emplace_back("X-Hub-Signature-256", "sha256=" + hex);
  }

  for (const auto& [name, value] : webhook.headers) {
    if (auto usable = check_custom_header(name, value); !usable)
      return make_error("webhook " + webhook.name + ": " + usable.error().message);
    if (is_reserved_header(name)) continue;  // hookgate's ids and signatures always win
    // Surrounding blanks are not part of a field value (RFC 9110 5.5), and libcurl reads a
    // blank-only one as "do not send this header": both clients send the trimmed value.
    const std::string_view trimmed = trim(value);  // checked above: only SP and HTAB remain
    bool replaced = false;
    for (auto& header : headers) {
      if (iequals(header.first, name)) {
        header.second = trimmed;
        replaced = true;
      }
    }
    if (!replaced) headers.emplace_back(name, trimmed);
  }
  return headers;
}

}  // namespace hookgate::webhooks
