#pragma once
// The C++ publisher client library (PRODUCT.md job 1): a service puts an event on the bus in a few
// lines:
//
//   auto pub = hookgate::bus::Publisher::connect({.endpoints = {"tcp://127.0.0.1:5556"}});
//   if (!pub) return report(pub.error().message);
//   if (!pub.value()->wait_for_subscriber(std::chrono::seconds(2), "user.created"))
//     return report("no gateway takes user.created");
//   if (auto sent = pub.value()->publish("user.created", R"({"user":"ann"})"); !sent)
//     return report(sent.error().message);  // not on the bus: retry, or give up and say so
//
// (GCC 12 and 13 warn about that designated initializer under -Wextra,
// -Wmissing-field-initializers, although the fields left out have defaults: set the fields one by
// one to build with -Werror.)
//
// It uses an XPUB socket so it can see when a subscriber (the gateway, or a `hookgate bus` proxy)
// has subscribed: a plain PUB silently drops everything sent before the subscription arrives, which
// loses the first events of short-lived publishers.
#include <zmq.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/curve.hpp"
#include "bus/redial.hpp"
#include "gateway/common/result.hpp"
#include "gateway/event.hpp"

namespace hookgate::bus {

struct PublisherOptions {
  std::vector<std::string> endpoints;  // connect to these (the gateway's bus.bind, or a proxy)
  std::optional<std::string> bind;     // or bind, for gateways that connect to publishers
  std::string source = "unknown";      // CloudEvents `source` unless an event sets its own
  // Stamp hookgatestream/hookgateseq on every event so the gateway can count lost messages
  // (hookgate_bus_messages_dropped_total; bus/sequence_gaps.hpp).
  bool sequence = true;
  int send_hwm = 100000;
  // The gateway's bus.max_message_bytes (default 1 MiB): a larger event is refused here, with the
  // reason, because the gateway would reject it, and above twice the limit its socket would drop
  // this publisher's connection with everything queued behind it. 0 = no check.
  size_t max_message_bytes = 1 << 20;
  // true: while a gateway this publisher connects to is away (restarting), its events queue for
  // it, up to send_hwm, and go out when it is back. Decision: the default, since a restart then
  // loses nothing. But with several `endpoints` one gateway that stays away fills its queue and
  // then every publish() fails, for the healthy gateways too. false (ZMQ_IMMEDIATE): a gateway
  // that is away takes nothing, so publish() fails only once none subscribes ("no subscriber").
  bool queue_while_disconnected = true;
  // CURVE: the server's public key and this client's keypair (all Z85), when the bus requires it.
  std::string server_public_key;
  std::optional<CurveKeypair> client_keys;
};

// Checks that `data_json` is one JSON value (what publish() puts under `data`); the error says
// why it is not. Lets a caller refuse bad data before it connects. Its size in bytes as sent
// (compact: publish() writes the value again without the text's spacing).
[[nodiscard]] Result<size_t> check_data_json(std::string_view data_json);

// How Publisher::connect()'s error begins when libzmq refused an endpoint outright (its form or
// transport: nothing was tried yet), which a caller may report as a usage error.
inline constexpr std::string_view kEndpointRefused = "cannot connect to '";

class Publisher {
 public:
  // Owns its own ZeroMQ context unless one is passed.
  static Result<std::unique_ptr<Publisher>> connect(PublisherOptions options,
                                                    zmq::context_t* ctx = nullptr);
  // Waits up to 5 s (ZMQ_LINGER) for queued events to go out: here with the publisher's own
  // context; with a context passed to connect(), that wait happens when the caller closes it
  // (zmq::context_t::close() or its destructor). An ok publish() means queued in
  // this process, not received: events still queued when that wait ends (a gateway that went
  // away, with queue_while_disconnected) are lost without a word, since ZeroMQ does not say which
  // were sent. A service that must not lose one keeps running until its gateway is back, or
  // records what it published and checks the receiving end.
  ~Publisher();

  // Blocks until a subscriber takes events of `type` (with no type: until any subscriber has
  // subscribed), or the timeout passes. A tap subscribed to other topics does not end the wait for
  // the gateway. An endpoint that refused this publisher's handshake (its CURVE key, or plain
  // text where the bus requires CURVE) is dialled again meanwhile (after 1 s, doubling to 30 s),
  // so listing the key on the other side is enough. With a wrong server key libzmq dials again by
  // itself, every 1 to 2 s (kCurveClientReconnectMs), whether or not this is called.
  // Only here and in publish(): the publisher has no thread of its own.
  [[nodiscard]] bool wait_for_subscriber(std::chrono::milliseconds timeout,
                                         std::string_view type = {});

  // Builds a CloudEvent (specversion, UUIDv7 id, source, time) around `data_json` and sends it.
  // When send_hwm messages are queued it fails at once ("bus send queue is full") rather than
  // dropping or blocking: nothing was sent, retry it. It also fails at once when no subscriber
  // takes this type ("no subscriber for ..."): ZeroMQ would drop the message without a word, as
  // before the first gateway subscribed, after a gateway connected to a binding publisher went
  // away, or when its bus.topics leave the type out (a gateway this publisher connects to keeps
  // its subscription while it restarts: see queue_while_disconnected). Nothing was sent either;
  // retry once one subscribes (wait_for_subscriber).
  //
  // publish() and wait_for_subscriber() may be called from several threads (they take one lock:
  // a ZeroMQ socket is not thread-safe, and the sequence numbers must not repeat).
  [[nodiscard]] Status publish(std::string_view type, std::string_view data_json,
                               std::string_view source = {});
  // Sends a prepared envelope; missing attributes are filled in first (source from the options,
  // a new id, the time) and written into `event`. So publishing the same object again sends the
  // same id: a retry of that event, which receivers deduplicating on id and source drop. For a
  // new event, start from a new Event (or remove its id).
  [[nodiscard]] Status publish(Event& event);
  // What publish() would refuse about this event whatever the bus (bad data, a reserved or too
  // long type, invalid UTF-8, over max_message_bytes), without sending it or waiting: lets a
  // caller say so before wait_for_subscriber() rather than after it.
  [[nodiscard]] Status check(std::string_view type, std::string_view data_json,
                             std::string_view source = {});
  // Why the bus refused this publisher's last handshake ("the bus at EP refused this publisher's
  // CURVE key ...", "... plain-text handshake: it requires CURVE ...", "... closed the CURVE
  // handshake: is --server-key ..."); empty once one succeeds.
  std::string refusal() const {
    std::lock_guard lock(mu_);
    return refusal_;
  }
  // The id of the last event published (by any thread).
  std::string last_id() const {
    std::lock_guard lock(mu_);
    return last_id_;
  }

 private:
  Publisher() = default;
  Result<Event> build_event(std::string_view type, std::string_view data_json,
                            std::string_view source) const;
  // The frames as sent, or why the gateway would refuse them.
  Result<std::vector<zmq::message_t>> encode_locked(Event& event);
  Status publish_locked(Event& event);
  // Reads subscription changes, and the handshake events now, or (a plain publisher with
  // handshakes_now false) at most once a second.
  void drain_subscriptions(bool handshakes_now = false);
  void follow_handshakes();
  mutable std::mutex mu_;
  bool has_subscriber_for(std::string_view topic) const;

  std::unique_ptr<zmq::context_t> own_ctx_;
  std::unique_ptr<zmq::socket_t> socket_;
  // With connect endpoints: the socket's handshake events, so a refused handshake is dialled
  // again (libzmq gives up on it; RedialSchedule) and "no subscriber" can say why. Read only in
  // publish() and wait_for_subscriber() (at most once a second for a plain publisher that has a
  // subscriber): a publisher idle for long beside a peer that drops every connection queues
  // them meanwhile, one per dial.
  std::unique_ptr<zmq::socket_t> handshakes_;
  RedialSchedule redials_;
  std::chrono::steady_clock::time_point handshakes_read_{};  // drain_subscriptions()
  std::string refusal_;  // the last refusal, until a handshake succeeds
  PublisherOptions options_;
  // Topic prefixes subscribed now. The XPUB socket reports a prefix's first subscription and its
  // last unsubscription, so a set follows it exactly.
  std::vector<std::string> subscriptions_;
  std::string last_id_;
  std::string stream_id_;  // random per instance: a restarted publisher is a new stream
  uint64_t next_seq_ = 1;  // advances only when a send succeeds, so a refused send is no gap
};

}  // namespace hookgate::bus
