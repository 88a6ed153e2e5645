#pragma once
// The admin HTTP listener (PRODUCT.md "Operations"): /healthz, /readyz, /metrics, /status.
// Served by libmicrohttpd's own polling thread, so a slow scraper never touches the pipeline.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "gateway/common/result.hpp"

struct MHD_Daemon;
struct MHD_Connection;

namespace hookgate {

struct AdminHandlers {
  std::function<bool()> ready;               // /readyz: 200 when true, else 503
  std::function<std::string()> metrics;      // Prometheus text
  std::function<std::string()> status_json;  // /status
};

// Why the admin endpoint could not listen on `listen`'s address here (not an address of this
// machine), tried on port 0; nullopt when it can, or when `listen` is malformed (the config loader
// reports that). For `hookgate check`.
[[nodiscard]] std::optional<std::string> admin_listen_problem(const std::string& listen);

class AdminServer {
 public:
  // listen: "HOST:PORT" (IPv4 or "[v6]:port"); port 0 picks a free one. A non-empty token is
  // required as "Authorization: Bearer <token>" on /metrics and /status (health probes stay open).
  // `request_deadline`: how long a connection may take to send a request's head (libmicrohttpd's
  // own timeout is per idle period, so a byte every few seconds held a connection forever).
  static Result<std::unique_ptr<AdminServer>> start(
      const std::string& listen, std::string token, AdminHandlers handlers,
      std::chrono::milliseconds request_deadline = std::chrono::seconds(5));
  ~AdminServer();
  int port() const { return port_; }

 private:
  AdminServer() = default;
  friend struct AdminDispatch;
  void cut_slow_requests();
  // Before a new connection from `client` waits for its head: shuts down the oldest waiting one
  // when that client, or everyone, has as many waiting as allowed.
  void make_room_locked(const std::string& client);

  MHD_Daemon* daemon_ = nullptr;
  std::string token_;
  // Connections waiting for a request's head: socket and since when. The deadline thread shuts
  // down those past request_deadline_; an entry goes when the request reaches the handler or the
  // connection closes (libmicrohttpd reports that before it closes the socket).
  struct Reading {
    int fd;
    std::chrono::steady_clock::time_point since;
    std::string client;  // its address, without the port
  };
  std::mutex reading_mu_;
  std::condition_variable reading_cv_;
  using Readings = std::unordered_map<MHD_Connection*, Reading>;
  Readings reading_;
  bool stopping_ = false;
  std::chrono::milliseconds request_deadline_{5000};
  std::thread deadline_thread_;
  AdminHandlers handlers_;
  std::mutex status_mu_;  // held while /status renders
  int port_ = 0;
};

}  // namespace hookgate
