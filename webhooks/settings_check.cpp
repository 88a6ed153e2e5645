#include "webhooks/settings_check.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "webhooks/signing.hpp"
#include "webhooks/ssrf_guard.hpp"

namespace hookgate::webhooks {
namespace {

struct OpenSslFree {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(STACK_OF(X509_INFO) * p) const { sk_X509_INFO_pop_free(p, X509_INFO_free); }
};
template <class T>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree>;

// Hands OpenSSL the key's password. Every PEM read takes a callback: without one, a block marked
// encrypted (even in a CA or certificate file) makes OpenSSL ask on the terminal, and `check` or
// `run` would wait there.
int no_password_callback(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*unused*/) {
  return 0;
}

int key_password_callback(char* buf, int size, int /*rwflag*/, void* password) {
  const auto& text = *static_cast<const std::string*>(password);
  if (text.empty() || text.size() > static_cast<size_t>(size)) return 0;
  std::memcpy(buf, text.data(), text.size());
  return static_cast<int>(text.size());
}

// What libcurl would refuse at every attempt's handshake, found once instead: a CA file with no
// certificate, a client certificate or key that does not parse (or does not unlock), a key that
// is not the certificate's. Read as libcurl's OpenSSL backend reads them: PEM.
void add_tls_problems(const config::WebhookConfig& webhook,
                      const std::function<void(const config::Position&, std::string)>& add) {
  const config::TlsConfig& tls = webhook.tls;
  const auto open = [&](const std::string& path, const char* key, const config::Position& where) {
    OpenSslPtr<BIO> bio(BIO_new_file(path.c_str(), "r"));
    if (!bio) add(where, std::string("tls.") + key + ": cannot read " + path);
    return bio;
  };
  if (!tls.ca_file.empty()) {
    if (auto bio = open(tls.ca_file, "ca_file", webhook.tls_ca_file_where)) {
      OpenSslPtr<STACK_OF(X509_INFO)> items(
          PEM_X509_INFO_read_bio(bio.get(), nullptr, no_password_callback, nullptr));
      int usable = 0;
      for (int i = 0; items && i < sk_X509_INFO_num(items.get()); ++i) {
        const X509_INFO* item = sk_X509_INFO_value(items.get(), i);
        if (item->x509 != nullptr) ++usable;  // it replaces the system's CAs: a CRL trusts no one
      }
      if (usable == 0)
        add(webhook.tls_ca_file_where,
            "tls.ca_file: " + tls.ca_file +
                " holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
  }
  OpenSslPtr<X509> cert;
  if (!tls.cert_file.empty()) {
    if (auto bio = open(tls.cert_file, "cert_file", webhook.tls_cert_file_where)) {
      cert.reset(PEM_read_bio_X509(bio.get(), nullptr, no_password_callback, nullptr));
      if (!cert)
        add(webhook.tls_cert_file_where,
            "tls.cert_file: " + tls.cert_file +
                " holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
  }
  if (!tls.key_file.empty()) {
    if (auto bio = open(tls.key_file, "key_file", webhook.tls_key_file_where)) {
      OpenSslPtr<EVP_PKEY> key(PEM_read_bio_PrivateKey(
          bio.get(), nullptr, key_password_callback,
          const_cast<std::string*>(&tls.key_password)));  // only read by the callback
      if (!key)
        add(webhook.tls_key_file_where,
            "tls.key_file: cannot read a PEM private key from " + tls.key_file +
                (tls.key_password.empty()
                     ? " (not a key, or an encrypted one: give tls.key_password)"
                     : " (not a key, or tls.key_password does not unlock it)"));
      else if (cert && X509_check_private_key(cert.get(), key.get()) != 1)
        add(webhook.tls_key_file_where, "tls.key_file: " + tls.key_file +
                                            " is not the key of the certificate in " +
                                            tls.cert_file);
    }
  }
  // What failed is said above; left queued, OpenSSL's errors would be blamed on a later
  // handshake on this thread.
  ERR_clear_error();
}

}  // namespace

config::Diagnostics webhook_settings_problems(const config::WebhookConfig& webhook,
                                              LiteralAddresses literal) {
  config::Diagnostics problems;
  auto add = [&](const config::Position& where, std::string message) {
    problems.push_back({where, std::move(message)});
  };
  // One item at a time, so each error points at its own item (found in a security pass: only
  // the first bad one was said, at the list's first item).
  const auto check_cidrs = [&](const std::vector<std::string>& cidrs,
                               const std::vector<config::Position>& item_where,
                               const config::Position& list_where, bool allow_list) {
    bool usable = true;
    for (size_t i = 0; i < cidrs.size(); ++i) {
      auto policy = allow_list ? AddressPolicy::create({cidrs[i]}, {})
                               : AddressPolicy::create({}, {cidrs[i]});
      if (policy) continue;
      usable = false;
      add(i < item_where.size() ? item_where[i] : list_where, policy.error().message);
    }
    return usable;
  };
  const bool allow =
      check_cidrs(webhook.allow_cidrs, webhook.allow_cidr_where, webhook.allow_cidrs_where, true);
  const bool deny =
      check_cidrs(webhook.deny_cidrs, webhook.deny_cidr_where, webhook.deny_cidrs_where, false);
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
  add_tls_problems(webhook, add);
  return problems;
}

}  // namespace hookgate::webhooks
