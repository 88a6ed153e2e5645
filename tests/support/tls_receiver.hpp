#pragma once
// A real HTTPS endpoint on 127.0.0.1 for tests of the libcurl path's TLS settings. At start it
// makes a private CA (EC P-256) and, signed by it, a server certificate for IP 127.0.0.1 and a
// client certificate: trusting ca_pem() verifies the server, and with require_client_certificate
// only a client presenting client_cert_pem()/client_key_pem() gets an answer. Connections are
// served one at a time; each request is answered 200 and the connection closed.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hookgate::testing {

class TlsReceiver {
 public:
  explicit TlsReceiver(bool require_client_certificate = false);  // throws std::runtime_error
  ~TlsReceiver();
  TlsReceiver(const TlsReceiver&) = delete;
  TlsReceiver& operator=(const TlsReceiver&) = delete;

  std::string url(const std::string& path = "/hook") const;
  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& client_cert_pem() const { return client_cert_pem_; }
  const std::string& client_key_pem() const { return client_key_pem_; }
  // The same key, encrypted (AES-256) with `password`.
  std::string client_key_pem(const std::string& password) const;
  // An empty certificate revocation list signed by the CA: PEM that trusts no one.
  std::string ca_crl_pem() const;
  int requests() const { return requests_.load(); }
  int failed_handshakes() const { return failed_handshakes_.load(); }
  // The last request's headers (lower-cased names).
  std::map<std::string, std::string> last_headers() const;
  // The protocols the last handshake's client offered by ALPN ("h2", "http/1.1"), in its order;
  // the receiver chooses none of them, so every request is HTTP/1.1.
  std::vector<std::string> offered_protocols() const;

 private:
  struct Tls;  // OpenSSL objects
  void serve();
  void serve_one(int fd);

  std::unique_ptr<Tls> tls_;
  std::string ca_pem_;
  std::string client_cert_pem_;
  std::string client_key_pem_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<int> failed_handshakes_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::string> last_headers_;
  std::vector<std::string> offered_protocols_;
  std::thread thread_;
};

}  // namespace hookgate::testing
