#include <signal.h>

#include <cstdint>
#include <cstdio>
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
      "Usage: hookgate bus --frontend EP --backend EP [--curve-secret-key FILE --allowed-clients "
      "PATH]\n"
      "                    [--max-message-bytes N] [--hwm N]\n"
      "Publishers connect to the frontend, subscribers to the backend. With CURVE, both sides "
      "require\n"
      "a client key listed in --allowed-clients. --hwm (default 100000) is how many messages each "
      "side\n"
      "queues; a burst beyond it is dropped (and shows as a sequence gap at the gateway).\n";
  if (auto code = check_usage(args,
                              {"frontend", "backend", "curve-secret-key", "allowed-clients",
                               "max-message-bytes", "hwm", "log-level"},
                              usage))
    return *code;
  auto frontend = args.get("frontend");
  auto backend = args.get("backend");
  if (!frontend || !backend) return fail("--frontend and --backend are required", 2);
  if (auto code = check_log_level(args)) return *code;
  setup_logging(args.get_or("log-level", "info"), "text");

  const auto max_message_bytes = positive_option(args, "max-message-bytes", "1048576");
  if (!max_message_bytes)
    return fail("--max-message-bytes: expected a positive number of bytes, got '" +
                    args.get_or("max-message-bytes", "") + "'",
                2);
  const auto hwm = positive_option(args, "hwm", "100000");
  if (!hwm || *hwm > INT32_MAX)
    return fail(
        "--hwm: expected a positive number of messages, got '" + args.get_or("hwm", "") + "'", 2);

  zmq::context_t ctx(1);
  bus::ZapAuthenticatorStopper zap_stopper(ctx);  // runs after the sockets below close
  zmq::socket_t control_in(ctx, zmq::socket_type::pair);
  control_in.bind("inproc://hookgate-bus-control");
  handle_signals([&ctx](int sig) {
    if (sig == SIGHUP) return;
    zmq::socket_t control_out(ctx, zmq::socket_type::pair);
    control_out.connect("inproc://hookgate-bus-control");
    control_out.send(zmq::str_buffer("TERMINATE"), zmq::send_flags::none);
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
    if (auto key = args.get("curve-secret-key")) {
      auto allowed = args.get("allowed-clients");
      if (!allowed) return fail("--curve-secret-key needs --allowed-clients", 2);
      config::CurveConfig curve{true, *key, *allowed};
      for (auto* s : {&xsub, &xpub}) {
        if (auto st = bus::configure_curve_server(ctx, *s, curve); !st)
          return fail(st.error().message);
      }
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
