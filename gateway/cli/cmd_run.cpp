#include <malloc.h>
#include <signal.h>

#include <atomic>
#include <cstdio>

#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"
#include "gateway/gateway.hpp"

namespace hookgate::cli {

int cmd_run(const std::vector<std::string>& argv) {
  Args args(argv, {});
  // glibc gives the free top of a thread's heap back to the kernel (madvise, with a TLB flush on
  // every CPU) as soon as 128 KiB are free there. The spool writer frees and reallocates about
  // that much per batch, and at full load the churn was ~6 % of the gateway's CPU samples
  // (docs/performance.md, change #8). A 1 MiB threshold ends the churn; 4 MiB did too but cost
  // 12 MiB of peak RSS in the burst test. Fixing the mmap threshold (mallopt turns off glibc's
  // dynamic one) keeps mid-size buffers in the heaps rather than in fresh mmaps.
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  if (auto code =
          check_usage(args, {"config", "log-level"},
                      "Usage: hookgate run [--config FILE] [--log-level LEVEL]\n"
                      "Runs the gateway in the foreground. SIGTERM/SIGINT: stop intake, finish or\n"
                      "spool in-flight deliveries, exit 0. SIGHUP: reload config and hooks.\n"))
    return *code;
  auto cfg = load_config_or_report(args);
  if (!cfg) return 1;
  setup_logging(args.get_or("log-level", cfg->log.level), cfg->log.format);
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
