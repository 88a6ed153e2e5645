#include "bus/proxy.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "bus/subscriber.hpp"
#include "bus/wire.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::bus {

namespace {
// Messages moved from one side before the other side, a stop or a reload get a look.
constexpr int kForwardBatch = 1000;
}  // namespace

Proxy::Proxy(const ProxyOptions& options) : options_(options) {}

Proxy::~Proxy() = default;

Result<std::unique_ptr<Proxy>> Proxy::start(const ProxyOptions& options) {
  std::unique_ptr<Proxy> proxy(new Proxy(options));
  try {
    zmq::socket_t frontend(proxy->ctx_, zmq::socket_type::xsub);
    frontend.set(zmq::sockopt::linger, 0);
    frontend.set(zmq::sockopt::rcvhwm, options.hwm);
    set_transport_options(frontend, {}, options.frontend);
    // Like the gateway's own socket: frames up to twice the limit pass, so a slightly oversize
    // event is rejected (and counted) by the gateway instead of cutting its publisher's
    // connection here, with whatever was queued behind it.
    frontend.set(zmq::sockopt::maxmsgsize, kOversizeHardCapFactor * options.max_message_bytes);
    if (proxy->curve()) {
      // Read once: a reload re-reads the allow-lists, never the key (a rotated key file must not
      // give one side a new key the clients do not know).
      auto keys = read_key_file(options.secret_key_file);
      if (!keys) return keys.error();
      if (keys->secret_key.empty())
        return make_error("key file " + options.secret_key_file + " has no secret key");
      proxy->secret_key_ = keys->secret_key;
      const config::CurveConfig publishers{true, options.secret_key_file,
                                           options.allowed_publishers};
      if (auto st = ensure_zap_authenticator(proxy->ctx_, publishers, kPublisherDomain); !st)
        return st.error();
      auto subscriber_keys = read_allowed_clients(options.allowed_subscribers);
      if (!subscriber_keys) return subscriber_keys.error();
      proxy->subscriber_keys_ = subscriber_keys.value();
      if (auto st = ensure_zap_authenticator(proxy->ctx_, std::move(subscriber_keys.value()),
                                             kSubscriberDomain);
          !st)
        return st.error();
      proxy->make_curve_server(frontend, kPublisherDomain);
      proxy->publisher_check_ = std::make_unique<AllowListCheck>(proxy->ctx_, kPublisherDomain);
    }
    if (auto st = bind_explained(frontend, options.frontend, "the frontend"); !st)
      return st.error();
    proxy->frontend_endpoint_ = frontend.get(zmq::sockopt::last_endpoint);
    proxy->frontend_ = std::move(frontend);
    auto monitor =
        ConnectionMonitor::watch(proxy->ctx_, proxy->frontend_, {}, true, proxy->curve());
    if (!monitor) return monitor.error();
    proxy->frontend_monitor_ = std::move(monitor.value());
    if (auto st = proxy->open_backend(); !st) return st.error();
    // A rebind binds the same endpoint again, so these stay right (run() rewrites
    // backend_endpoint_, which the admin thread therefore does not read).
    proxy->status_endpoints_ = {proxy->frontend_endpoint_, proxy->backend_endpoint_};
  } catch (const zmq::error_t& e) {
    return make_error(std::string("bus proxy: ") + e.what());
  }
  return proxy;
}

void Proxy::make_curve_server(zmq::socket_t& socket, const char* domain) const {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, secret_key_);
  socket.set(zmq::sockopt::zap_domain, domain);
}

Status Proxy::open_backend() {
  // Made and configured before the old socket closes (those steps read no file, so they fail only
  // when ZeroMQ cannot make a socket; run() then stops the proxy with the reason).
  zmq::socket_t backend(ctx_, zmq::socket_type::xpub);
  backend.set(zmq::sockopt::linger, 0);
  backend.set(zmq::sockopt::sndhwm, options_.hwm);
  // It receives only subscriptions: a longer frame is an attack on memory (config.hpp), which
  // would also be forwarded to every publisher.
  backend.set(zmq::sockopt::maxmsgsize, config::kMaxSubscriptionFrameBytes);
  set_transport_options(backend, {},
                        backend_endpoint_.empty() ? options_.backend : backend_endpoint_);
  if (curve()) make_curve_server(backend, kSubscriberDomain);
  const bool rebind = !backend_endpoint_.empty();
  if (rebind) {
    backend_monitor_.reset();
    backend_.close();
  }
  const std::string endpoint = rebind ? backend_endpoint_ : options_.backend;
  if (!rebind) {
    if (auto st = bind_explained(backend, endpoint, "the backend"); !st) return st.error();
  } else {
    // tcp:// only (an ipc:// backend is never rebound). The old socket's listener closes in
    // ZeroMQ's I/O thread, a moment after close().
    for (int attempt = 0;; ++attempt) {
      try {
        backend.bind(endpoint);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || attempt >= 100)
          return make_error("cannot bind the backend to " + endpoint + ": " + e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  backend_endpoint_ = backend.get(zmq::sockopt::last_endpoint);
  backend_ = std::move(backend);
  auto monitor = ConnectionMonitor::watch(ctx_, backend_, {}, true, curve());
  if (!monitor) return monitor.error();
  backend_monitor_ = std::move(monitor.value());
  return {};
}

Status Proxy::run() {
  spdlog::info("bus proxy: publications wait until a subscriber connects");
  running_ = true;
  struct NotRunning {
    std::atomic<bool>& flag;
    ~NotRunning() { flag = false; }
  } not_running{running_};
  while (!stop_) {
    if (reload_.exchange(false)) {
      try {
        if (auto st = reload(); !st) return st;
      } catch (const zmq::error_t& e) {  // a socket that cannot be made (out of descriptors)
        return make_error(std::string("bus proxy: reload: ") + e.what());
      }
      reloads_.fetch_add(1, std::memory_order_release);
    }
    if (hold_until_ && std::chrono::steady_clock::now() >= *hold_until_) {
      holding_ = false;
      hold_until_.reset();
      spdlog::info("bus proxy: passing publications on");
    }
    // For the admin thread, as of this pass (the last batch's subscriptions included).
    holding_now_.store(holding_, std::memory_order_relaxed);
    prefixes_now_.store(subscribed_prefixes_.size(), std::memory_order_relaxed);
    zmq::pollitem_t items[] = {{frontend_.handle(), 0, holding_ ? short{0} : short{ZMQ_POLLIN}, 0},
                               {backend_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      if (zmq::poll(items, 2, std::chrono::milliseconds(100)) <= 0) continue;
      if (items[0].revents & ZMQ_POLLIN)
        for (int i = 0; i < kForwardBatch; ++i)
          if (!forward_one(frontend_, backend_, publisher_check_.get())) break;
      // Subscriptions upstream: a subscriber is judged by ZAP when it connects (see reload()).
      // Unsubscribes go up only when libzmq says a prefix lost its last subscriber (one a peer
      // sends could cancel another peer's subscription: is_unsubscribe_from_a_peer).
      if (items[1].revents & ZMQ_POLLIN)
        for (int i = 0; i < kForwardBatch; ++i)
          if (!forward_subscription()) break;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return make_error(std::string("bus proxy: ") + e.what());
    }
  }
  return {};
}

bool Proxy::forward_one(zmq::socket_t& from, zmq::socket_t& to, AllowListCheck* check) {
  zmq::message_t part;
  if (!from.recv(part, zmq::recv_flags::dontwait)) return false;
  const bool allowed = check == nullptr || check->allows(part);
  bool more = part.more();
  for (;;) {
    // XPUB drops a whole message at its high-water mark rather than block; XSUB never blocks.
    if (allowed) (void)to.send(part, more ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (!more) break;
    (void)from.recv(part);  // the parts of one message arrive together
    more = part.more();
  }
  if (allowed)
    forwarded_.fetch_add(1, std::memory_order_relaxed);
  else
    denied_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::string Proxy::metrics_text() const {
  std::string out;
  auto series = [&](const char* name, const char* type, const char* help, uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(value) + "\n";
  };
  series("hookgate_proxy_publications_forwarded_total", "counter",
         "Publications passed from the publishers' side to the subscribers' side (each "
         "subscriber's queue may still drop one at --hwm: the gateway counts those as gaps)",
         publications_forwarded());
  series("hookgate_proxy_publications_denied_total", "counter",
         "Publications refused because their sender's key left --allowed-clients",
         publications_denied());
  series("hookgate_proxy_unsubscribes_ignored_total", "counter",
         "Unsubscribes a subscriber sent itself, not passed to the publishers",
         unsubscribes_ignored());
  series("hookgate_proxy_reloads_total", "counter", "SIGHUP reloads of the allow-lists", reloads());
  series("hookgate_proxy_backend_rebinds_total", "counter",
         "Reloads that rebound the subscribers' side to cut off a removed key", backend_rebinds());
  series("hookgate_proxy_subscribed_prefixes", "gauge",
         "Topic prefixes the subscribers' side has a subscriber for",
         prefixes_now_.load(std::memory_order_relaxed));
  series("hookgate_proxy_holding", "gauge",
         "1 while publications wait for a subscriber (at start and after a rebind, until one has "
         "stayed a second)",
         holding_now_.load(std::memory_order_relaxed) ? 1 : 0);
  return out;
}

std::string Proxy::status_json() const {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("frontend");
  w.String(status_endpoints_.first.c_str());
  w.Key("backend");
  w.String(status_endpoints_.second.c_str());
  w.Key("curve");
  w.Bool(curve());
  w.Key("running");
  w.Bool(running());
  w.Key("holding");
  w.Bool(holding_now_.load(std::memory_order_relaxed));
  w.Key("subscribed_prefixes");
  w.Uint64(prefixes_now_.load(std::memory_order_relaxed));
  w.Key("publications_forwarded");
  w.Uint64(publications_forwarded());
  w.Key("publications_denied");
  w.Uint64(publications_denied());
  w.EndObject();
  return buf.GetString();
}

namespace {
// "everything", or the prefix quoted, for the subscription log lines.
std::string describe_prefix(const std::string& prefix) {
  return prefix.empty() ? std::string("everything") : "'" + display_text(prefix) + "'";
}
}  // namespace

bool Proxy::forward_subscription() {
  zmq::message_t part;
  if (!backend_.recv(part, zmq::recv_flags::dontwait)) return false;
  const unsigned char first =
      part.size() > 0 ? *static_cast<const unsigned char*>(part.data()) : 0xff;
  const bool subscription = !part.more() && (first == 0 || first == 1);
  while (part.more()) (void)backend_.recv(part);  // the parts of one message arrive together
  if (!subscription) return true;  // a subscriber's own message upstream: publishers take none
  if (is_unsubscribe_from_a_peer(part)) {
    unsubscribes_ignored_.fetch_add(1, std::memory_order_relaxed);
    static LogLimiter log_limit{1, "bus proxy: unsubscribes from peers"};
    const char* address = zmq_msg_gets(part.handle(), "Peer-Address");
    if (log_limit.allow())
      spdlog::warn(
          "bus proxy: a subscriber at {} sent an unsubscribe; not passed on (its topic stays "
          "asked for upstream until the proxy restarts)",
          address ? address : "a local socket");
    return true;
  }
  const std::string prefix(static_cast<const char*>(part.data()) + 1, part.size() - 1);
  if (first == 0) {  // libzmq's own: the prefix's last subscriber left
    spdlog::info("bus proxy: the last subscriber to {} left; publishers are told",
                 describe_prefix(prefix));
    subscribed_prefixes_.erase(prefix);
    if (hold_until_ && subscribed_prefixes_.empty()) {
      hold_until_.reset();
      spdlog::info("bus proxy: no subscriber is left; publications wait for the next");
    }
  }
  // Who: libzmq passes on only a prefix's first subscription, so this names the subscriber that
  // brought it (found in a platform engineer's pass: "which gateway came back?").
  const char* peer = first == 1 ? zmq_msg_gets(part.handle(), "Peer-Address") : nullptr;
  const std::string who = peer ? std::string("at ") + peer : "on a local socket";
  const bool new_prefix = first == 1 && subscribed_prefixes_.insert(prefix).second;
  (void)frontend_.send(part, zmq::send_flags::none);
  if (holding_ && !hold_until_ && first == 1) {  // `part` itself is gone: send() took it
    hold_until_ = std::chrono::steady_clock::now() + kSettle;
    spdlog::info(
        "bus proxy: a subscriber {} is connected; publications go on in {} ms, once the others "
        "had time to subscribe",
        who, kSettle.count());
  } else if (new_prefix) {
    spdlog::info("bus proxy: a subscriber {} asks for {}; publishers are told", who,
                 describe_prefix(prefix));
  }
  return true;
}

Status Proxy::reload() {
  if (!curve()) {
    spdlog::info("bus proxy: reload: no CURVE allow-lists to re-read");
    return {};
  }
  const config::CurveConfig publishers{true, options_.secret_key_file, options_.allowed_publishers};
  if (auto st = ensure_zap_authenticator(ctx_, publishers, kPublisherDomain); !st)
    spdlog::error("bus proxy: reload: --allowed-clients {}: {}; keeping the running list",
                  options_.allowed_publishers, st.error().message);
  else
    spdlog::info("bus proxy: publisher allow-list re-read from {}", options_.allowed_publishers);

  auto subscribers = read_allowed_clients(options_.allowed_subscribers);
  if (!subscribers) {
    spdlog::error("bus proxy: reload: --allowed-subscribers {}: {}; keeping the running list",
                  options_.allowed_subscribers, subscribers.error().message);
    return {};
  }
  // The list compared below is the one installed: one read, not two of a file being edited.
  if (auto st = ensure_zap_authenticator(ctx_, subscribers.value(), kSubscriberDomain); !st) {
    spdlog::error("bus proxy: reload: --allowed-subscribers {}: {}; keeping the running list",
                  options_.allowed_subscribers, st.error().message);
    return {};
  }
  const bool removed =
      std::any_of(subscriber_keys_.begin(), subscriber_keys_.end(),
                  [&](const std::string& key) { return !subscribers->count(key); });
  subscriber_keys_ = std::move(subscribers.value());
  if (!removed) {
    spdlog::info("bus proxy: subscriber allow-list re-read from {}", options_.allowed_subscribers);
    return {};
  }
  // ipc:// cannot be rebound safely: the old listener's asynchronous close unlinks the socket
  // file the new one has just made.
  if (backend_endpoint_.rfind("tcp://", 0) != 0) {
    spdlog::warn(
        "bus proxy: a key left --allowed-subscribers, but {} is not TCP and is not rebound: that "
        "subscriber keeps its open connection until it reconnects; restart the proxy to cut it "
        "off",
        backend_endpoint_);
    return {};
  }
  // A removed subscriber keeps receiving over the connection it has, and XPUB cannot leave one
  // peer out. Closing the backend makes every subscriber reconnect, and ZAP judges each again.
  // Subscriptions already forwarded upstream stay there: publishers may keep sending a topic
  // nobody wants any more, which XPUB drops.
  spdlog::warn(
      "bus proxy: a key left --allowed-subscribers: rebinding {} so every subscriber reconnects "
      "and is judged by the new list (publications wait until the first is back, and a second "
      "longer; a subscriber back later than that misses what went out meanwhile)",
      backend_endpoint_);
  if (auto st = open_backend(); !st) return st;
  holding_ = true;  // until subscribers are back on the new backend
  hold_until_.reset();
  subscribed_prefixes_.clear();  // a new socket: its subscribers subscribe afresh
  rebinds_.fetch_add(1, std::memory_order_release);
  return {};
}

}  // namespace hookgate::bus
