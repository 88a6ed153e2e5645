#pragma once
// The running gateway: bus ingest → hook chain → router → delivery store → dispatcher, plus the
// admin listener and hot reload. One ingest thread owns the SUB socket and the chain; deliveries
// are accepted in batches (one spool transaction per batch).
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"
#include "gateway/diagnostics.hpp"

namespace hookgate {

class Gateway {
 public:
  // Opens everything (spool, hooks, dispatcher, admin, bus); nothing is running yet.
  static Result<std::unique_ptr<Gateway>> create(config::Config config);
  ~Gateway();

  // Runs the ingest loop on the calling thread until request_stop(); then stops intake, lets
  // in-flight deliveries finish for up to spool.shutdown_grace_ms and leaves the rest spooled.
  void run();
  // Both are safe to call from any thread (the signal-waiting thread).
  void request_stop();
  // Re-reads the config file (webhooks, hooks, log level) and the hook directories.
  void request_reload();

  std::string bus_endpoint() const;
  int admin_port() const;
  std::string status_json() const;

 private:
  struct Impl;
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hookgate
