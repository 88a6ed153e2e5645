#include "bus/subscriber.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <system_error>

#include "bus/curve.hpp"
#include "bus/wire.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/thread_name.hpp"

namespace hookgate::bus {

Result<std::unique_ptr<Subscriber>> Subscriber::open(zmq::context_t& ctx,
                                                     const config::BusConfig& cfg) {
  try {
    // Each queued message gets its own copy instead of holding on to the 8 KiB read buffer it
    // arrived in (found in a soak: events arriving one per read while hooks were slow cost about
    // 8 KiB each, up to 160 MiB at the default receive_hwm; measured 28 MiB against 9 MiB for
    // 20,000 queued 300-byte events). Read by the socket at its creation. A libzmq without the
    // option (it is a draft one: ZMQ_ZERO_COPY_RECV) refuses it and keeps zero-copy.
    (void)zmq_ctx_set(ctx.handle(), kZmqZeroCopyRecv, 0);
    zmq::socket_t sock(ctx, zmq::socket_type::sub);
    // Frames up to twice the limit are received and rejected by the decoder (a diagnostic, a
    // counter, nothing else lost); only larger ones make ZeroMQ drop the connection, which also
    // loses whatever that publisher had in flight behind it. See docs/design.md "Bus".
    sock.set(zmq::sockopt::maxmsgsize, kOversizeHardCapFactor * cfg.max_message_bytes);
    sock.set(zmq::sockopt::rcvhwm, cfg.receive_hwm);
    sock.set(zmq::sockopt::linger, 0);
    set_transport_options(sock, cfg.connect, cfg.bind);
    if (cfg.curve.client_mode()) {
      auto server = read_server_key(cfg.curve.server_key);
      if (!server) return make_error("bus.curve.server_key: " + server.error().message);
      auto own = read_key_file(cfg.curve.secret_key_file);
      if (!own) return make_error("bus.curve.secret_key_file: " + own.error().message);
      if (auto st = configure_curve_client(sock, *server, *own); !st)
        return make_error("bus.curve: " + st.error().message);
    } else if (cfg.curve.enabled) {
      if (auto st = configure_curve_server(ctx, sock, cfg.curve); !st) return st.error();
    }
    for (const auto& topic : cfg.topics) sock.set(zmq::sockopt::subscribe, topic);
    std::unique_ptr<Subscriber> sub(new Subscriber(std::move(sock)));
    if (cfg.curve.enabled && !cfg.curve.client_mode()) {
      sub->allow_list_ = std::make_unique<AllowListCheck>(ctx, kPublisherDomain);
      // Registered now, so /metrics shows it (at 0) before the first refusal.
      sub->denied_ = &metrics::counter(
          "hookgate_bus_messages_denied_total",
          "Bus messages refused because the sender's CURVE key left bus.curve.allowed_clients "
          "after it connected, or came over a connection the allow-list did not vet");
    }
    // Before any bind or connect, so the first handshake is watched too.
    auto monitor = ConnectionMonitor::watch(ctx, sub->socket_, cfg.connect, cfg.bind.has_value(),
                                            cfg.curve.enabled && !cfg.curve.client_mode());
    if (!monitor) return monitor.error();
    sub->monitor_ = std::move(monitor.value());
    if (cfg.bind) {
      if (auto st = bind_explained(sub->socket_, *cfg.bind, "bus socket"); !st) return st.error();
      sub->bound_ = sub->socket_.get(zmq::sockopt::last_endpoint);
    }
    for (const auto& ep : cfg.connect) {
      try {
        sub->socket_.connect(ep);
      } catch (const zmq::error_t& e) {
        return make_error("cannot connect bus socket to " + ep + ": " + e.what());
      }
    }
    // Last: from here on it shares the socket with the ingest thread, under socket_mu_.
    try {
      sub->keeper_ = std::thread([s = sub.get()] { s->keep_attaching(); });
    } catch (const std::system_error& e) {  // a thread limit: said, not an abort
      return make_error(std::string("bus socket: cannot start its keeper thread: ") + e.what());
    }
    return sub;
  } catch (const zmq::error_t& e) {
    return make_error(std::string("bus socket: ") + e.what());
  }
}

namespace {

// A signal handler anywhere in the process (a native hook's SIGALRM, a profiler's SIGPROF) makes
// libzmq's poll and receive fail with EINTR even under SA_RESTART; cppzmq throws it. It only
// means "try again", so it must not end the ingest thread.
bool interrupted(const zmq::error_t& e) {
  return e.num() == EINTR;
}

}  // namespace

Subscriber::~Subscriber() {
  stop_keeper();
}

void Subscriber::stop_keeper() {
  {
    std::lock_guard lock(keeper_mu_);
    keeper_stop_ = true;
  }
  keeper_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

void Subscriber::keep_attaching() {
  name_this_thread("hg-bus-keeper");
  std::unique_lock stop_lock(keeper_mu_);
  while (!keeper_cv_.wait_for(stop_lock, std::chrono::milliseconds(25),
                              [this] { return keeper_stop_; })) {
    std::unique_lock socket_lock(socket_mu_, std::try_to_lock);
    if (!socket_lock.owns_lock()) continue;  // the ingest thread is in the socket: it does this
    try {
      (void)socket_.get(zmq::sockopt::events);  // processes pending commands: attaches, subscribes
    } catch (const zmq::error_t&) {
      // EINTR, or a context being terminated: the next round, or the stop, follows.
    }
  }
}

bool Subscriber::read_all(std::vector<zmq::message_t>& frames, zmq::recv_flags flags) {
  constexpr int kMaxDeniedPerRead = 1000;
  int denied = 0;
  stopped_at_denials_ = false;
  for (;;) {
    frames.clear();
    zmq::message_t msg;
    try {
      if (!socket_.recv(msg, flags)) return false;
    } catch (const zmq::error_t& e) {
      if (!interrupted(e)) throw;
      return false;
    }
    bool more = msg.more();
    frames.push_back(std::move(msg));
    while (more) {
      zmq::message_t part;
      for (;;) {  // parts of one message arrive together, so this never waits
        try {
          (void)socket_.recv(part);
          break;
        } catch (const zmq::error_t& e) {
          if (!interrupted(e)) throw;
        }
      }
      more = part.more();
      // A message of more than two frames is rejected whatever they hold: keep one too many to
      // say so, not millions of empty frames a hostile sender strung together.
      if (frames.size() <= kMaxMessageFrames) frames.push_back(std::move(part));
    }
    if (!allow_list_ || allow_list_->allows(frames.front())) return true;
    denied_->inc();  // and on to the next message, which may be allowed
    // But not endlessly: a revoked publisher that keeps sending would hold the ingest loop here,
    // away from its stop and reload checks.
    if (++denied >= kMaxDeniedPerRead) {
      stopped_at_denials_ = true;
      return false;
    }
    flags = zmq::recv_flags::dontwait;
  }
}

void Subscriber::redial_refused() {
  for (const auto& endpoint : monitor_->take_due_redials(std::chrono::steady_clock::now()))
    if (auto st = redial(socket_, endpoint); !st) spdlog::error("bus: {}", st.error().message);
}

bool Subscriber::receive(std::vector<zmq::message_t>& frames, std::chrono::milliseconds timeout) {
  std::lock_guard socket_lock(socket_mu_);
  redial_refused();
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  // The whole timeout, signals or not: the shutdown drain reads "nothing within it" as quiet.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto left = timeout;;) {
    try {
      if (zmq::poll(&item, 1, left) <= 0) return false;
      break;
    } catch (const zmq::error_t& e) {
      if (!interrupted(e)) throw;
      left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
    }
  }
  return read_all(frames, zmq::recv_flags::dontwait);
}

bool Subscriber::try_receive(std::vector<zmq::message_t>& frames) {
  std::lock_guard socket_lock(socket_mu_);
  return read_all(frames, zmq::recv_flags::dontwait);
}

}  // namespace hookgate::bus
