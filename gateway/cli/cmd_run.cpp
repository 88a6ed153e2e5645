#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/malloc_tuning.hpp"
#include "gateway/common/text.hpp"
#include "gateway/gateway.hpp"
#include "webhooks/dispatcher.hpp"

namespace hookgate::cli {
namespace {

// A second SIGTERM/SIGINT at least this long after the first exits without finishing the drain.
constexpr std::chrono::seconds kForceAfterRepeat{2};

// Descriptors the gateway asks for. Every request in flight holds a socket, so a hung endpoint
// with a large max_in_flight could use up the usual soft limit of 1,024 and leave other
// webhooks, publishers, the admin port and hook processes without one. The hard limit is the
// administrator's; the soft one is ours to raise (as nginx's worker_rlimit_nofile does).
constexpr rlim_t kWantedOpenFiles = 65536;

// Below this the reserve leaves webhook requests too few sockets, and the gateway ran out of
// descriptors anyway: under 32 its admin listener spun on accept() and never answered again, and
// under 24 libzmq aborted without a line of ours (found in a hostile-environment pass).
constexpr rlim_t kMinOpenFiles = static_cast<rlim_t>(webhooks::kOpenFilesReserve) + 64;

// The reason the gateway cannot run within its open-file limit, if it cannot.
std::optional<std::string> raise_open_file_limit(const config::Config& cfg) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return std::nullopt;
  const rlim_t wanted = std::min(kWantedOpenFiles, limit.rlim_max);
  if (limit.rlim_cur < wanted) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = wanted;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0)
      spdlog::debug("open files: soft limit raised from {} to {}", before, wanted);
    else
      limit.rlim_cur = before;
  }
  if (limit.rlim_cur < kMinOpenFiles)
    return "the open-file limit is " + std::to_string(limit.rlim_cur) + " (hard limit " +
           (limit.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                            : std::to_string(limit.rlim_max)) +
           "), below the " + std::to_string(kMinOpenFiles) + " the gateway needs (" +
           std::to_string(webhooks::kOpenFilesReserve) +
           " for the bus, the spool, the admin port and hooks, 64 for webhook requests): raise "
           "it (LimitNOFILE= in a systemd unit, ulimit -n)";
  int64_t needed = webhooks::kOpenFilesReserve;
  for (const auto& w : cfg.webhooks) needed += w.max_in_flight;
  if (static_cast<uint64_t>(needed) > limit.rlim_cur)
    spdlog::warn(
        "open files: the webhooks' max_in_flight with a reserve of {} come to {}, above this "
        "process's limit of {}: raise it (LimitNOFILE= in a systemd unit, ulimit -n) or lower "
        "max_in_flight; until then requests wait for a socket across all webhooks (half the "
        "limit left after the reserve), so a hung endpoint can hold the others up",
        webhooks::kOpenFilesReserve, needed, limit.rlim_cur);
  return std::nullopt;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  Args args(argv, {});
  tune_malloc_for_gateway();
  if (auto code = check_usage(
          args, {"config", "log-level"},
          "Usage: hookgate run [--config FILE] [--log-level LEVEL]\n"
          "Runs the gateway in the foreground. SIGTERM/SIGINT: stop intake, finish or\n"
          "spool in-flight deliveries, exit 0 (a second one 2 s or more later exits at\n"
          "once, with 128 + the signal). SIGHUP: reload config and hooks.\n"))
    return *code;
  if (auto code = check_log_level(args)) return *code;
  auto cfg = load_config_or_report(args);
  if (!cfg) return 1;
  cfg->log.level_override = ascii_lower(args.get_or("log-level", ""));  // as log.level is read
  setup_logging(cfg->log.effective_level(), cfg->log.format);
  if (cfg->file.empty()) spdlog::info("no --config given: running on embedded defaults");
  if (cfg->holds_no_settings)  // a reload refuses such a file; a start is the operator's call
    spdlog::warn(
        "{} holds no settings (empty, or comments and x- keys only): running on the defaults "
        "with no webhook, so every event goes nowhere",
        cfg->file);
  if (auto too_few = raise_open_file_limit(*cfg)) {
    spdlog::error("cannot start: {}", *too_few);
    return 1;
  }

  // Signals first: every thread the gateway starts inherits the blocked mask. The signal thread
  // is detached and outlives this function, so what it shares lives in a static, and one lock
  // keeps it from using a gateway that is being destroyed.
  struct SignalState {
    std::mutex mu;
    Gateway* running = nullptr;
    bool stop_requested = false;
    std::chrono::steady_clock::time_point first_stop;
    bool reload_pending = false;  // a SIGHUP while the gateway starts: reloads once it runs
  };
  static SignalState state;
  handle_signals([](int sig) {
    std::lock_guard lock(state.mu);
    if (sig == SIGHUP) {
      // Found in an operator's test: a SIGHUP after a SIGTERM said "reloading", and nothing did.
      if (state.stop_requested) {
        spdlog::info("SIGHUP ignored: the gateway is stopping");
        return;
      }
      spdlog::info("SIGHUP: reloading configuration and hooks{}",
                   state.running ? "" : " once the gateway has started");
      if (state.running)
        state.running->request_reload();
      else
        state.reload_pending = true;
      return;
    }
    const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    const auto now = std::chrono::steady_clock::now();
    if (state.stop_requested) {
      // `timeout`, a shell's Ctrl-C and some supervisors signal the process and then its group
      // within the same millisecond: only a repeat after kForceAfterRepeat means "now".
      if (now - state.first_stop < kForceAfterRepeat) {
        spdlog::info("{}: already stopping (a second one {} s after the first exits at once)", name,
                     kForceAfterRepeat.count());
        return;
      }
      // Accepted events stay spooled; what is still in the bus queue is not taken. Not 0: the
      // drain was cut short.
      spdlog::warn("{} again: exiting now, without waiting for in-flight deliveries", name);
      std::_Exit(128 + sig);
    }
    state.stop_requested = true;
    state.first_stop = now;
    spdlog::info("{}: stopping", name);
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
    if (state.stop_requested) state.running->request_stop();
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
