#include "bus/redial.hpp"

#include <algorithm>
#include <cstring>

namespace hookgate::bus {

std::optional<MonitorEvent> read_monitor_event(zmq::socket_t& events) {
  // An event: 6 bytes (16-bit event, 32-bit value), then the endpoint.
  zmq::message_t head;
  zmq::message_t endpoint;
  if (!events.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
  if (head.more()) (void)events.recv(endpoint, zmq::recv_flags::dontwait);
  if (head.size() < 6) return std::nullopt;
  MonitorEvent e;
  std::memcpy(&e.event, head.data(), sizeof e.event);
  std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, sizeof e.value);
  e.endpoint = endpoint.to_string();
  return e;
}

std::chrono::milliseconds RedialSchedule::schedule(const std::string& endpoint,
                                                   std::chrono::milliseconds first_wait) {
  std::lock_guard lock(mu_);
  auto [it, fresh] = redials_.try_emplace(endpoint, Redial{{}, first_wait, true});
  Redial& r = it->second;
  // Refused again after its redial: wait longer. Refused twice before it (two events for one
  // attempt): the same wait.
  if (!fresh && !r.scheduled) r.backoff = std::min(r.backoff * 2, kMaxWait);
  r.scheduled = true;
  r.due = std::chrono::steady_clock::now() + r.backoff;
  any_scheduled_ = true;
  return r.backoff;
}

void RedialSchedule::forget(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  redials_.erase(endpoint);
  any_scheduled_ = std::any_of(redials_.begin(), redials_.end(),
                               [](const auto& entry) { return entry.second.scheduled; });
}

std::vector<std::string> RedialSchedule::take_due(std::chrono::steady_clock::time_point now) {
  if (!any_scheduled_.load(std::memory_order_relaxed)) return {};
  std::vector<std::string> due;
  std::lock_guard lock(mu_);
  bool pending = false;
  for (auto& [endpoint, r] : redials_) {
    if (!r.scheduled) continue;
    if (r.due <= now) {
      r.scheduled = false;  // the backoff stays, to double at the next refusal
      due.push_back(endpoint);
    } else {
      pending = true;
    }
  }
  any_scheduled_ = pending;
  return due;
}

const std::string* connect_endpoint_named(const std::vector<std::string>& connects, bool binds,
                                          const std::string& reported) {
  auto it = std::find(connects.begin(), connects.end(), reported);
  if (it != connects.end()) return &*it;
  if (!binds && connects.size() == 1) return &connects.front();
  return nullptr;
}

Status redial(zmq::socket_t& socket, const std::string& endpoint) {
  // libzmq ended the session at the refusal but keeps its entry: the disconnect clears it (a
  // no-op for the session itself), so entries do not pile up over many redials.
  zmq_disconnect(socket.handle(), endpoint.c_str());
  try {
    socket.connect(endpoint);
    return {};
  } catch (const zmq::error_t& e) {
    return make_error("cannot dial " + endpoint + " again: " + e.what());
  }
}

}  // namespace hookgate::bus
