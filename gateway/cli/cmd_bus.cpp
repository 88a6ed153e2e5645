#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <zmq.hpp>

#include "bus/curve.hpp"
#include "bus/subscriber.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"

namespace hookgate::cli {

// A standalone XSUB/XPUB proxy: publishers connect to --frontend, subscribers (gateways, taps) to
// --backend; subscriptions flow upstream so publishers only send what someone wants.
int cmd_bus(const std::vector<std::string>& argv) {
  Args args(argv, {});
  const char* usage =
      "Usage: hookgate bus --frontend EP --backend EP\n"
      "                    [--curve-secret-key FILE --allowed-clients PATH "
      "[--allowed-subscribers PATH]]\n"
      "                    [--max-message-bytes N] [--hwm N] [--log-level LEVEL]\n"
      "Publishers connect to the frontend, subscribers (gateways) to the backend. With CURVE, a\n"
      "publisher's key must be in --allowed-clients and a subscriber's in --allowed-subscribers\n"
      "(without it, --allowed-clients serves both sides, and any publisher may read every event).\n"
      "--hwm (default 100000) is how many messages each side queues; a burst beyond it is dropped\n"
      "(and shows as a sequence gap at the gateway). --log-level: debug, info (default), warn...\n";
  if (auto code = check_usage(args,
                              {"frontend", "backend", "curve-secret-key", "allowed-clients",
                               "allowed-subscribers", "max-message-bytes", "hwm", "log-level"},
                              usage))
    return *code;
  auto frontend = args.get("frontend");
  auto backend = args.get("backend");
  if (!frontend || !backend) return fail("--frontend and --backend are required", 2);
  if (auto code = check_log_level(args)) return *code;
  setup_logging(args.get_or("log-level", "info"), "text");

  const auto max_message_bytes = max_message_bytes_option(args);
  if (!max_message_bytes) return 2;
  const auto hwm = positive_option(args, "hwm", "100000");
  if (!hwm || *hwm > INT32_MAX)
    return fail(
        "--hwm: expected a positive number of messages, got '" + args.get_or("hwm", "") + "'", 2);

  zmq::context_t ctx(1);
  // The signal thread is detached and outlives this function: it reaches the context only
  // through `live`, under `mu`, and this function clears it before the context goes.
  static std::mutex mu;
  static zmq::context_t* live = nullptr;
  static int stop_signals = 0;
  bus::ZapAuthenticatorStopper zap_stopper(ctx);  // runs after the sockets below close
  zmq::socket_t control_in(ctx, zmq::socket_type::pair);
  control_in.bind("inproc://hookgate-bus-control");
  // After control_in: cleared (and the signal thread kept off the context) before it closes.
  struct LiveContext {
    explicit LiveContext(zmq::context_t& c) {
      std::lock_guard lock(mu);
      live = &c;
    }
    ~LiveContext() {
      std::lock_guard lock(mu);
      live = nullptr;
    }
  } live_context(ctx);
  handle_signals([](int sig) {
    if (sig == SIGHUP) {
      spdlog::warn("SIGHUP: the bus proxy does not reload; restart it to change its allow-lists");
      return;
    }
    std::lock_guard lock(mu);
    if (++stop_signals > 1 || live == nullptr) std::_Exit(0);  // a proxy holds nothing to save
    try {
      zmq::socket_t control_out(*live, zmq::socket_type::pair);
      control_out.set(zmq::sockopt::linger, 0);
      control_out.connect("inproc://hookgate-bus-control");
      (void)control_out.send(zmq::str_buffer("TERMINATE"), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      std::_Exit(0);  // the context is already stopping
    }
  });

  int rc = 0;
  {
    zmq::socket_t xsub(ctx, zmq::socket_type::xsub);
    zmq::socket_t xpub(ctx, zmq::socket_type::xpub);
    xsub.set(zmq::sockopt::linger, 0);
    xpub.set(zmq::sockopt::linger, 0);
    xsub.set(zmq::sockopt::rcvhwm, static_cast<int>(*hwm));
    xpub.set(zmq::sockopt::sndhwm, static_cast<int>(*hwm));
    // Like the gateway's own socket: frames up to twice the limit pass, so a slightly oversize
    // event is rejected (and counted) by the gateway instead of cutting its publisher's
    // connection here, with whatever was queued behind it.
    xsub.set(zmq::sockopt::maxmsgsize, bus::kOversizeHardCapFactor * *max_message_bytes);
    if (!args.get("curve-secret-key") &&
        (args.get("allowed-clients") || args.get("allowed-subscribers")))
      return fail("--allowed-clients and --allowed-subscribers need --curve-secret-key", 2);
    if (auto key = args.get("curve-secret-key")) {
      auto allowed = args.get("allowed-clients");
      if (!allowed) return fail("--curve-secret-key needs --allowed-clients", 2);
      config::CurveConfig publishers{true, *key, *allowed};
      config::CurveConfig subscribers{true, *key, args.get_or("allowed-subscribers", *allowed)};
      if (!args.get("allowed-subscribers"))
        spdlog::warn(
            "bus proxy: --allowed-clients serves both sides, so every publisher may also subscribe "
            "and read every event; give --allowed-subscribers to list the gateways apart");
      if (auto st = bus::configure_curve_server(ctx, xsub, publishers, bus::kPublisherDomain); !st)
        return fail(st.error().message);
      if (auto st = bus::configure_curve_server(ctx, xpub, subscribers, bus::kSubscriberDomain);
          !st)
        return fail(st.error().message);
    }
    try {
      xsub.bind(*frontend);
      xpub.bind(*backend);
    } catch (const zmq::error_t& e) {
      return fail(std::string("cannot bind: ") + e.what());
    }
    spdlog::info("bus proxy: publishers → {} , subscribers → {}",
                 xsub.get(zmq::sockopt::last_endpoint), xpub.get(zmq::sockopt::last_endpoint));
    try {
      zmq::proxy_steerable(xsub, xpub, zmq::socket_ref(), control_in);
    } catch (const zmq::error_t& e) {
      spdlog::error("bus proxy: {}", e.what());
      rc = 1;
    }
  }
  spdlog::info("bus proxy stopped");
  return rc;
}

}  // namespace hookgate::cli
