#pragma once
// The admin HTTP listener (PRODUCT.md "Operations"): /healthz, /readyz, /metrics, /status.
// Served by libmicrohttpd's own polling thread, so a slow scraper never touches the pipeline.
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "gateway/common/result.hpp"

struct MHD_Daemon;

namespace hookgate {

struct AdminHandlers {
  std::function<bool()> ready;               // /readyz: 200 when true, else 503
  std::function<std::string()> metrics;      // Prometheus text
  std::function<std::string()> status_json;  // /status
};

class AdminServer {
 public:
  // listen: "HOST:PORT" (IPv4 or "[v6]:port"); port 0 picks a free one. A non-empty token is
  // required as "Authorization: Bearer <token>" on /metrics and /status (health probes stay open).
  static Result<std::unique_ptr<AdminServer>> start(const std::string& listen, std::string token,
                                                    AdminHandlers handlers);
  ~AdminServer();
  int port() const { return port_; }

 private:
  AdminServer() = default;
  friend struct AdminDispatch;
  MHD_Daemon* daemon_ = nullptr;
  std::string token_;
  AdminHandlers handlers_;
  std::mutex status_mu_;  // held while /status renders
  int port_ = 0;
};

}  // namespace hookgate
