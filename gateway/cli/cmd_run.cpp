#include <signal.h>

#include <cstdio>
#include <mutex>
#include <utility>

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

  // Signals first: every thread the gateway starts inherits the blocked mask. The signal thread
  // is detached and outlives this function, so what it shares lives in a static, and one lock
  // keeps it from using a gateway that is being destroyed.
  struct SignalState {
    std::mutex mu;
    Gateway* running = nullptr;
    int stop_requests = 0;
    bool reload_pending = false;  // a SIGHUP while the gateway starts: reloads once it runs
  };
  static SignalState state;
  handle_signals([](int sig) {
    std::lock_guard lock(state.mu);
    if (sig == SIGHUP) {
      spdlog::info("SIGHUP: reloading configuration and hooks{}",
                   state.running ? "" : " once the gateway has started");
      if (state.running)
        state.running->request_reload();
      else
        state.reload_pending = true;
      return;
    }
    if (++state.stop_requests > 1) {
      spdlog::warn("second stop signal: exiting now; pending deliveries stay spooled");
      std::_Exit(0);
    }
    spdlog::info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    if (state.running) state.running->request_stop();
  });

  auto gateway = Gateway::create(std::move(*cfg));
  if (!gateway) {
    spdlog::error("cannot start: {}", gateway.error().message);
    return 1;
  }
  {
    std::lock_guard lock(state.mu);
    state.running = gateway.value().get();
    if (state.stop_requests > 0) state.running->request_stop();
    if (std::exchange(state.reload_pending, false)) state.running->request_reload();
  }
  gateway.value()->run();
  {
    std::lock_guard lock(state.mu);
    state.running = nullptr;
  }
  gateway.value().reset();
  return 0;
}

}  // namespace hookgate::cli
