#include "tests/support/tls_receiver.hpp"
#include "tests/support/loopback.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <stdexcept>

namespace hookgate::testing {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("TlsReceiver: ") + what + " failed");
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  require(extension != nullptr && X509_add_ext(cert, extension, -1) == 1, "an extension");
  X509_EXTENSION_free(extension);
}

// A certificate for `key` named `common_name`, signed by `issuer` (self-signed when null).
Cert make_certificate(EVP_PKEY* key, const char* common_name, X509* issuer, EVP_PKEY* issuer_key,
                      long serial, bool ca, const char* subject_alt_name) {
  Cert cert(X509_new());
  require(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_extension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (subject_alt_name != nullptr)
    add_extension(cert.get(), signer, NID_subject_alt_name, subject_alt_name);
  require(X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0,
          "X509_sign");
  return cert;
}

// What `write` puts into a memory BIO, as text.
template <class Write>
std::string written_pem(Write write) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

std::string pem_of(X509* cert) {
  return written_pem([cert](BIO* bio) { PEM_write_bio_X509(bio, cert); });
}

std::string pem_of(EVP_PKEY* key) {
  return written_pem([key](BIO* bio) {
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

}  // namespace

struct TlsReceiver::Tls {
  Key ca_key, server_key, client_key;
  Cert ca, server, client;
  SSL_CTX* ctx = nullptr;
  ~Tls() { SSL_CTX_free(ctx); }
};

TlsReceiver::TlsReceiver(bool require_client_certificate) : tls_(std::make_unique<Tls>()) {
  Tls& t = *tls_;
  t.ca_key.reset(EVP_EC_gen("P-256"));
  t.server_key.reset(EVP_EC_gen("P-256"));
  t.client_key.reset(EVP_EC_gen("P-256"));
  require(t.ca_key && t.server_key && t.client_key, "EVP_EC_gen");
  // A name of its own: two receivers' CAs with one name would stand in for each other in a
  // certificate store's lookup by name, and fail as a bad signature rather than an unknown CA.
  static std::atomic<int> receivers{0};
  const std::string ca_name = "hookgate test CA " + std::to_string(++receivers);
  t.ca = make_certificate(t.ca_key.get(), ca_name.c_str(), nullptr, nullptr, 1, true, nullptr);
  t.server = make_certificate(t.server_key.get(), "127.0.0.1", t.ca.get(), t.ca_key.get(), 2, false,
                              "IP:127.0.0.1");
  t.client = make_certificate(t.client_key.get(), "hookgate", t.ca.get(), t.ca_key.get(), 3, false,
                              nullptr);
  ca_pem_ = pem_of(t.ca.get());
  client_cert_pem_ = pem_of(t.client.get());
  client_key_pem_ = pem_of(t.client_key.get());

  t.ctx = SSL_CTX_new(TLS_server_method());
  require(t.ctx != nullptr, "SSL_CTX_new");
  require(SSL_CTX_use_certificate(t.ctx, t.server.get()) == 1 &&
              SSL_CTX_use_PrivateKey(t.ctx, t.server_key.get()) == 1,
          "loading the server certificate");
  if (require_client_certificate) {
    require(X509_STORE_add_cert(SSL_CTX_get_cert_store(t.ctx), t.ca.get()) == 1, "the CA store");
    SSL_CTX_set_verify(t.ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(
      t.ctx,
      [](SSL*, const unsigned char**, unsigned char*, const unsigned char* in, unsigned int length,
         void* self) {
        std::vector<std::string> offered;  // ALPN's wire form: a length byte, then the name
        for (unsigned int at = 0; at < length; at += 1u + in[at])
          if (at + 1u + in[at] <= length)
            offered.emplace_back(reinterpret_cast<const char*>(in + at + 1), in[at]);
        auto* receiver = static_cast<TlsReceiver*>(self);
        std::lock_guard lock(receiver->mu_);
        receiver->offered_protocols_ = std::move(offered);
        return SSL_TLSEXT_ERR_NOACK;
      },
      this);

  const LoopbackSocket listener = bind_loopback(0, 16);
  require(listener.fd >= 0, "listen");
  listen_fd_ = listener.fd;
  port_ = listener.port;
  thread_ = std::thread([this] { serve(); });
}

TlsReceiver::~TlsReceiver() {
  ::shutdown(listen_fd_, SHUT_RDWR);  // accept() returns
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

std::string TlsReceiver::client_key_pem(const std::string& password) const {
  return written_pem([&](BIO* bio) {
    PEM_write_bio_PrivateKey(bio, tls_->client_key.get(), EVP_aes_256_cbc(),
                             reinterpret_cast<const unsigned char*>(password.data()),
                             static_cast<int>(password.size()), nullptr, nullptr);
  });
}

std::string TlsReceiver::ca_crl_pem() const {
  X509_CRL* crl = X509_CRL_new();
  X509_CRL_set_issuer_name(crl, X509_get_subject_name(tls_->ca.get()));
  ASN1_TIME* now = ASN1_TIME_set(nullptr, time(nullptr));
  X509_CRL_set1_lastUpdate(crl, now);
  require(X509_CRL_sign(crl, tls_->ca_key.get(), EVP_sha256()) > 0, "X509_CRL_sign");
  std::string pem = written_pem([crl](BIO* bio) { PEM_write_bio_X509_CRL(bio, crl); });
  ASN1_TIME_free(now);
  X509_CRL_free(crl);
  return pem;
}

std::string TlsReceiver::url(const std::string& path) const {
  return "https://127.0.0.1:" + std::to_string(port_) + path;
}

std::map<std::string, std::string> TlsReceiver::last_headers() const {
  std::lock_guard lock(mu_);
  return last_headers_;
}

std::vector<std::string> TlsReceiver::offered_protocols() const {
  std::lock_guard lock(mu_);
  return offered_protocols_;
}

void TlsReceiver::serve() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    const timeval limit{5, 0};  // a stalled client cannot hold the only serving thread for long
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    serve_one(fd);
    ::close(fd);
  }
}

void TlsReceiver::serve_one(int fd) {
  SSL* ssl = SSL_new(tls_->ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) {
    failed_handshakes_.fetch_add(1);
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  std::string data;
  char buffer[16384];
  size_t head_end = std::string::npos;
  size_t content_length = 0;
  for (;;) {
    if (head_end == std::string::npos && (head_end = data.find("\r\n\r\n")) != std::string::npos) {
      std::string head = data.substr(0, head_end);
      std::transform(head.begin(), head.end(), head.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos)
        content_length = std::stoul(head.substr(at + 17));
      std::map<std::string, std::string> headers;
      for (size_t line = head.find("\r\n"); line != std::string::npos;) {
        const size_t next = head.find("\r\n", line + 2);
        const std::string text = head.substr(line + 2, next - line - 2);
        if (size_t colon = text.find(':'); colon != std::string::npos) {
          std::string value = data.substr(line + 2 + colon + 1, text.size() - colon - 1);
          value.erase(0, value.find_first_not_of(' '));  // as sent, not lower-cased
          headers[text.substr(0, colon)] = value;
        }
        line = next;
      }
      std::lock_guard lock(mu_);
      last_headers_ = std::move(headers);
    }
    if (head_end != std::string::npos && data.size() >= head_end + 4 + content_length) break;
    const int n = SSL_read(ssl, buffer, sizeof buffer);
    if (n <= 0) {
      ERR_clear_error();
      SSL_free(ssl);
      return;
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  requests_.fetch_add(1);
  const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  SSL_write(ssl, answer.data(), static_cast<int>(answer.size()));
  SSL_shutdown(ssl);
  ERR_clear_error();
  SSL_free(ssl);
}

}  // namespace hookgate::testing
