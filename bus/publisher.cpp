#include "bus/publisher.hpp"

#include <algorithm>

#include "bus/sequence_gaps.hpp"
#include "bus/wire.hpp"
#include "gateway/common/clock.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/ids.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::bus {

Result<std::unique_ptr<Publisher>> Publisher::connect(PublisherOptions options,
                                                      zmq::context_t* ctx) {
  std::unique_ptr<Publisher> pub(new Publisher());
  try {
    if (!ctx) {
      pub->own_ctx_ = std::make_unique<zmq::context_t>(1);
      ctx = pub->own_ctx_.get();
    }
    pub->socket_ = std::make_unique<zmq::socket_t>(*ctx, zmq::socket_type::xpub);
    auto& s = *pub->socket_;
    s.set(zmq::sockopt::sndhwm, options.send_hwm);
    s.set(zmq::sockopt::linger, 5000);       // flush queued events on close, but never hang forever
    s.set(zmq::sockopt::xpub_nodrop, true);  // a full queue is reported to the caller, not dropped
    // It receives only subscriptions: a longer frame is an attack on memory (config.hpp).
    s.set(zmq::sockopt::maxmsgsize, config::kMaxSubscriptionFrameBytes);
    if (!options.queue_while_disconnected) s.set(zmq::sockopt::immediate, true);
    set_transport_options(s, options.endpoints, options.bind);
    // Half a CURVE setup would connect in plain text, and the bus would refuse it without a
    // word to this side.
    if (options.client_keys.has_value() != !options.server_public_key.empty())
      return make_error(
          "CURVE needs both server_public_key (the bus's public key) and client_keys (this "
          "publisher's keypair)");
    if (options.client_keys) {
      if (auto st = configure_curve_client(s, options.server_public_key, *options.client_keys); !st)
        return st.error();
      // A server that cannot read this publisher's handshake (a wrong server key) closes the
      // connection without a word, which libzmq takes for a dropped one and dials again after
      // ZMQ_RECONNECT_IVL, 100 ms by default: 7 handshakes a second, each logged by the bus, for
      // as long as the key is wrong (found in a platform engineer's pass). Every one to two
      // seconds instead (libzmq adds up to the interval as jitter): a publisher's events queue
      // meanwhile. (Not the gateway's own socket: nothing queues for a SUB socket, and a
      // gateway would miss a second or two of events after each dropped connection.)
      s.set(zmq::sockopt::reconnect_ivl, kCurveClientReconnectMs);
    }
    if (!options.bind && options.endpoints.empty())
      return make_error("publisher needs an endpoint");
    // With CURVE or without: a plain publisher that a CURVE bus refuses learns why too (found
    // in an exploratory run: "is the gateway running?" sent the caller to the wrong place).
    if (!options.endpoints.empty()) {
      // Before the first connect, so its handshake is seen too.
      const std::string address = "inproc://hookgate-publisher-handshakes-" + new_uuid_v7();
      if (zmq_socket_monitor(s.handle(), address.c_str(),
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                 ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
        return make_error(std::string("cannot watch the publisher socket's handshakes: ") +
                          zmq_strerror(zmq_errno()));
      pub->handshakes_ = std::make_unique<zmq::socket_t>(*ctx, zmq::socket_type::pair);
      pub->handshakes_->set(zmq::sockopt::linger, 0);
      // Unbounded: events are read only in publish() and wait_for_subscriber(), and libzmq's
      // I/O thread blocks on a full monitor pipe (stalling every socket of the context).
      pub->handshakes_->set(zmq::sockopt::rcvhwm, 0);
      pub->handshakes_->connect(address);
    }
    // All of them before libzmq, which takes port 99999 as 34463 (found in a platform engineer's
    // pass), and before the socket binds or dials anything.
    for (const auto& ep : options.endpoints)
      if (auto why = tcp_endpoint_problem(ep, false))
        return make_error(std::string(kEndpointRefused) + ep + "': " + *why);
    // Name the endpoint: libzmq says only "Invalid argument" for `localhost:5556`.
    if (options.bind)
      if (auto st = bind_explained(s, *options.bind, "the publisher"); !st) return st.error();
    for (const auto& ep : options.endpoints) {
      try {
        s.connect(ep);
      } catch (const zmq::error_t& e) {
        return make_error(std::string(kEndpointRefused) + ep + "': " + e.what() +
                          " (expected an endpoint such as tcp://127.0.0.1:5556 or "
                          "ipc:///run/hookgate/bus)");
      }
    }
  } catch (const zmq::error_t& e) {
    return make_error(std::string("publisher socket: ") + e.what());
  }
  pub->options_ = std::move(options);
  return pub;
}

Publisher::~Publisher() {
  if (handshakes_) {
    zmq_socket_monitor(socket_->handle(), nullptr, 0);
    handshakes_.reset();
  }
  socket_.reset();
}

void Publisher::follow_handshakes() {
  if (!handshakes_) return;
  while (auto e = read_monitor_event(*handshakes_)) {
    const std::string* configured =
        connect_endpoint_named(options_.endpoints, options_.bind.has_value(), e->endpoint);
    if (e->event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      if (configured) redials_.forget(*configured);
      refusal_.clear();
      continue;
    }
    // A close without detail (a redial the bus dropped) does not replace a reason already known:
    // the mismatch or the refused key says more.
    if (e->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && !refusal_.empty()) {
      if (configured) redials_.schedule(*configured);
      continue;
    }
    // The mismatch is said when libzmq reports it on this side; when the bus closes first (seen
    // behind a proxy now and then) only the close is known.
    if (!options_.client_keys && e->event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
        e->value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
      refusal_ = "the bus at " + e->endpoint +
                 " refused this publisher's plain-text handshake: it requires CURVE (give the "
                 "bus's public key and this publisher's keypair: --server-key and --client-key)";
    else if (!options_.client_keys && e->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
      refusal_ = "the peer at " + e->endpoint +
                 " closed this publisher's plain-text handshake (does the bus require CURVE: "
                 "--server-key and --client-key? is it a gateway's bus.bind or a proxy's "
                 "--frontend?)";
    else if (!options_.client_keys)
      refusal_ = "the handshake with " + e->endpoint +
                 " failed (is it a ZeroMQ bus endpoint: a gateway's bus.bind or a proxy's "
                 "--frontend?)";
    else if (e->event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
      refusal_ = "the bus at " + e->endpoint +
                 " refused this publisher's CURVE key (list its public key in the gateway's "
                 "bus.curve.allowed_clients, or the proxy's --allowed-clients)";
    else if (e->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
      // A bus that cannot open this side's HELLO (sealed to another key) closes without a word:
      // the one CURVE failure that reaches this side with no detail.
      refusal_ = "the bus at " + e->endpoint +
                 " closed the CURVE handshake: is --server-key the bus's public key (the "
                 "gateway's bus.curve.secret_key_file .pub, or the proxy's)?";
    else
      refusal_ = "the CURVE handshake with " + e->endpoint +
                 " failed (a wrong server key, or a peer with other security settings)";
    if (configured) redials_.schedule(*configured);
  }
  for (const auto& endpoint : redials_.take_due(std::chrono::steady_clock::now()))
    (void)redial(*socket_, endpoint);  // a failure shows as the refusal that stays
}

void Publisher::drain_subscriptions(bool handshakes_now) {
  // A plain publisher reads the handshakes while it waits, when it is refused, and once a second
  // (their queue is unbounded: a peer that drops every connection adds ten a second), not at
  // every publish() (a CURVE one redials refused endpoints from here, as it always has).
  const auto now = std::chrono::steady_clock::now();
  if (handshakes_now || options_.client_keys || now - handshakes_read_ >= std::chrono::seconds(1)) {
    handshakes_read_ = now;
    follow_handshakes();
  }
  zmq::message_t msg;
  while (socket_->recv(msg, zmq::recv_flags::dontwait)) {
    // Only a publisher that binds and connects nowhere: one socket cannot tell which way a
    // frame came, and a proxy's genuine unsubscribes carry metadata too.
    if (msg.size() == 0 ||
        (options_.bind && options_.endpoints.empty() && is_unsubscribe_from_a_peer(msg)))
      continue;
    const auto* bytes = static_cast<const char*>(msg.data());
    std::string prefix(bytes + 1, msg.size() - 1);
    auto it = std::find(subscriptions_.begin(), subscriptions_.end(), prefix);
    if (bytes[0] == 1 && it == subscriptions_.end()) subscriptions_.push_back(std::move(prefix));
    if (bytes[0] == 0 && it != subscriptions_.end()) subscriptions_.erase(it);
  }
}

bool Publisher::has_subscriber_for(std::string_view topic) const {
  for (const auto& prefix : subscriptions_)
    if (topic.substr(0, prefix.size()) == prefix) return true;
  return false;
}

bool Publisher::wait_for_subscriber(std::chrono::milliseconds timeout, std::string_view type) {
  // The lock is taken per slice of at most 10 ms, so publish() on other threads waits at most
  // that long, not the whole timeout.
  constexpr auto kSlice = std::chrono::milliseconds(10);
  // Clamped: milliseconds::max() would overflow the clock and return at once (a century is
  // "forever" enough).
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::min<std::chrono::milliseconds>(std::max(timeout, std::chrono::milliseconds(0)),
                                          std::chrono::hours(24 * 365 * 100));
  for (;;) {
    {
      std::lock_guard lock(mu_);
      try {
        drain_subscriptions(/*handshakes_now=*/true);
        if (type.empty() ? !subscriptions_.empty() : has_subscriber_for(type)) return true;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
        (void)zmq::poll(&item, 1, std::min(left, kSlice));
      } catch (const zmq::error_t& e) {
        // A signal handler ran in the caller's process (SIGCHLD...): wait on. Anything else:
        // the context is terminating, and no subscriber will come.
        if (e.num() != EINTR) return false;
      }
    }
  }
}

namespace {
// `data_json` wrapped as {"d": ...}, so the strict envelope parser reads any JSON value. One
// member or nothing: `1,"x":2` would otherwise parse, and lose "x" without a word.
Result<Event> parse_data_json(std::string_view data_json) {
  auto data = Event::parse(std::string("{\"d\":") + std::string(data_json) + "}");
  if (!data) {
    // Parsed again alone (only on this error path), so a syntax error's place is in the
    // caller's text, not in the wrapper.
    auto error = Event::syntax_error(data_json);
    return make_error("data is not valid JSON: " + error.value_or(data.error().message));
  }
  if (data->doc().MemberCount() != 1)
    return make_error("data is not valid JSON: more than one value");
  return data;
}
}  // namespace

Result<size_t> check_data_json(std::string_view data_json) {
  auto data = parse_data_json(data_json);
  if (!data) return data.error();
  constexpr size_t kWrapperBytes = sizeof(R"({"d":})") - 1;
  return data->json_bytes() - kWrapperBytes;
}

Result<Event> Publisher::build_event(std::string_view type, std::string_view data_json,
                                     std::string_view source) const {
  Event ev;
  auto& a = ev.allocator();
  // Top-level members of an object: these sets cannot fail.
  (void)ev.set_string("type", type);
  (void)ev.set_string("source", source.empty() ? std::string_view(options_.source) : source);
  if (!data_json.empty()) {
    auto data = parse_data_json(data_json);
    if (!data) return data.error();
    ev.doc().AddMember("data", JsonValue(data->doc()["d"], a), a);
  }
  return ev;
}

Status Publisher::publish(std::string_view type, std::string_view data_json,
                          std::string_view source) {
  auto ev = build_event(type, data_json, source);
  if (!ev) return ev.error();
  return publish(ev.value());
}

Status Publisher::check(std::string_view type, std::string_view data_json,
                        std::string_view source) {
  auto ev = build_event(type, data_json, source);
  if (!ev) return ev.error();
  std::lock_guard lock(mu_);
  auto frames = encode_locked(ev.value());
  if (!frames) return frames.error();
  return {};
}

Status Publisher::publish(Event& event) {
  // The options' source, as for publish(type, data): normalize() would fill in "unknown" (found
  // in a platform engineer's pass).
  if (const JsonValue* source = event.find("source"); source == nullptr || source->IsNull())
    (void)event.set_string("source", options_.source);
  std::lock_guard lock(mu_);
  try {
    return publish_locked(event);
  } catch (const zmq::error_t& e) {
    return make_error(std::string("bus send failed: ") + e.what());
  }
}

Result<std::vector<zmq::message_t>> Publisher::encode_locked(Event& event) {
  if (auto st = event.normalize(now_unix_ms()); !st) return st.error();
  // The gateway rejects these (and counts them); refusing here tells the caller, not its log.
  if (is_diagnostic_type(event.type()))
    return make_error("type '" + std::string(event.type()) + "': " + kReservedTypeReason);
  if (options_.sequence) {
    if (stream_id_.empty()) stream_id_ = new_uuid_v7();
    (void)event.set_string(kStreamAttribute, stream_id_);  // top-level members: cannot fail
    (void)event.set(kSequenceAttribute, JsonValue(next_seq_));
  }
  std::vector<zmq::message_t> frames;
  encode_message(event, frames);
  const size_t bytes = frames[0].size() + frames[1].size();
  if (options_.max_message_bytes > 0 && bytes > options_.max_message_bytes)
    return make_error("event of " + std::to_string(bytes) + " bytes exceeds max_message_bytes " +
                      std::to_string(options_.max_message_bytes) +
                      " (the gateway's bus.max_message_bytes): nothing was sent");
  // A type or source set from raw bytes: the gateway would refuse the event.
  if (!valid_utf8(frames[0].to_string_view()) || !valid_utf8(frames[1].to_string_view()))
    return make_error(
        "event is not valid UTF-8 (its type, source or another attribute): nothing "
        "was sent");
  return frames;
}

Status Publisher::publish_locked(Event& event) {
  // What the gateway would refuse is said first: no wait for a subscriber can mend it.
  auto frames = encode_locked(event);
  if (!frames) return frames.error();
  drain_subscriptions();
  if (!has_subscriber_for(event.type())) {
    if (!options_.client_keys) follow_handshakes();  // the refusal, if there is one, said now
    const std::string why =
        refusal_.empty() ? "the gateway is not connected, or its bus.topics leave this type out"
                         : refusal_;
    return make_error("no subscriber for '" + std::string(event.type()) + "' on the bus (" + why +
                      "): nothing was sent, retry once one subscribes");
  }
  if (!socket_->send(frames.value()[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
      !socket_->send(frames.value()[1], zmq::send_flags::dontwait))
    return make_error("bus send queue is full (send_hwm reached)");
  last_id_ = std::string(event.id());
  ++next_seq_;
  return {};
}

}  // namespace hookgate::bus
