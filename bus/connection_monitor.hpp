#pragma once
// Says what ZeroMQ keeps to itself on the gateway's bus socket. A CURVE handshake that fails (a
// wrong bus.curve.server_key, a key the proxy's --allowed-subscribers lacks) otherwise leaves a
// gateway that receives nothing and logs nothing, and a `bus.connect` peer that went away is
// only noticed when events stop. Each failed handshake is counted in
// hookgate_bus_handshake_failures_total and logged (at most 5 lines a second); on connect
// endpoints, drops and (re)connections are logged too. A peer connecting to a bound socket and
// leaving again is routine (`hookgate publish` does it every time) and is not logged.
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bus/redial.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::bus {

class ConnectionMonitor {
 public:
  // Watches `socket` (which must outlive the monitor) until destroyed. `connect_endpoints` are the
  // socket's connect endpoints, `binds` whether it also binds; `curve_server` says ZAP already
  // logs refused clients.
  static Result<std::unique_ptr<ConnectionMonitor>> watch(
      zmq::context_t& ctx, zmq::socket_t& socket, std::vector<std::string> connect_endpoints,
      bool binds, bool curve_server);
  ~ConnectionMonitor();
  ConnectionMonitor(const ConnectionMonitor&) = delete;
  ConnectionMonitor& operator=(const ConnectionMonitor&) = delete;

  // The connect endpoints (as configured) whose handshake was refused and whose back-off has
  // passed: the socket's owner redial()s them (RedialSchedule).
  [[nodiscard]] std::vector<std::string> take_due_redials(
      std::chrono::steady_clock::time_point now) {
    return redials_.take_due(now);
  }
  // How many connect endpoints have a live connection now (handshake done, not lost since); set
  // by the monitor's thread, readable from any thread for as long as the holder keeps it.
  [[nodiscard]] std::shared_ptr<const std::atomic<int>> live_connections() const {
    return live_count_;
  }

 private:
  ConnectionMonitor(zmq::socket_t& watched, zmq::socket_t events,
                    std::vector<std::string> connect_endpoints, bool binds, bool curve_server);
  void run();
  void report(uint16_t event, uint32_t value, const std::string& endpoint);
  void redial_abandoned(std::chrono::steady_clock::time_point now);

  zmq::socket_t& watched_;
  zmq::socket_t events_;  // the PAIR end of zmq_socket_monitor()
  const std::vector<std::string> connect_endpoints_;
  // Every event is about a connect endpoint: libzmq names a reconnection by the address it
  // resolved (tcp://10.0.0.5:5557 for tcp://bus-proxy:5557), which no longer matches the list.
  const bool connects_only_;
  const bool curve_server_;
  RedialSchedule redials_;
  // Connected peers, by the address the events name (the same for a connection's handshake and
  // its loss); the monitor's thread alone touches the set.
  std::set<std::string> live_;
  // Configured connect endpoints whose live connection ended, and since when: libzmq dials again
  // after a dropped connection (CONNECT_RETRIED says so), but not after a protocol error (a frame
  // over ZMQ_MAXMSGSIZE), which would leave the socket deaf. Monitor thread only.
  std::map<std::string, std::chrono::steady_clock::time_point> ended_;
  const std::shared_ptr<std::atomic<int>> live_count_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hookgate::bus
