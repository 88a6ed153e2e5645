#include <signal.h>

#include <atomic>
#include <cstdio>

#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/malloc_tuning.hpp"
#include "gateway/gateway.hpp"

namespace hookgate::cli {

int cmd_run(const std::vector<std::string>& argv) {
  Args args(argv, {});
  tune_malloc_for_gateway();
  if (auto code =
          check_usage(args, {"config", "log-level"},
                      "Usage: hookgate run [--config FILE] [--log-level LEVEL]\n"
                      "Runs the gateway in the foreground. SIGTERM/SIGINT: stop intake, finish or\n"
                      "spool in-flight deliveries, exit 0. SIGHUP: reload config and hooks.\n"))
    return *code;
  if (auto code = check_log_level(args)) return *code;
  auto cfg = load_config_or_report(args);
  if (!cfg) return 1;
  cfg->log.level_override = args.get_or("log-level", "");
  setup_logging(cfg->log.effective_level(), cfg->log.format);
  if (cfg->file.empty()) spdlog::info("no --config given: running on embedded defaults");

  // Signals first: every thread the gateway starts inherits the blocked mask.
  std::atomic<Gateway*> running{nullptr};
  std::atomic<int> stop_requests{0};
  handle_signals([&](int sig) {
    Gateway* g = running.load();
    if (sig == SIGHUP) {
      spdlog::info("SIGHUP: reloading configuration and hooks");
      if (g) g->request_reload();
      return;
    }
    if (++stop_requests > 1) {
      spdlog::warn("second stop signal: exiting now; pending deliveries stay spooled");
      std::_Exit(0);
    }
    spdlog::info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    if (g) g->request_stop();
  });

  auto gateway = Gateway::create(std::move(*cfg));
  if (!gateway) {
    spdlog::error("cannot start: {}", gateway.error().message);
    return 1;
  }
  running = gateway.value().get();
  if (stop_requests.load() > 0) gateway.value()->request_stop();
  gateway.value()->run();
  running = nullptr;
  gateway.value().reset();
  return 0;
}

}  // namespace hookgate::cli
