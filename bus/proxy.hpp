#pragma once
// The `hookgate bus` proxy: publishers connect to an XSUB frontend, subscribers (gateways, taps)
// to an XPUB backend, and subscriptions flow upstream so publishers only send what someone wants.
//
// It forwards message by message instead of calling zmq_proxy, for the allow-lists: ZAP judges a
// CURVE client only when it connects, so after a reload a publisher whose key was removed would
// keep sending over the connection it has. Here each publication's sender key is checked against
// the current list (AllowListCheck), and a reload that removes a subscriber's key rebinds the
// backend, so every subscriber reconnects through ZAP and the removed one stays out.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <zmq.hpp>

#include "bus/connection_monitor.hpp"
#include "bus/curve.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::bus {

struct ProxyOptions {
  std::string frontend;  // endpoint publishers connect to ("tcp://*:5557"; port 0 is fine)
  std::string backend;   // endpoint subscribers connect to
  int hwm = 100000;      // messages each side queues before ZeroMQ drops new ones
  int64_t max_message_bytes = 1 << 20;
  // CURVE when secret_key_file is set: the proxy's keypair and an allow-list per side (a key
  // file or a folder of them, as bus.curve.allowed_clients).
  std::string secret_key_file;
  std::string allowed_publishers;
  std::string allowed_subscribers;
};

class Proxy {
 public:
  // Binds both sides. Errors name the endpoint or the setting, never a key.
  [[nodiscard]] static Result<std::unique_ptr<Proxy>> start(const ProxyOptions& options);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  const std::string& frontend_endpoint() const { return frontend_endpoint_; }
  const std::string& backend_endpoint() const { return backend_endpoint_; }

  // Forwards until request_stop(). An error is a socket failure the proxy cannot go on from.
  [[nodiscard]] Status run();
  // Safe from any thread (the signal thread); run() acts on them within 100 ms. A reload re-reads
  // both allow-lists; a list that cannot be read is logged and the running one kept.
  void request_stop() { stop_ = true; }
  void request_reload() { reload_ = true; }

  // Publications refused because their sender's key left the list after it connected.
  uint64_t publications_denied() const { return denied_.load(); }
  // Unsubscribes a subscriber sent itself, not passed upstream (is_unsubscribe_from_a_peer).
  uint64_t unsubscribes_ignored() const { return unsubscribes_ignored_.load(); }
  // Reloads run() has finished, and those that rebound the backend to cut off a removed
  // subscriber. Once either has moved, what that reload set (backend_endpoint()) may be read.
  uint64_t reloads() const { return reloads_.load(std::memory_order_acquire); }
  uint64_t backend_rebinds() const { return rebinds_.load(std::memory_order_acquire); }
  // Publications passed to the backend.
  uint64_t publications_forwarded() const { return forwarded_.load(std::memory_order_relaxed); }

  // For `hookgate bus --admin` (any thread): whether run() is forwarding; the counters above and
  // the hold as Prometheus text (hookgate_proxy_*); and as /status JSON with the endpoints.
  bool running() const { return running_.load(std::memory_order_relaxed); }
  std::string metrics_text() const;
  std::string status_json() const;

 private:
  explicit Proxy(const ProxyOptions& options);
  bool curve() const { return !options_.secret_key_file.empty(); }
  // Binds a new backend; on a rebind the old one closes first (the port is needed again).
  [[nodiscard]] Status open_backend();
  void make_curve_server(zmq::socket_t& socket, const char* domain) const;
  [[nodiscard]] Status reload();  // an error when the backend could not be rebound
  // Moves one whole message from `from` to `to`; false when none was waiting.
  bool forward_one(zmq::socket_t& from, zmq::socket_t& to, AllowListCheck* check);
  // Moves one subscription from the backend to the frontend, leaving out what is not one and a
  // peer's unsubscribe; false when none was waiting.
  bool forward_subscription();

  const ProxyOptions options_;
  // Declaration order is destruction order in reverse: the sockets close, then the ZAP handler
  // stops, then the context terminates.
  zmq::context_t ctx_{1};
  ZapAuthenticatorStopper zap_stopper_{ctx_};
  zmq::socket_t frontend_;
  zmq::socket_t backend_;
  std::unique_ptr<ConnectionMonitor> frontend_monitor_;  // failed handshakes, logged
  std::unique_ptr<ConnectionMonitor> backend_monitor_;
  std::unique_ptr<AllowListCheck> publisher_check_;
  std::string secret_key_;                 // Z85, read once at start
  std::set<std::string> subscriber_keys_;  // the list the backend's connections were vetted by
  std::string frontend_endpoint_;
  std::string backend_endpoint_;  // as bound (a port 0 resolved), so a rebind takes the same one
  // Publications wait (in ZeroMQ's queues, then the publishers') until the backend has had a
  // subscriber for kSettle: at a start or a rebind, publishers that reconnect first flush what
  // they queued meanwhile, and a backend nobody subscribes to yet would drop all of it; the
  // settle time lets the other subscribers (a second gateway, or the gateway behind a tap that
  // was quicker) subscribe too. run()'s thread only.
  static constexpr std::chrono::milliseconds kSettle{1000};
  bool holding_ = true;
  std::optional<std::chrono::steady_clock::time_point> hold_until_;  // set by the first subscribe
  // Prefixes the backend has a subscriber for (XPUB reports a prefix's first subscribe and its
  // last unsubscribe): a settle that ends with none left holds on (found in review: a tap that
  // subscribed and left within the second released the backlog to nobody).
  std::set<std::string> subscribed_prefixes_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_{false};
  std::atomic<uint64_t> denied_{0};
  std::atomic<uint64_t> unsubscribes_ignored_{0};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> rebinds_{0};
  std::atomic<uint64_t> forwarded_{0};
  // Mirrors of run()'s state for the admin thread.
  std::atomic<bool> running_{false};
  std::atomic<bool> holding_now_{true};
  std::atomic<size_t> prefixes_now_{0};
  std::pair<std::string, std::string> status_endpoints_;  // set by start(), then only read
};

}  // namespace hookgate::bus
