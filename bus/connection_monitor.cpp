#include "bus/connection_monitor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/thread_name.hpp"

namespace hookgate::bus {
namespace {

constexpr int kWatchedEvents =
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
    ZMQ_EVENT_CONNECT_RETRIED |
    ZMQ_EVENT_MONITOR_STOPPED;  // wakes the thread at once when the monitor stops

// How long after a connection ends libzmq has to say it dials again (it says so at once, and the
// monitor looks every 100 ms) before the endpoint counts as abandoned.
constexpr auto kRedialGrace = std::chrono::milliseconds(250);
// The first redial of an abandoned endpoint: it was connected, so nothing says it would refuse.
// Every event from every publisher behind that proxy is lost until then (found in a publisher's
// test: 2 s dark after one oversize frame); a peer that keeps breaking ZMTP still backs off.
constexpr auto kFirstRedialAfterProtocolError = std::chrono::milliseconds(100);

std::atomic<uint64_t> g_monitors{0};

std::string redial_plan(std::optional<std::chrono::milliseconds> delay) {
  if (!delay)
    return "restart the gateway once that is fixed (libzmq does not dial again after a "
           "refusal, and this endpoint's name does not match one in bus.connect)";
  return "dialling again in " + (delay->count() < 1000
                                     ? std::to_string(delay->count()) + " ms"
                                     : std::to_string(delay->count() / 1000) + " s");
}

}  // namespace

namespace {
metrics::Counter& handshake_failures() {
  static auto& counter =
      metrics::counter("hookgate_bus_handshake_failures_total",
                       "Bus connections whose ZeroMQ/CURVE handshake failed (either side)");
  return counter;
}
}  // namespace

Result<std::unique_ptr<ConnectionMonitor>> ConnectionMonitor::watch(
    zmq::context_t& ctx, zmq::socket_t& socket, std::vector<std::string> connect_endpoints,
    bool binds, bool curve_server) {
  const std::string address = "inproc://hookgate-bus-monitor-" + std::to_string(++g_monitors);
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kWatchedEvents) != 0)
    return make_error(std::string("cannot monitor the bus socket: ") + zmq_strerror(zmq_errno()));
  try {
    zmq::socket_t events(ctx, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(address);
    return std::unique_ptr<ConnectionMonitor>(new ConnectionMonitor(
        socket, std::move(events), std::move(connect_endpoints), binds, curve_server));
  } catch (const zmq::error_t& e) {
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    return make_error(std::string("cannot monitor the bus socket: ") + e.what());
  }
}

ConnectionMonitor::ConnectionMonitor(zmq::socket_t& watched, zmq::socket_t events,
                                     std::vector<std::string> connect_endpoints, bool binds,
                                     bool curve_server)
    : watched_(watched),
      events_(std::move(events)),
      connect_endpoints_(std::move(connect_endpoints)),
      connects_only_(!binds && !connect_endpoints_.empty()),
      curve_server_(curve_server) {
  // Served from the start: a counter that first appears above 0 loses that rise in increase().
  (void)handshake_failures();
  thread_ = std::thread([this] {
    name_this_thread("hg-bus-monitor");
    run();
  });
}

ConnectionMonitor::~ConnectionMonitor() {
  stop_ = true;
  zmq_socket_monitor(watched_.handle(), nullptr, 0);  // its MONITOR_STOPPED event wakes run()
  if (thread_.joinable()) thread_.join();
}

void ConnectionMonitor::run() {
  while (!stop_) {
    try {
      zmq::pollitem_t item{events_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) > 0)
        if (auto e = read_monitor_event(events_)) report(e->event, e->value, e->endpoint);
      redial_abandoned(std::chrono::steady_clock::now());
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      spdlog::warn("bus: connection monitor stopping: {}", e.what());
      return;
    }
  }
}

void ConnectionMonitor::redial_abandoned(std::chrono::steady_clock::time_point now) {
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (now - it->second < kRedialGrace) {
      ++it;
      continue;
    }
    const auto delay = redials_.schedule(it->first, kFirstRedialAfterProtocolError);
    spdlog::error(
        "bus: libzmq will not dial {} again: the connection ended with a protocol error (a "
        "message with a frame over twice bus.max_message_bytes, or a peer that broke ZMTP); {}",
        it->first, redial_plan(delay));
    it = ended_.erase(it);
  }
}

void ConnectionMonitor::report(uint16_t event, uint32_t value, const std::string& endpoint) {
  auto& failures = handshake_failures();
  static LogLimiter log_limit{5, "bus: connection lines"};
  // When the configured endpoint it names is due to be dialled again; nullopt if it names none.
  auto schedule_redial = [this](const std::string& ep) -> std::optional<std::chrono::milliseconds> {
    const std::string* configured = connect_endpoint_named(connect_endpoints_, !connects_only_, ep);
    if (!configured) return std::nullopt;
    return redials_.schedule(*configured);
  };
  const bool ours =
      connects_only_ || std::find(connect_endpoints_.begin(), connect_endpoints_.end(), endpoint) !=
                            connect_endpoints_.end();
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: {
      failures.inc();
      const auto next_dial = ours ? schedule_redial(endpoint) : std::nullopt;
      // A CURVE server's refusals are logged by its ZAP handler, with the key.
      if ((ours || !curve_server_) && log_limit.allow())
        spdlog::error(
            "bus: {} refused this gateway's CURVE key (ZAP status {}): list its public key "
            "where that side allows subscribers (a proxy's --allowed-subscribers); {}",
            endpoint, value, redial_plan(next_dial));
      break;
    }
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: {
      failures.inc();
      const auto next_dial = ours ? schedule_redial(endpoint) : std::nullopt;
      if (log_limit.allow())
        spdlog::error(
            "bus: handshake {} {} failed (ZMTP protocol error 0x{:x}): a wrong CURVE server key, "
            "or a peer that is not a ZeroMQ bus socket with the same security settings{}",
            ours ? "with" : "on", endpoint, value, ours ? "; " + redial_plan(next_dial) : "");
      break;
    }
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      // On a bound socket this is also every TCP health probe that connects and closes.
      if (!ours) break;
      failures.inc();
      if (log_limit.allow())
        spdlog::error(
            "bus: handshake with {} failed: {} (with CURVE: a wrong server key, or a key the "
            "other side does not list)",
            endpoint, zmq_strerror(static_cast<int>(value)));
      break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      if (ours) {
        if (const std::string* configured =
                connect_endpoint_named(connect_endpoints_, !connects_only_, endpoint)) {
          redials_.forget(*configured);
          ended_.erase(*configured);
        }
        spdlog::info("bus: connected to {}", endpoint);
        live_.insert(endpoint);
        live_count_->store(static_cast<int>(live_.size()));
      }
      break;
    case ZMQ_EVENT_DISCONNECTED:
      // Also the end of a refused handshake, which was never counted as live (and is dialled
      // again above).
      if (ours && live_.erase(endpoint) > 0) {
        live_count_->store(static_cast<int>(live_.size()));
        if (const std::string* configured =
                connect_endpoint_named(connect_endpoints_, !connects_only_, endpoint))
          ended_.emplace(*configured, std::chrono::steady_clock::now());
      }
      if (ours && log_limit.allow())
        spdlog::warn("bus: connection to {} lost; reconnecting", endpoint);
      break;
    case ZMQ_EVENT_CONNECT_RETRIED:  // libzmq dials again by itself
      if (const std::string* configured =
              connect_endpoint_named(connect_endpoints_, !connects_only_, endpoint))
        ended_.erase(*configured);
      else
        // A host name's retry names the address it resolved, which cannot be told apart among
        // several endpoints: a redial of the wrong one would cut a healthy connection, so none
        // is made (a protocol error within the same second goes without one).
        ended_.clear();
      break;
    default:
      break;
  }
}

}  // namespace hookgate::bus
