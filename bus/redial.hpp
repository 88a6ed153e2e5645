#pragma once
// Dialling a refused bus endpoint again. libzmq treats a refused handshake (a CURVE key the other
// side does not list, plain text where CURVE is required) as a protocol error and never dials that
// endpoint again (a wrong server key is not refused but cut off, and libzmq dials again by itself:
// Publisher::connect spaces those dials),
// so a gateway or publisher started before its key was listed would stay deaf until restarted.
// The socket's owner watches its handshakes (zmq_socket_monitor), schedules each refused connect
// endpoint here and redial()s it when due. Used by the gateway's ConnectionMonitor and by the
// publisher client library.
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gateway/common/result.hpp"

namespace hookgate::bus {

// One event off a zmq_socket_monitor() PAIR socket, read without waiting; nullopt when none is
// queued (or it is malformed).
struct MonitorEvent {
  uint16_t event = 0;
  uint32_t value = 0;
  std::string endpoint;
};
[[nodiscard]] std::optional<MonitorEvent> read_monitor_event(zmq::socket_t& events);

// When to dial again the connect endpoints whose handshake was refused. Back-off per endpoint: 1 s
// (or `first_wait`), doubling to 30 s, reset by forget() at a successful handshake. Thread-safe;
// take_due() costs one atomic load when nothing is scheduled.
class RedialSchedule {
 public:
  static constexpr std::chrono::milliseconds kFirstWait{1000};
  static constexpr std::chrono::milliseconds kMaxWait{30000};
  // Returns the delay until `endpoint` is due.
  std::chrono::milliseconds schedule(const std::string& endpoint,
                                     std::chrono::milliseconds first_wait = kFirstWait);
  void forget(const std::string& endpoint);
  [[nodiscard]] std::vector<std::string> take_due(std::chrono::steady_clock::time_point now);

 private:
  struct Redial {
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds backoff;
    bool scheduled;
  };
  std::mutex mu_;
  std::map<std::string, Redial> redials_;
  std::atomic<bool> any_scheduled_{false};
};

// The connect endpoint, as configured, that a monitor event's `reported` endpoint names; nullptr
// when it names none. libzmq names a connection by the address it resolved (tcp://10.0.0.5:5557
// for tcp://bus-proxy:5557), which stands for the only endpoint of a socket that does not bind.
[[nodiscard]] const std::string* connect_endpoint_named(const std::vector<std::string>& connects,
                                                        bool binds, const std::string& reported);

// Disconnects and connects `endpoint` on the socket's owning thread.
[[nodiscard]] Status redial(zmq::socket_t& socket, const std::string& endpoint);

}  // namespace hookgate::bus
