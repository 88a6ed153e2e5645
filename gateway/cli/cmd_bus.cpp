#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>

#include "bus/proxy.hpp"
#include "bus/wire.hpp"
#include "gateway/admin_server.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/socket_address.hpp"

namespace hookgate::cli {

// A standalone XSUB/XPUB proxy (bus/proxy.hpp): publishers connect to --frontend, subscribers
// (gateways, taps) to --backend. SIGHUP re-reads the CURVE allow-lists.
int cmd_bus(const std::vector<std::string>& argv) {
  Args args(argv, {});
  const char* usage =
      "Usage: hookgate bus --frontend EP --backend EP\n"
      "                    [--curve-secret-key FILE --allowed-clients PATH "
      "[--allowed-subscribers PATH]]\n"
      "                    [--max-message-bytes SIZE] [--hwm N] [--log-level LEVEL]\n"
      "                    [--admin ADDRESS:PORT [--admin-token-file FILE]]\n"
      "Publishers connect to the frontend, subscribers (gateways) to the backend. With CURVE, a\n"
      "publisher's key must be in --allowed-clients and a subscriber's in --allowed-subscribers\n"
      "(without it, --allowed-clients serves both sides, and any publisher may read every event).\n"
      "SIGHUP re-reads both lists: a removed publisher's messages are refused on the connection\n"
      "it has, and a removed subscriber is cut off (every subscriber reconnects).\n"
      "--hwm (default 100000) is how many messages each side queues; a burst beyond it is dropped\n"
      "(and shows as a sequence gap at the gateway). --log-level: debug, info (default), warn...\n"
      "--admin serves /healthz, /readyz, /metrics (hookgate_proxy_*) and /status there (port 0\n"
      "picks one, logged); plain HTTP. --admin-token-file: the file's first line is a token that\n"
      "/metrics and /status require as \"Authorization: Bearer TOKEN\" (the health probes stay\n"
      "open); without it, keep the listener on loopback or a private network.\n";
  if (auto code = check_usage(
          args,
          {"frontend", "backend", "curve-secret-key", "allowed-clients", "allowed-subscribers",
           "max-message-bytes", "hwm", "log-level", "admin", "admin-token-file"},
          usage))
    return *code;
  auto frontend = args.get("frontend");
  auto backend = args.get("backend");
  if (!frontend || !backend) return fail("--frontend and --backend are required", 2);
  // One ipc:// path for both used to start, with the frontend's file taken by the backend. (Not
  // asked of tcp://, where the second bind fails by itself, and a start must not wait on DNS.)
  if (auto same = frontend->starts_with("ipc://") && backend->starts_with("ipc://")
                      ? bus::same_peer({*frontend, *backend})
                      : std::nullopt)
    return fail("--frontend and --backend name one socket file (" + same->peer.substr(4) +
                    "): publishers and subscribers need one each",
                2);
  if (auto code = check_log_level(args)) return *code;
  setup_logging(args.get_or("log-level", "info"), "text");

  const auto max_message_bytes = max_message_bytes_option(args);
  if (!max_message_bytes) return 2;
  const auto hwm = positive_option(args, "hwm", "100000");
  if (!hwm || *hwm > INT32_MAX)
    return fail(
        "--hwm: expected a positive number of messages, got '" + args.get_or("hwm", "") + "'", 2);

  if (!args.get("curve-secret-key") &&
      (args.get("allowed-clients") || args.get("allowed-subscribers")))
    return fail("--allowed-clients and --allowed-subscribers need --curve-secret-key", 2);
  bus::ProxyOptions options{.frontend = *frontend,
                            .backend = *backend,
                            .hwm = static_cast<int>(*hwm),
                            .max_message_bytes = *max_message_bytes};
  if (auto key = args.get("curve-secret-key")) {
    auto allowed = args.get("allowed-clients");
    if (!allowed) return fail("--curve-secret-key needs --allowed-clients", 2);
    options.secret_key_file = *key;
    options.allowed_publishers = *allowed;
    options.allowed_subscribers = args.get_or("allowed-subscribers", *allowed);
    if (!args.get("allowed-subscribers"))
      spdlog::warn(
          "bus proxy: --allowed-clients serves both sides, so every publisher may also subscribe "
          "and read every event; give --allowed-subscribers to list the gateways apart");
  }
  // The signal thread is detached and outlives this function: it reaches the proxy only through
  // `live`, under `mu`, and this function clears it before the proxy goes. Signals are blocked
  // before the proxy starts its threads (the ZAP handler), which inherit the mask.
  static std::mutex mu;
  static bus::Proxy* live = nullptr;
  static int stop_signals = 0;
  static bool reload_pending = false;  // a SIGHUP while the proxy starts: reloads once it runs
  handle_signals([](int sig) {
    std::lock_guard lock(mu);
    if (sig == SIGHUP) {
      if (live != nullptr)
        live->request_reload();
      else
        reload_pending = true;
      return;
    }
    if (live == nullptr || ++stop_signals > 1) std::_Exit(0);  // a proxy holds nothing to save
    live->request_stop();
  });
  // Before any port is bound: a malformed address is a usage error, as the other options'.
  if (auto listen = args.get("admin"); listen && !split_host_port(*listen))
    return fail(
        "--admin: expected ADDRESS:PORT (an IP address or localhost, and a port; 0 picks "
        "one), got '" +
            *listen + "'",
        2);
  if (args.get("admin-token-file") && !args.get("admin"))
    return fail("--admin-token-file needs --admin", 2);
  std::string admin_token;
  if (auto file = args.get("admin-token-file")) {
    auto token = read_token_file(*file);
    if (!token) return fail("--admin-token-file: " + token.error().message);  // as a key file's
    admin_token = std::move(token).value();
    register_secret(admin_token);  // as the gateway's admin.token: redacted should a log hold it
  }
  auto proxy = bus::Proxy::start(options);
  if (!proxy) return fail(proxy.error().message);
  struct LiveProxy {
    explicit LiveProxy(bus::Proxy& p) {
      std::lock_guard lock(mu);
      live = &p;
      // The lists were read during start; one edited since, and signalled, is read again.
      if (std::exchange(reload_pending, false)) p.request_reload();
    }
    ~LiveProxy() {
      std::lock_guard lock(mu);
      live = nullptr;
    }
  } live_proxy(*proxy.value());

  std::unique_ptr<AdminServer> admin;
  if (auto listen = args.get("admin")) {
    bus::Proxy& p = *proxy.value();
    auto started = AdminServer::start(
        *listen, std::move(admin_token),
        {.ready = [&p] { return p.running(); },
         // Its own series, and the process's (CURVE refusals,
         // failed handshakes, cut admin requests).
         .metrics =
             [&p] { return p.metrics_text() + metrics::Registry::global().render_prometheus(); },
         .status_json = [&p] { return p.status_json(); }});
    if (!started) return fail("--admin " + *listen + ": " + started.error().message);
    admin = std::move(started).value();
  }
  spdlog::info("bus proxy: publishers → {}, subscribers → {}", proxy.value()->frontend_endpoint(),
               proxy.value()->backend_endpoint());
  if (admin) spdlog::info("bus proxy: admin on port {}", admin->port());
  int rc = 0;
  if (auto st = proxy.value()->run(); !st) {
    spdlog::error("{}; restart the proxy", st.error().message);
    rc = 1;
  }
  admin.reset();  // before the proxy its handlers read
  spdlog::info("bus proxy stopped");
  return rc;
}

}  // namespace hookgate::cli
