#pragma once
// CURVE encryption and the ZAP allow-list for the bus (PRODUCT.md "Bus security").
// libzmq 4.3 admits ANY client that knows the server's public key unless a ZAP handler says no, so
// a ZapAuthenticator must be running in the socket's context before a CURVE server socket binds;
// configure_curve_server() refuses to configure a socket when none is running.
#include <zmq.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "config/config.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::bus {

struct CurveKeypair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
};

CurveKeypair generate_curve_keypair();
// Key files: lines "public: <z85>" and "secret: <z85>" ('#' comments allowed). A bare 40-character
// Z85 line is read as a public key (Z85 has ':' and '=' in its alphabet, so a line is a key
// before it is a "label: key" pair).
std::string format_keypair_file(const CurveKeypair& keys, bool include_secret);
Result<CurveKeypair> read_key_file(const std::string& path);
// allowed_clients: a key file (one public key a line) or a folder of key files: every *.pub, and
// every *.key that holds only a public key (a keypair's .key, or one it cannot read, is skipped
// with a warning: `hookgate keygen` writes svc.key beside svc.key.pub, and removing the .pub must
// revoke), and an empty list is warned about. `Quiet` reads without those warnings: for a check
// that precedes the read that installs the list, so each is logged once.
enum class AllowListWarnings { Log, Quiet };
Result<std::set<std::string>> read_allowed_clients(
    const std::string& path, AllowListWarnings warnings = AllowListWarnings::Log);

// ZAP domains: each CURVE server socket names the allow-list that judges its clients. The proxy's
// subscriber side has its own, so a publisher's key cannot also read every event off the bus.
inline constexpr const char* kPublisherDomain = "hookgate";
inline constexpr const char* kSubscriberDomain = "hookgate-subscribers";

// Answers ZAP requests on inproc://zeromq.zap.01 for every socket in `ctx`: CURVE clients whose
// public key is in the allow-list of the socket's domain get 200, everyone else 400. NULL/PLAIN
// mechanisms are refused.
class ZapAuthenticator {
 public:
  explicit ZapAuthenticator(zmq::context_t& ctx);
  ~ZapAuthenticator();
  void set_allowed(const std::string& domain, std::set<std::string> allowed_z85);  // and reload
  bool allows(const std::string& domain, const std::string& client_key_z85) const;
  uint64_t denied() const { return denied_.load(); }

 private:
  void run();
  void answer_one(metrics::Counter& denied_counter);  // waits up to 100 ms for one request
  zmq::socket_t socket_;
  mutable std::mutex mu_;
  std::map<std::string, std::set<std::string>> allowed_;  // by ZAP domain
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> denied_{0};
  std::thread thread_;
};

// ZAP is asked only when a client connects, so a key removed from the allow-list (and SIGHUP) would
// keep sending over the connection it already has. A CURVE server socket's receiver asks this
// for every message instead: the ZAP handler names each connection by its client key (User-Id),
// and a message whose key is no longer listed is refused. One answer per key is kept until the
// allow-list changes, so a message costs an atomic load and a lookup among the few keys seen,
// not a lock.
class AllowListCheck {
 public:
  AllowListCheck(zmq::context_t& ctx, std::string domain) : ctx_(ctx), domain_(std::move(domain)) {}
  // False when `first_frame` came from a CURVE client whose key is no longer allowed, or over a
  // connection the ZAP handler did not admit by key.
  [[nodiscard]] bool allows(zmq::message_t& first_frame);

 private:
  struct Answer {
    uint64_t generation = ~uint64_t{0};
    bool allowed = true;
  };
  zmq::context_t& ctx_;
  const std::string domain_;
  // By client key: senders interleave, and a refused key is logged once per list generation, not
  // once per message. Publishers are few; the map starts over past kMaxKeys.
  static constexpr size_t kMaxKeys = 4096;
  std::map<std::string, Answer, std::less<>> answers_;
  bool warned_unvetted_ = false;
};

// Makes `sock` (created in `ctx`, not yet bound) a CURVE server with the configured secret key,
// first starting the context's ZapAuthenticator with the allow-list for `domain` (or refreshing
// it).
Status configure_curve_server(zmq::context_t& ctx, zmq::socket_t& sock,
                              const config::CurveConfig& cfg,
                              const std::string& domain = kPublisherDomain);
// Starts (once per context) the authenticator with the configured allow-list for `domain`, or
// refreshes it.
Status ensure_zap_authenticator(zmq::context_t& ctx, const config::CurveConfig& cfg,
                                const std::string& domain = kPublisherDomain);
// The same with an allow-list already read (so a caller that compares lists judges the one it
// installs, not a second read of a file that may have changed in between).
Status ensure_zap_authenticator(zmq::context_t& ctx, std::set<std::string> allowed,
                                const std::string& domain);
// Stops the context's authenticator; call before the context is destroyed.
void stop_zap_authenticator(zmq::context_t& ctx);
// Calls stop_zap_authenticator(ctx) when it goes out of scope, on every path (a start-up that
// fails after the authenticator started included: a handler left running would make the
// context's termination throw in its thread). Declare it after the context and before the
// sockets, so it runs after they close and before the context terminates.
class ZapAuthenticatorStopper {
 public:
  explicit ZapAuthenticatorStopper(zmq::context_t& ctx) : ctx_(ctx) {}
  ~ZapAuthenticatorStopper() { stop_zap_authenticator(ctx_); }
  ZapAuthenticatorStopper(const ZapAuthenticatorStopper&) = delete;
  ZapAuthenticatorStopper& operator=(const ZapAuthenticatorStopper&) = delete;

 private:
  zmq::context_t& ctx_;
};
// A server public key given as 40 Z85 characters or as a key file (`hookgate keygen` output).
Result<std::string> read_server_key(const std::string& z85_or_file);
// Reads the key files `cfg` names the way the gateway's start does, without a socket, so
// `hookgate check` refuses what `hookgate run` would. Errors name the setting and point at it,
// never show a key.
Result<void, config::Diagnostic> check_curve_files(const config::CurveConfig& cfg);
// How long a CURVE publisher waits before dialling again after a connection ended (libzmq's
// ZMQ_RECONNECT_IVL; see Publisher::connect).
inline constexpr int kCurveClientReconnectMs = 1000;
// Makes `sock` a CURVE client of `server_public` using the client keypair.
Status configure_curve_client(zmq::socket_t& sock, const std::string& server_public,
                              const CurveKeypair& client);

}  // namespace hookgate::bus
