#pragma once
// Signature checks written against OpenSSL directly, not webhooks/signing: a test that verified
// with the product's own HMAC, base64 or whsec_ decoding would pass with a bug in any of them.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <string>

namespace hookgate::testing {

inline std::string openssl_hmac_raw(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  return std::string(reinterpret_cast<const char*>(mac), length);
}

// X-Signature's and X-Hub-Signature-256's digest: lower-case hex.
inline std::string openssl_hmac_hex(const std::string& key, const std::string& message) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : openssl_hmac_raw(key, message)) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 0xf]);
  }
  return hex;
}

// webhook-signature's digest: standard base64.
inline std::string openssl_hmac_base64(const std::string& key, const std::string& message) {
  const std::string mac = openssl_hmac_raw(key, message);
  unsigned char encoded[64] = {};
  const int encoded_length = EVP_EncodeBlock(
      encoded, reinterpret_cast<const unsigned char*>(mac.data()), static_cast<int>(mac.size()));
  return std::string(reinterpret_cast<char*>(encoded), static_cast<size_t>(encoded_length));
}

// base64 of a length that is a multiple of 4 without padding (as in the tests' whsec_ secrets).
inline std::string openssl_base64_decode(const std::string& text) {
  std::string out(text.size(), '\0');
  const int length = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                     reinterpret_cast<const unsigned char*>(text.data()),
                                     static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(std::max(length, 0)));
  return out;
}

}  // namespace hookgate::testing
