#pragma once
// The gateway's SUB socket: binds and/or connects per `bus`, subscribes to `bus.topics`, refuses
// grossly oversize frames in the socket (ZMQ_MAXMSGSIZE disconnects the sender) and queues at most
// `receive_hwm` messages (beyond that ZeroMQ drops new messages: PUB/SUB never blocks publishers).
// ZeroMQ limits frames, not messages: a sender may make it buffer one message of endless frames
// before the gateway sees any of it, so an untrusted network needs CURVE (docs/operations.md).
#include <zmq.hpp>

#include <cstdint>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bus/connection_monitor.hpp"
#include "bus/curve.hpp"
#include "config/config.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::bus {

// libzmq's context option ZMQ_ZERO_COPY_RECV (a draft one, so not in every zmq.h): 0 makes a
// received message a copy of its own rather than a share of the 8 KiB buffer it was read into.
inline constexpr int kZmqZeroCopyRecv = 10;

// The socket's own limit (ZMQ_MAXMSGSIZE) is this many times bus.max_message_bytes: messages over
// max_message_bytes but under the cap reach the decoder and are rejected one by one; beyond the
// cap ZeroMQ disconnects the peer before buffering the frame (a guard against memory abuse).
inline constexpr int64_t kOversizeHardCapFactor = 2;

class Subscriber {
 public:
  static Result<std::unique_ptr<Subscriber>> open(zmq::context_t& ctx,
                                                  const config::BusConfig& cfg);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Waits up to `timeout` for one message; false when none arrived (a signal does not end the
  // wait: EINTR is not an error here). First dials again the connect endpoints whose handshake
  // was refused and whose back-off has passed (ConnectionMonitor::take_due_redials). Frames beyond
  // 2 are still received whole (so the next message starts clean) and left to the decoder to
  // refuse.
  [[nodiscard]] bool receive(std::vector<zmq::message_t>& frames,
                             std::chrono::milliseconds timeout);
  // Non-blocking variant for draining bursts.
  [[nodiscard]] bool try_receive(std::vector<zmq::message_t>& frames);
  // The last receive() or try_receive() returned false after refusing 1,000 messages of senders
  // the allow-list no longer has, not for want of messages: more may wait behind them.
  bool stopped_at_denials() const { return stopped_at_denials_; }

  // For a socket that only connects: how many of its connect endpoints are connected now (the
  // gateway is not ready without one). nullptr for a bound socket, which is ready without peers.
  [[nodiscard]] std::shared_ptr<const std::atomic<int>> live_connections() const {
    return bound_.empty() && monitor_ ? monitor_->live_connections() : nullptr;
  }
  // Stops attaching new connections while the ingest thread is away (see keeper_): at shutdown,
  // once the drain has read the socket for the last time, a publisher that connects should hear of
  // no subscriber and keep its events, not hand them to a socket about to close. Idempotent.
  void stop_keeper();
  // The endpoint actually bound (resolves a `*` port), "" if the socket only connects.
  const std::string& bound_endpoint() const { return bound_; }

 private:
  explicit Subscriber(zmq::socket_t socket) : socket_(std::move(socket)) {}
  bool read_all(std::vector<zmq::message_t>& frames, zmq::recv_flags flags);
  void redial_refused();
  void keep_attaching();

  zmq::socket_t socket_;
  std::unique_ptr<ConnectionMonitor> monitor_;  // destroyed before the socket it watches
  std::unique_ptr<AllowListCheck> allow_list_;  // a CURVE server: senders still allowed?
  metrics::Counter* denied_ = nullptr;          // with allow_list_
  std::string bound_;
  bool stopped_at_denials_ = false;
  // libzmq attaches a new connection (and sends it the subscriptions, without which a publisher
  // hears of no subscriber) only while a thread is inside the socket. The ingest thread is not
  // while it runs a slow hook or waits for the spool, so the keeper thread steps in then: every
  // 25 ms it takes the socket, if the ingest thread is not using it, and lets it process its
  // commands. One mutex serializes the two (ZeroMQ allows a socket to change threads across a
  // full memory barrier). Found in an exploratory run: a hook that took 2 s held every
  // `hookgate publish` of a new connection for 2 s, and one past 3 s failed them.
  std::mutex socket_mu_;
  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;
  bool keeper_stop_ = false;
  std::thread keeper_;
};

}  // namespace hookgate::bus
