// Operations: admin endpoint, metrics, log redaction, hostile input, reload — through the binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "bus/publisher.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/http_receiver.hpp"
#include "tests/support/raw_publisher.hpp"

namespace hookgate::testing {
namespace {

using namespace std::chrono_literals;

std::string config_with(const std::string& body) {
  return "bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\", receive_hwm: 200000 }\n"
         "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
         "spool: { path: ./spool.db }\n" +
         body;
}

// The one-webhook list most tests here need: "rx" at `url` for `events`.
std::string webhook_rx(const std::string& url, const std::string& events = "*") {
  return "webhooks:\n  - name: rx\n    url: " + url + "\n    events: [\"" + events + "\"]\n";
}

// Starts `gw` behind one program hook that never answers its handshake, so the start waits out
// `handshake_ms`; `meanwhile` runs every `every` on another thread until start() returns.
bool start_behind_a_silent_hook(TempDir& dir, GatewayProcess& gw, const std::string& url,
                                int handshake_ms, std::chrono::milliseconds every,
                                const std::function<void()>& meanwhile) {
  dir.write("hooks/_10_silent.sh", "#!/bin/sh\nexec sleep 60\n", /*executable=*/true);
  std::atomic<bool> start_returned{false};
  std::thread beside([&] {
    while (!start_returned) {
      meanwhile();
      std::this_thread::sleep_for(every);
    }
  });
  const bool started = gw.start(
      config_with("hooks: { directories: [./hooks], hot_reload: false, default_timeout_ms: " +
                  std::to_string(handshake_ms) + " }\n" + webhook_rx(url)));
  start_returned = true;
  beside.join();
  return started;
}

// Sends one event with the publisher library's stream stamp through a raw socket, so a test
// chooses the numbers (and can make topic and type disagree).
void send_stamped(zmq::socket_t& pub, const std::string& topic, const std::string& type,
                  const std::string& stream, int seq) {
  const std::string body = R"({"type":")" + type + R"(","source":"test","hookgatestream":")" +
                           stream + R"(","hookgateseq":)" + std::to_string(seq) + "}";
  pub.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(body));
}

// Found in review: the gateway subscribed to the bus before its admin listener started, so a
// start that failed on a busy admin port (the old instance still draining) took events from a
// publisher, which saw a subscriber and sent, and then exited with them.
// ZeroMQ buffers a message of endless frames in full before the gateway sees any of it: a bus
// open to the network without CURVE is said out loud at start, a loopback one is not.
TEST(OperationsTest, ABusOpenToTheNetworkWithoutCurveIsAWarning) {
  for (const std::string host : {"0.0.0.0", "127.0.0.1"}) {
    TempDir dir;
    GatewayProcess gw(dir);
    ASSERT_TRUE(gw.start("bus: { bind: \"tcp://" + host +
                         ":${HG_BUS_PORT}\" }\nadmin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
                         "spool: { mode: memory }\n"))
        << gw.log();
    EXPECT_EQ(gw.log().find("without CURVE") != std::string::npos, host == "0.0.0.0")
        << host << "\n"
        << gw.log();
  }
}

// Found in review: the gateway kept the usual soft limit of 1,024 open files, so one hung
// endpoint with a large max_in_flight could take every socket. It raises the soft limit (to the
// hard one, at most 65,536) and says when the webhooks could need more than it has.
TEST(OperationsTest, TheOpenFileLimitIsRaisedAndAShortOneIsAWarning) {
  for (const std::string hard : {"2000", "330"}) {  // 330: just above the least run accepts
    SCOPED_TRACE("hard limit " + hard);
    TempDir dir;
    const std::string config =
        dir.write("hookgate.yaml", "bus: { bind: \"ipc://" + (dir.path() / "bus.sock").string() +
                                       "\" }\nadmin: { enabled: false }\nspool: { mode: memory }\n"
                                       "log: { level: debug }\nwebhooks:\n  - name: wide\n"
                                       "    url: http://127.0.0.1:9/\n    max_in_flight: 100\n");
    ChildProcess gw(
        {"/usr/bin/prlimit", "--nofile=300:" + hard, HOOKGATE_BINARY, "run", "--config", config},
        (dir.path() / "gateway.log").string());
    ASSERT_TRUE(wait_until([&] { return gw.log().find("listening on") != std::string::npos; }, 10s))
        << gw.log();
    if (hard == "2000") {
      EXPECT_NE(gw.log().find("soft limit raised from 300 to 2000"), std::string::npos) << gw.log();
      EXPECT_EQ(gw.log().find("above this process's limit"), std::string::npos) << gw.log();
    } else {
      EXPECT_NE(gw.log().find("soft limit raised from 300 to 330"), std::string::npos) << gw.log();
      EXPECT_NE(gw.log().find("come to 356, above this process's limit of 330"), std::string::npos)
          << gw.log();
    }
    gw.signal(SIGTERM);
    EXPECT_EQ(gw.wait_exit(10s), 0) << gw.log();
  }
}

// Found in review: `run` logged a mistyped hooks directory at debug level only, so a redaction
// hook left out by a typo went unnoticed at the default log level. The default folders stay quiet.
TEST(OperationsTest, AListedHooksDirectoryThatIsMissingIsAWarningAtRun) {
  TempDir dir;
  dir.write("hooks/.keep", "");
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { mode: memory }\nhooks: { directories: [./hooks, ./hoks] }\n"))
      << gw.log();
  const std::string warning = "hooks.directories: " + (dir.path() / "hoks").string() +
                              " does not exist, so no hooks load from it";
  EXPECT_EQ(count_occurrences(gw.log(), warning), 1u) << gw.log();
  // Said once per loaded config: a hot reload (a hook file changed) does not repeat it (found in
  // review: five identical warnings in five seconds), a SIGHUP does.
  dir.write("hooks/_10_tag.yaml",
            "kind: transform\nevents: [\"*\"]\nactions:\n  - set: { data.tag: x }\n");
  ASSERT_TRUE(gw.wait_for_log("hooks: 1 loaded", 10s)) << gw.log();
  EXPECT_EQ(count_occurrences(gw.log(), warning), 1u) << gw.log();
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("reload: configuration reloaded", 10s)) << gw.log();
  EXPECT_EQ(count_occurrences(gw.log(), warning), 2u) << gw.log();

  TempDir plain;
  GatewayProcess defaults(plain);
  ASSERT_TRUE(
      defaults.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
                     "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
                     "spool: { mode: memory }\n"))
      << defaults.log();
  EXPECT_EQ(defaults.log().find("does not exist"), std::string::npos) << defaults.log();
}

// examples/monitoring/prometheus-alerts.yaml names only series a gateway serves: each metric in
// its expressions is in /metrics of a durable gateway with a webhook and a hook, or of one in
// memory mode that only connects (hookgate_deliveries_dropped_total, hookgate_bus_connections).
TEST(OperationsTest, TheExampleAlertRulesNameSeriesTheGatewayServes) {
  std::ifstream in(std::string(HOOKGATE_SOURCE_DIR) +
                   "/examples/monitoring/prometheus-alerts.yaml");
  ASSERT_TRUE(in);
  std::set<std::string> named;
  const std::regex metric_name(R"(\bhookgate_[a-z_]+\b)");
  for (std::string line; std::getline(in, line);) {
    if (line.find("expr:") == std::string::npos) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), metric_name), end; it != end; ++it)
      named.insert(it->str());
  }
  ASSERT_GE(named.size(), 15u);

  TempDir durable_dir;
  durable_dir.write("hooks/_10_tag.yaml",
                    "kind: transform\nevents: [\"*\"]\nactions:\n  - set: { data.tag: x }\n");
  GatewayProcess durable(durable_dir);
  ASSERT_TRUE(durable.start(config_with("hooks: { directories: [./hooks], hot_reload: false }\n" +
                                        webhook_rx("http://127.0.0.1:9/"))))
      << durable.log();
  TempDir memory_dir;
  GatewayProcess memory(memory_dir);
  ASSERT_TRUE(
      memory.start("bus: { connect: [\"tcp://127.0.0.1:9\"] }\n"
                   "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
                   "spool: { mode: memory }\n" +
                   webhook_rx("http://127.0.0.1:9/")))
      << memory.log();
  ASSERT_TRUE(durable.wait_for_log("hooks: 1 loaded", 10s)) << durable.log();
  const std::string served =
      http_get(durable.admin_port(), "/metrics") + http_get(memory.admin_port(), "/metrics");
  for (const auto& name : named)
    EXPECT_NE(served.find("\n# TYPE " + name + " "), std::string::npos) << name;
}

// Found in a hostile-environment pass: under an open-file limit of 32 the admin listener spun on
// accept() and never answered again, and under 24 libzmq aborted with no line of the gateway's.
// Below what it needs, the gateway says so and does not start.
TEST(OperationsTest, AnOpenFileLimitTooLowToRunIsSaidAtStart) {
  TempDir dir;
  const std::string config = dir.write(
      "hookgate.yaml", "bus: { bind: \"tcp://127.0.0.1:0\" }\nspool: { path: ./spool.db }\n");
  auto r = run_program({"/bin/sh", "-c", "ulimit -n 100 && exec \"$0\" run --config \"$1\"",
                        HOOKGATE_BINARY, config});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot start: the open-file limit is 100 (hard limit 100), below the 320"),
            std::string::npos)
      << r.err;
}

// Found in a hostile-environment pass: SIGUSR1 (logrotate's usual postrotate) and SIGUSR2 ended
// the gateway without a line; started with stderr closed, libzmq's eventfd became descriptor 2 and
// took every log line. Both signals are said and ignored, and a missing descriptor is /dev/null.
TEST(OperationsTest, UserSignalsAreIgnoredAndAClosedStderrIsNotReused) {
  TempDir dir;
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { path: ./spool.db }\n"))
      << gw.log();
  gw.signal(SIGUSR1);
  gw.signal(SIGUSR2);
  EXPECT_TRUE(gw.wait_for_log("SIGUSR2 ignored", std::chrono::seconds(5))) << gw.log();
  EXPECT_TRUE(gw.running());
  EXPECT_TRUE(gw.wait_for_log("SIGUSR1 ignored", std::chrono::seconds(1))) << gw.log();

  // stdin, stdout and stderr closed: what descriptor 2 is once the gateway runs.
  TempDir closed;
  const std::string config =
      closed.write("hookgate.yaml",
                   "bus: { bind: \"tcp://127.0.0.1:0\" }\nadmin: { enabled: false }\n"
                   "spool: { path: ./spool.db }\n");
  // Read once the spool's lock exists: the gateway's own code has run by then.
  auto r = run_program({"/bin/sh", "-c",
                        "\"$0\" run --config \"$1\" <&- >&- 2>&- & pid=$!; "
                        "for i in $(seq 200); do [ -e \"$2\" ] && break; sleep 0.05; done; "
                        "readlink /proc/$pid/fd/2; kill $pid; wait $pid",
                        HOOKGATE_BINARY, config, (closed / "spool.db.lock").string()});
  EXPECT_EQ(r.out, "/dev/null\n") << r.err;
}

TEST(OperationsTest, AStartThatFailsOnTheAdminPortNeverSubscribes) {
  TempDir dir;
  HttpReceiver busy;  // holds the admin port
  zmq::context_t ctx;
  zmq::socket_t publisher(ctx, zmq::socket_type::xpub);
  publisher.set(zmq::sockopt::linger, 0);
  publisher.bind("tcp://127.0.0.1:*");
  const std::string endpoint = publisher.get(zmq::sockopt::last_endpoint);
  const std::string config = dir.write(
      "hookgate.yaml", "bus: { connect: [\"" + endpoint + "\"] }\nadmin: { listen: \"127.0.0.1:" +
                           std::to_string(busy.port()) + "\" }\nspool: { path: ./spool.db }\n");
  auto r = run_hookgate({"run", "--config", config});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("admin endpoint"), std::string::npos) << r.err;
  // A subscription the exiting process sent may still be in this side's I/O thread: give it time.
  zmq::pollitem_t item{publisher.handle(), 0, ZMQ_POLLIN, 0};
  (void)zmq::poll(&item, 1, std::chrono::milliseconds(500));
  zmq::message_t subscription;
  EXPECT_FALSE(publisher.recv(subscription, zmq::recv_flags::dontwait))
      << "the failed start subscribed: " << subscription.to_string();
}

// A gateway that only connects (to a `hookgate bus` proxy, say) takes no events while no peer is
// connected: /readyz says so, and /status and the gauge count the connections.
TEST(OperationsTest, AGatewayThatOnlyConnectsIsReadyWhileAPeerIsConnected) {
  TempDir dir;
  const std::string endpoint = "ipc://" + (dir / "bus.sock").string();
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start("bus: { connect: [\"" + endpoint +
                       "\"] }\nadmin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
                       "spool: { mode: memory }\n"))
      << gw.log();
  int status = 0;
  auto ready_is = [&](int want, int connections) {
    return wait_until(
        [&] {
          http_get(gw.admin_port(), "/readyz", &status);
          const std::string s = http_get(gw.admin_port(), "/status");
          const std::string m = http_get(gw.admin_port(), "/metrics");
          return status == want &&
                 s.find("\"bus_connections\":" + std::to_string(connections) + ",") !=
                     std::string::npos &&
                 metric_value(m, "hookgate_bus_connections") == static_cast<uint64_t>(connections);
        },
        10s);
  };
  EXPECT_TRUE(ready_is(503, 0)) << http_get(gw.admin_port(), "/status");
  // It names the peer it dials, and no bound endpoint (it used to show "bus": "").
  const std::string initial = http_get(gw.admin_port(), "/status");
  EXPECT_NE(initial.find("\"bus\":null,\"bus_connect\":[\"" + endpoint + "\"]"), std::string::npos)
      << initial;
  {
    zmq::context_t ctx;
    zmq::socket_t proxy(ctx, zmq::socket_type::xpub);
    proxy.set(zmq::sockopt::linger, 0);
    proxy.bind(endpoint);
    EXPECT_TRUE(ready_is(200, 1)) << http_get(gw.admin_port(), "/status") << gw.log();
  }
  EXPECT_TRUE(ready_is(503, 0)) << http_get(gw.admin_port(), "/status") << gw.log();
  EXPECT_TRUE(gw.wait_for_log("bus: connection to", 5s)) << gw.log();
}

// Zombie processes (state Z) named `name` whose parent's command line mentions `marker`.
int zombies_under(const std::string& name, const std::string& marker) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string stat = read_text(entry.path() / "stat");
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 >= stat.size())
      continue;
    if (stat.substr(open + 1, close - open - 1) != name || stat[close + 2] != 'Z') continue;
    const std::string parent = std::to_string(std::stol(stat.substr(close + 4)));
    std::string cmdline = read_text("/proc/" + parent + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) ++count;
  }
  return count;
}

// Found in review: as PID 1 (a container's entrypoint without --init) the gateway inherited the
// children of hooks whose process group a timeout killed, and never reaped them: zombies piled
// up until the PID limit stopped hooks from starting. PID 1 now stays a small init that reaps.
TEST(OperationsTest, AsPid1TheGatewayReapsTheOrphansOfTimedOutHooks) {
  if (run_program({"/usr/bin/unshare", "--fork", "--pid", "--mount-proc", "true"}).exit_code != 0)
    GTEST_SKIP() << "cannot make a PID namespace here (needs CAP_SYS_ADMIN)";
  TempDir dir;
  // `sh` is the hook's process, reaped by the gateway; `sleep` and `cat` are its children,
  // orphaned when the timeout kills the group.
  dir.write("hooks/_10_slow.yaml",
            "kind: transform\ncommand: sleep 5 | cat\ntimeout_ms: 200\non_error: open\n");
  const std::string endpoint = "ipc://" + (dir.path() / "bus.sock").string();
  const std::string config =
      dir.write("pid1.yaml", "bus: { bind: \"" + endpoint +
                                 "\" }\nadmin: { enabled: false }\nhooks: { "
                                 "directories: [" +
                                 (dir.path() / "hooks").string() +
                                 "] }\nspool: { path: ./spool.db }\nwebhooks: []\n");
  ChildProcess gw({"/usr/bin/unshare", "--fork", "--pid", "--mount-proc", "--kill-child=SIGTERM",
                   HOOKGATE_BINARY, "run", "--config", config},
                  (dir.path() / "pid1.log").string());
  ASSERT_TRUE(gw.started());
  const auto timeouts = [&] { return count_occurrences(gw.log(), "timed out"); };
  for (size_t i = 1; i <= 3; ++i) {  // one event at a time: each hook run times out on its own
    ASSERT_FALSE(publish(endpoint, "app.event", "{}").empty()) << gw.log();
    ASSERT_TRUE(wait_until([&] { return timeouts() >= i; }, 10s)) << gw.log();
  }
  // The orphans die with their group at each timeout; a zombie would show within this window.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(zombies_under("sleep", config) + zombies_under("cat", config), 0) << gw.log();
  // unshare ignores SIGTERM while it waits: stop the namespace's PID 1, which hands it on.
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = read_text(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const std::string stat = read_text(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (cmdline.rfind(HOOKGATE_BINARY, 0) != 0 || cmdline.find(config) == std::string::npos ||
        close == std::string::npos)
      continue;
    const std::string parent = std::to_string(std::stol(stat.substr(close + 4)));
    if (read_text("/proc/" + parent + "/comm") == "unshare\n")
      ::kill(std::stoi(entry.path().filename().string()), SIGTERM);
  }
  EXPECT_EQ(gw.wait_exit(20s), 0) << gw.log();  // the gateway's own exit code, through init
}

TEST(OperationsTest, AdminEndpointsAndMetrics) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks/_10_tag.yaml", "kind: transform\nactions:\n  - set: { data.tagged: true }\n");
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(
      "hooks: { directories: [./hooks] }\nwebhooks:\n  - name: rx\n    url: " + rx.url() + "\n")))
      << gw.log();
  int status = 0;
  EXPECT_EQ(http_get(gw.admin_port(), "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  ASSERT_TRUE(wait_for_readyz(gw.admin_port(), 200, 5s));
  for (int i = 0; i < 3; ++i)
    ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  ASSERT_TRUE(rx.wait_for(3, 10s));
  std::string m;
  ASSERT_TRUE(wait_until(
      [&] {
        m = http_get(gw.admin_port(), "/metrics", &status);
        // Accepted counts at the commit, which the first attempt does not wait for.
        return metric_value(m, "hookgate_deliveries_total{webhook=\"rx\",outcome=\"delivered\"}") ==
                   3 &&
               metric_value(m, "hookgate_events_accepted_total") == 3;
      },
      5s))
      << m;
  EXPECT_EQ(metric_value(m, "hookgate_events_received_total"), 3u);
  EXPECT_EQ(metric_value(m, "hookgate_events_accepted_total"), 3u);
  EXPECT_NE(m.find("# TYPE hookgate_delivery_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(m.find("hookgate_hook_runs_total{hook=\"tag\""), std::string::npos) << m;
  EXPECT_EQ(metric_value(m, "hookgate_hook_duration_seconds_count{hook=\"tag\"}"), 3u) << m;
  // Every diagnostic type has its series from the start, so an alert on increase() sees the first.
  EXPECT_EQ(metric_value(m, "hookgate_diagnostics_total{type=\"hookgate.delivery.dead\"}"), 0u)
      << m;
  EXPECT_NE(m.find("hookgate_spool_depth"), std::string::npos);
  // Served before its first rise (found in an exploratory run: it appeared mid-run).
  EXPECT_NE(m.find("hookgate_bus_handshake_failures_total 0"), std::string::npos) << m;
  // The spool's size, set by its writer once a second: what the rows take is inside the file.
  EXPECT_TRUE(wait_until(
      [&] {
        m = http_get(gw.admin_port(), "/metrics");
        const uint64_t used = metric_value(m, "hookgate_spool_used_bytes");
        return used > 0 && used <= metric_value(m, "hookgate_spool_file_bytes");
      },
      5s))
      << m;

  // The spool records the outcomes asynchronously too: its depth reaches 0 once they commit.
  std::string st;
  rapidjson::Document d;
  EXPECT_TRUE(wait_until(
      [&] {
        st = http_get(gw.admin_port(), "/status", &status);
        d.Parse(st.c_str());
        return status == 200 && d.IsObject() && d.HasMember("spool") &&
               d["spool"]["depth"].GetUint64() == 0;
      },
      5s))
      << st;
  EXPECT_EQ(status, 200);
  ASSERT_TRUE(d.IsObject()) << st;
  EXPECT_EQ(d["pid"].GetInt64(), gw.pid());
  EXPECT_TRUE(d["ready"].GetBool());
  EXPECT_TRUE(d["bus_connections"].IsNull());  // it binds: ready without peers
  EXPECT_EQ(m.find("hookgate_bus_connections"), std::string::npos);
  ASSERT_EQ(d["hooks"].Size(), 1u);
  EXPECT_STREQ(d["hooks"][0]["name"].GetString(), "tag");
  EXPECT_EQ(std::string(d["hooks"][0]["directory"].GetString()), (dir / "hooks").string());
  EXPECT_STREQ(d["webhooks"][0]["name"].GetString(), "rx");
  EXPECT_TRUE(d["webhooks"][0]["healthy"].GetBool());
  EXPECT_EQ(d["spool"]["depth"].GetUint64(), 0u);
}

// Found in review: one failed attempt left a webhook "healthy": false in /status for good,
// however many deliveries succeeded after it. Health follows the latest outcome; the last error
// stays visible with its time.
TEST(OperationsTest, AWebhookIsHealthyAgainAfterASuccess) {
  TempDir dir;
  HttpReceiver rx;
  std::atomic<int> calls{0};
  rx.set_handler([&](const HttpReceiver::Request&) {
    HttpReceiver::Response r;
    if (calls++ == 0) r.status = 503;
    return r;
  });
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(
      "webhooks:\n  - name: rx\n    url: " + rx.url() +
      "\n    retry: { max_attempts: 5, initial_backoff_ms: 10, max_backoff_ms: 20 }\n")))
      << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  ASSERT_TRUE(wait_until([&] { return calls.load() >= 2; }, 10s)) << gw.log();
  rapidjson::Document d;
  ASSERT_TRUE(wait_until(
      [&] {
        d.Parse(http_get(gw.admin_port(), "/status").c_str());
        return d.IsObject() && d["webhooks"][0]["delivered"].GetUint64() >= 1;
      },
      5s))
      << http_get(gw.admin_port(), "/status") << gw.log();
  EXPECT_TRUE(d["webhooks"][0]["healthy"].GetBool());
  EXPECT_STREQ(d["webhooks"][0]["last_error"].GetString(), "HTTP 503");
  EXPECT_GT(d["webhooks"][0]["last_error_ms"].GetInt64(), 0);
  EXPECT_GE(d["webhooks"][0]["last_success_ms"].GetInt64(),
            d["webhooks"][0]["last_error_ms"].GetInt64());
}

// Found in review: during an incident the deliveries CLI needed every ${VAR} of the config (the
// webhook secrets, say) although it only reads the spool. --spool names the file directly.
TEST(OperationsTest, DeliveriesCliReadsTheSpoolWithoutTheConfigsVariables) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url())))) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  ASSERT_TRUE(rx.wait_for(1, 10s)) << gw.log();
  gw.signal(SIGTERM);
  ASSERT_EQ(gw.wait_exit(10s), 0);

  auto without_env = run_hookgate({"deliveries", "list", "--config", gw.config_path()});
  EXPECT_EQ(without_env.exit_code, 1);
  EXPECT_NE(without_env.err.find("HG_BUS_PORT"), std::string::npos) << without_env.err;
  EXPECT_NE(without_env.err.find("--spool FILE"), std::string::npos) << without_env.err;
  auto direct = run_hookgate(
      {"deliveries", "list", "--spool", (dir / "spool.db").string(), "--state", "delivered"});
  EXPECT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_NE(direct.out.find("user.created"), std::string::npos) << direct.out;
  auto both = run_hookgate({"deliveries", "list", "--spool", "x.db", "--config", "y.yaml"});
  EXPECT_EQ(both.exit_code, 2);
}

// Found in review: `deliveries list` printed publisher-controlled types and ids raw, so an event
// could send terminal escape sequences or fake table rows to an operator's terminal.
TEST(OperationsTest, DeliveriesCliEscapesControlCharacters) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url())))) << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  const std::string type = "app.\x1b[2Jclear";
  const std::string body =
      R"({"type":"app.\u001b[2Jclear","id":"evil\nmsg_fake dead","source":"test"})";
  pub.send(zmq::buffer(type), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(body));
  ASSERT_TRUE(rx.wait_for(1, 10s)) << gw.log();
  // The spool commits the outcome after the delivery: wait for the row to be listed as delivered.
  CommandResult list;
  EXPECT_TRUE(wait_until(
      [&] {
        list = run_hookgate(
            {"deliveries", "list", "--spool", (dir / "spool.db").string(), "--state", "delivered"});
        return list.exit_code == 0 && list.out.find("clear") != std::string::npos;
      },
      10s))
      << list.out << list.err;
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find('\x1b'), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("app.\\u001b[2Jclear"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("evil\\nmsg_fake"), std::string::npos) << list.out;
}

TEST(OperationsTest, AdminTokenProtectsMetricsNotHealth) {
  TempDir dir;
  GatewayProcess gw(dir);
  std::string cfg =
      "bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
      "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\", token: s3cr3t-admin-token }\n"
      "spool: { mode: memory }\n";
  ASSERT_TRUE(gw.start(cfg)) << gw.log();
  int status = 0;
  http_get(gw.admin_port(), "/metrics", &status);
  EXPECT_EQ(status, 401);
  http_get(gw.admin_port(), "/metrics", &status, "s3cr3t-admin-token");
  EXPECT_EQ(status, 200);
  for (const char* wrong : {"s3cr3t-admin-toke", "s3cr3t-admin-token2", "S3cr3t-admin-token"}) {
    http_get(gw.admin_port(), "/metrics", &status, wrong);
    EXPECT_EQ(status, 401) << wrong;
  }
  http_get(gw.admin_port(), "/healthz", &status);
  EXPECT_EQ(status, 200);
}

// A whole run's logs (text and JSON formats), the status page and CLI output never show a secret.
TEST(OperationsTest, SecretsNeverAppearInLogs) {
  for (std::string format : {"text", "json"}) {
    TempDir dir;
    HttpReceiver rx;
    rx.set_handler(
        [](const HttpReceiver::Request&) { return HttpReceiver::Response{.status = 500}; });
    GatewayProcess gw(dir);
    std::string cfg =
        config_with("log: { level: debug, format: " + format +
                    " }\n"
                    "webhooks:\n"
                    "  - name: rx\n"
                    "    url: http://user:pa55w0rd-in-url@127.0.0.1:" +
                    std::to_string(rx.port()) +
                    "/\n"
                    "    secrets: [whsec_c2VjcmV0LXNpZ25pbmcta2V5LW5ldw==, older-secret-value-42]\n"
                    "    headers: { Authorization: \"Bearer header-token-0xBEEF\", X-Api-Key: "
                    "api-key-value-77 }\n"
                    "    retry: { max_attempts: 2, initial_backoff_ms: 10, max_backoff_ms: 20 }\n");
    ASSERT_TRUE(gw.start(cfg)) << gw.log();
    ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", R"({"user":"ann"})").empty());
    ASSERT_TRUE(rx.wait_for(2, 10s)) << gw.log();
    ASSERT_TRUE(gw.wait_for_log("dead", 10s)) << gw.log();
    std::string status = http_get(gw.admin_port(), "/status");
    gw.signal(SIGTERM);
    EXPECT_EQ(gw.wait_exit(10s), 0);
    auto listed = run_hookgate({"deliveries", "list", "--config", gw.config_path()}, "", gw.env());
    std::string everything = gw.log() + status + listed.out + listed.err;
    for (const char* secret :
         {"whsec_c2VjcmV0LXNpZ25pbmcta2V5LW5ldw==", "c2VjcmV0LXNpZ25pbmcta2V5LW5ldw==",
          "older-secret-value-42", "header-token-0xBEEF", "api-key-value-77", "pa55w0rd-in-url"})
      EXPECT_EQ(everything.find(secret), std::string::npos)
          << format << ": found " << secret << " in\n"
          << everything;
    EXPECT_NE(gw.log().find("rx"), std::string::npos);  // the failures were logged, by webhook name
    if (format == "json") {  // every line is one JSON object a log shipper can take as it is
      std::istringstream lines(gw.log());
      size_t warnings = 0;
      for (std::string line; std::getline(lines, line);) {
        const auto d = parse_json(line);
        ASSERT_TRUE(d.IsObject() && d.HasMember("ts_ms") && d.HasMember("level") &&
                    d.HasMember("msg") && d["msg"].IsString())
            << line;
        warnings += std::string(d["level"].GetString()) == "warning" ? 1 : 0;
      }
      EXPECT_GT(warnings, 0u) << gw.log();
    }
  }
}

// 100,000 malformed messages of every kind: no crash, every one counted, and a valid event sent
// afterwards is delivered. Under the sanitizer build a leak would fail the exit code at SIGTERM.
// Numbers missing from a publisher's hookgateseq are counted as dropped bus messages (the events
// that did arrive are delivered as usual); a new stream starting high counts nothing.
TEST(OperationsTest, SequenceGapsAreCountedAsDroppedBusMessages) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url(), "app.*")))) << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  auto send = [&](const std::string& stream, int seq) {
    send_stamped(pub, "app.event", "app.event", stream, seq);
  };
  send("s1", 1);
  send("s1", 2);
  send("s1", 5);    // 3 and 4 lost
  send("s2", 100);  // first sight of s2: nothing known before it
  send("s2", 101);
  send("s1", 9);  // 6, 7, 8 lost
  ASSERT_TRUE(rx.wait_for(6, 10s)) << gw.log();
  EXPECT_EQ(
      metric_value(http_get(gw.admin_port(), "/metrics"), "hookgate_bus_messages_dropped_total"),
      5u);
  EXPECT_TRUE(
      gw.wait_for_log("2 message(s) from publisher stream s1 (source 'test') never arrived", 5s))
      << gw.log();
}

// What a publisher sent while the gateway restarted, and that never arrived, is counted too: the
// durable spool keeps each stream's last number across a clean stop, and across a kill -9 too,
// since each is written with the deliveries of its messages.
TEST(OperationsTest, GapsAcrossARestartAreCountedAfterACleanStopOrAKill) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url(), "app.*")))) << gw.log();
  auto send_after_connecting = [&](const std::vector<std::pair<std::string, int>>& events) {
    zmq::context_t ctx;
    zmq::socket_t pub(ctx, zmq::socket_type::xpub);
    pub.set(zmq::sockopt::linger, 2000);
    if (!connect_raw_publisher(pub, gw.bus_endpoint())) return false;
    for (const auto& [stream, seq] : events)
      send_stamped(pub, "app.event", "app.event", stream, seq);
    return true;
  };
  ASSERT_TRUE(send_after_connecting({{"s1", 1}, {"s1", 2}, {"s1", 3}})) << gw.log();
  ASSERT_TRUE(rx.wait_for(3, 10s)) << gw.log();
  gw.signal(SIGTERM);
  ASSERT_EQ(gw.wait_exit(20s), 0) << gw.log();

  ASSERT_TRUE(gw.restart()) << gw.log();
  EXPECT_TRUE(gw.wait_for_run_log("bus: 1 publisher streams go on from the last stop", 5s))
      << gw.run_log();
  ASSERT_TRUE(send_after_connecting({{"s1", 7}, {"s2", 50}})) << gw.log();  // 4, 5, 6 lost
  ASSERT_TRUE(rx.wait_for(5, 10s)) << gw.log();
  EXPECT_EQ(
      metric_value(http_get(gw.admin_port(), "/metrics"), "hookgate_bus_messages_dropped_total"),
      3u);
  EXPECT_TRUE(gw.wait_for_run_log(
      "3 message(s) from publisher stream s1 (source 'test') never arrived", 5s))
      << gw.run_log();

  // Killed once s1's 7 and s2's 50 are spooled: delivery goes ahead of the commit, and only
  // the accepted count waits for it.
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(http_get(gw.admin_port(), "/metrics"),
                            "hookgate_events_accepted_total") >= 2;
      },
      10s))
      << gw.log();
  gw.signal(SIGKILL);
  gw.wait_exit(10s);
  ASSERT_TRUE(gw.restart()) << gw.log();
  EXPECT_TRUE(gw.wait_for_run_log("bus: 2 publisher streams go on from the last stop", 5s))
      << gw.run_log();
  ASSERT_TRUE(send_after_connecting({{"s1", 20}})) << gw.log();  // 8 to 19 lost
  // Waited for by the count, not by the receiver's: a delivery whose outcome the kill lost is
  // sent again (at-least-once) and may arrive before s1's 20 is taken in (seen in CI).
  auto dropped = [&] {
    return metric_value(http_get(gw.admin_port(), "/metrics"),
                        "hookgate_bus_messages_dropped_total");
  };
  EXPECT_TRUE(wait_until([&] { return dropped() == 12u; }, 10s)) << dropped() << "\n" << gw.log();
  EXPECT_TRUE(rx.wait_for(6, 10s)) << gw.log();
}

// A message the gateway rejects still arrived: its sequence number is not a gap. Only the
// numbers that never came are counted as dropped, so each bad message is counted once.
TEST(OperationsTest, ARejectedMessageIsNotAlsoCountedAsDropped) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url(), "app.*")))) << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  auto send = [&](const std::string& topic, const std::string& type, int seq) {
    send_stamped(pub, topic, type, "s1", seq);
  };
  send("app.event", "app.event", 1);
  send("app.event", "app.other", 2);  // topic and type disagree: rejected
  send("app.event", "app.event", 3);
  send("app.event", "app.event", 5);  // 4 lost
  ASSERT_TRUE(rx.wait_for(3, 10s)) << gw.log();
  const std::string metrics = http_get(gw.admin_port(), "/metrics");
  EXPECT_EQ(metric_value(metrics, "hookgate_events_rejected_total"), 1u) << metrics;
  EXPECT_EQ(metric_value(metrics, "hookgate_bus_messages_dropped_total"), 1u) << metrics;
}

// `run --log-level` outranks the config's `log.level`, across SIGHUP reloads too: an operator
// who started a gateway with debug logging to chase a problem keeps it after a reload.
TEST(OperationsTest, CommandLineLogLevelSurvivesAReload) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  gw.set_run_args({"--log-level", "debug"});
  // The missing hooks folder is logged at debug level on every chain load.
  ASSERT_TRUE(gw.start(config_with("log: { level: warn }\nhooks: { directories: [./absent] }\n" +
                                   webhook_rx(rx.url()))))
      << gw.log();
  auto count = [&] { return count_occurrences(gw.log(), "hooks directory"); };
  ASSERT_TRUE(wait_until([&] { return count() == 1; }, 10s)) << gw.log();
  gw.signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return count() == 2; }, 10s)) << gw.log();
}

// Found in review: a reload dropped changes to spool.retention_ms and admin.enabled without a
// word, and spool.shutdown_grace_ms too. The first two need a restart and now say so; the grace is
// read only when stopping, so the next stop uses the reloaded one.
TEST(OperationsTest, AReloadAppliesTheShutdownGraceAndNamesRestartOnlySettings) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  auto config = [&](const std::string& spool_extra, bool admin) {
    return "bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
           "admin: { enabled: " +
           std::string(admin ? "true" : "false") +
           ", listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
           "spool: { path: ./spool.db" +
           spool_extra + " }\n" + webhook_rx(rx.url());
  };
  ASSERT_TRUE(gw.start(config(", shutdown_grace_ms: 4000", true))) << gw.log();
  // Also a webhook more, one changed and a log level: said in the log (found in exploratory
  // runs: only "(2 webhooks)", and nothing).
  dir.write("hookgate.yaml", config(", shutdown_grace_ms: 1234, retention_ms: 60000", false) +
                                 "    timeout_ms: 1500\n  - name: extra\n    url: " + rx.url() +
                                 "\nlog: { level: debug }\n");
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("configuration reloaded", 10s)) << gw.log();
  EXPECT_TRUE(
      gw.wait_for_log("its webhooks take over with its hooks once those have loaded; adds "
                      "extra; changes rx (timeout_ms)\n",
                      1s))
      << gw.log();
  EXPECT_TRUE(gw.wait_for_log("reload: log level debug (was info)", 1s)) << gw.log();
  EXPECT_TRUE(gw.wait_for_log("retention_max_bytes) changed; they take effect on restart", 1s))
      << gw.log();
  EXPECT_TRUE(gw.wait_for_log("admin.enabled changed; it takes effect on restart", 1s)) << gw.log();
  gw.signal(SIGTERM);
  EXPECT_TRUE(gw.wait_for_log("waiting up to 1234 ms", 10s)) << gw.log();
}

// Found in an operator's test: a SIGHUP after a SIGTERM logged "reloading configuration and
// hooks", and nothing reloaded (the loop that applies reloads had ended).
TEST(OperationsTest, ASighupDuringTheStopSaysItIsIgnored) {
  TempDir dir;
  HttpReceiver rx;
  std::atomic<int> calls{0};
  rx.set_handler([&](const HttpReceiver::Request&) {
    ++calls;
    HttpReceiver::Response r;
    r.delay = 5s;  // in flight through the stop's grace
    return r;
  });
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { path: ./spool.db, shutdown_grace_ms: 3000 }\n" +
               webhook_rx(rx.url())))
      << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  ASSERT_TRUE(wait_until([&] { return calls.load() >= 1; }, 10s)) << gw.log();
  gw.signal(SIGTERM);
  ASSERT_TRUE(gw.wait_for_log("SIGTERM: stopping", 5s)) << gw.log();
  gw.signal(SIGHUP);
  EXPECT_TRUE(gw.wait_for_log("SIGHUP ignored: the gateway is stopping", 5s)) << gw.log();
  EXPECT_EQ(gw.log().find("SIGHUP: reloading"), std::string::npos) << gw.log();
  EXPECT_EQ(gw.wait_exit(15s), 0) << gw.log();
}

// Found in an operator's test: a restart-only hooks.observer_queue was stored as if applied, so
// reloading the same file again said nothing, and going back to the running value warned that
// it "changed".
TEST(OperationsTest, ARestartOnlySettingIsComparedWithTheRunningValue) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url())))) << gw.log();
  const std::string warning = "hooks.observer_queue/observer_threads changed";
  auto reload = [&](const std::string& yaml, size_t reloads) {
    dir.write("hookgate.yaml", yaml);
    gw.signal(SIGHUP);
    return wait_until(
        [&] { return count_occurrences(gw.log(), "configuration reloaded") >= reloads; }, 10s);
  };
  const std::string changed = config_with("hooks: { observer_queue: 50 }\n" + webhook_rx(rx.url()));
  ASSERT_TRUE(reload(changed, 1)) << gw.log();
  EXPECT_EQ(count_occurrences(gw.log(), warning), 1u) << gw.log();
  ASSERT_TRUE(reload(changed, 2)) << gw.log();  // still not applied: said again
  EXPECT_EQ(count_occurrences(gw.log(), warning), 2u) << gw.log();
  ASSERT_TRUE(reload(config_with(webhook_rx(rx.url())), 3)) << gw.log();  // the running value
  EXPECT_EQ(count_occurrences(gw.log(), warning), 2u) << gw.log();
}

// Found in review: bodies are made when an event is routed, so a reload that changed a webhook's
// body: sent its spooled backlog in the old shape (to a receiver that now expects the new one),
// without a word. The reload now says how many deliveries keep the old shape.
TEST(OperationsTest, AReloadThatChangesABodyShapeNamesTheBacklogInTheOldShape) {
  TempDir dir;
  ClosedPort down;  // the backlog stays pending
  GatewayProcess gw(dir);
  auto config = [&](const std::string& body) {
    // app.* only: each failed attempt raises a hookgate.delivery.failed the other would take.
    const std::string common =
        "\n    events: [\"app.*\"]\n    retry: { max_attempts: 5, initial_backoff_ms: 60000 }\n";
    return config_with("webhooks:\n  - name: siem\n    url: " + down.url() + common + "    body: " +
                       body + "\n  - name: archive\n    url: " + down.url() + common);
  };
  ASSERT_TRUE(gw.start(config("cloudevent"))) << gw.log();
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(publish(gw.bus_endpoint(), "app.event", "{}").empty());
  ASSERT_TRUE(wait_until(
      [&] {
        return metric_value(http_get(gw.admin_port(), "/metrics"), "hookgate_spool_depth") == 6;
      },
      10s))
      << gw.log();
  dir.write("hookgate.yaml", config("splunk_hec"));
  gw.signal(SIGHUP);
  EXPECT_TRUE(gw.wait_for_log(
      "webhook siem sends a body of another shape now (body:/hec: changed); its 3 pending", 10s))
      << gw.log();
  // The names are reported in order, "archive" before "siem": had it been reported, it would be
  // in the log by now.
  EXPECT_EQ(gw.log().find("webhook archive sends a body"), std::string::npos) << gw.log();
}

TEST(OperationsTest, TopicFiltersAreNotCountedAsDroppedMessages) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\", topics: [\"app.\"] }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { mode: memory }\nwebhooks:\n  - name: rx\n    url: " +
               rx.url() + "\n    events: [\"*\"]\n"))
      << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  int seq = 0;
  for (const char* type : {"app.one", "other.skipped", "other.skipped", "app.two"}) {
    std::string body = R"({"type":")" + std::string(type) +
                       R"(","source":"test","hookgatestream":"s1","hookgateseq":)" +
                       std::to_string(++seq) + "}";
    pub.send(zmq::buffer(std::string(type)), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(body));
  }
  ASSERT_TRUE(rx.wait_for(2, 10s)) << gw.log();
  EXPECT_FALSE(rx.wait_for(3, 300ms));
  EXPECT_EQ(
      metric_value(http_get(gw.admin_port(), "/metrics"), "hookgate_bus_messages_dropped_total"),
      0u);
  EXPECT_EQ(gw.log().find("never arrived"), std::string::npos) << gw.log();
}

// `hookgate publish` of a type the gateway's bus.topics leave out used to exit 0 while ZeroMQ
// dropped the event; the publisher library now refuses it and says why.
TEST(OperationsTest, PublishingATypeNoSubscriberTakesFails) {
  TempDir dir;
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\", topics: [\"app.\"] }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { mode: memory }\nwebhooks: []\n"))
      << gw.log();
  auto taken = run_hookgate(
      {"publish", "--endpoint", gw.bus_endpoint(), "--type", "app.one", "--data", "{}"});
  EXPECT_EQ(taken.exit_code, 0) << taken.err;
  auto filtered = run_hookgate(
      {"publish", "--endpoint", gw.bus_endpoint(), "--type", "other.skipped", "--data", "{}"});
  EXPECT_EQ(filtered.exit_code, 1);
  EXPECT_NE(filtered.err.find("no subscriber for 'other.skipped'"), std::string::npos)
      << filtered.err;
}

// Found in review: a rejected message's topic went into the text log raw, so a publisher could
// forge log lines with an embedded newline. Control characters are now escaped in every record.
// `hookgate publish` refuses an event the gateway would reject for its size, and says so.
TEST(OperationsTest, PublishRefusesAnEventOverMaxMessageBytes) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url())))) << gw.log();
  const std::string data = "\"" + std::string(300, 'x') + "\"";
  auto refused = run_hookgate({"publish", "--endpoint", gw.bus_endpoint(), "--type", "app.big",
                               "--data", data, "--max-message-bytes", "256"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("exceeds max_message_bytes 256"), std::string::npos) << refused.err;
  auto sent = run_hookgate(
      {"publish", "--endpoint", gw.bus_endpoint(), "--type", "app.big", "--data", data});
  EXPECT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_TRUE(rx.wait_for(1, 10s)) << gw.log();
}

TEST(OperationsTest, ControlCharactersFromTheBusCannotForgeLogLines) {
  TempDir dir;
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { mode: memory }\nwebhooks: []\n"))
      << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  const std::string topic = "app.x\n2026-01-01T00:00:00.000Z info forged line";
  pub.send(zmq::buffer(topic), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(std::string("not json")));
  ASSERT_TRUE(gw.wait_for_log("rejected message", 10s)) << gw.log();
  EXPECT_EQ(gw.log().find("\n2026-01-01T00:00:00.000Z info forged"), std::string::npos) << gw.log();
  EXPECT_NE(gw.log().find("app.x"), std::string::npos) << gw.log();
}

TEST(OperationsTest, FloodOfMalformedMessages) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with("log: { level: warn }\nwebhooks:\n  - name: rx\n    url: " +
                                   rx.url() + "\n    events: [\"good.*\"]\n")))
      << gw.log();
  zmq::context_t ctx;
  zmq::socket_t pub(ctx, zmq::socket_type::xpub);
  pub.set(zmq::sockopt::sndhwm, 0);
  ASSERT_TRUE(connect_raw_publisher(pub, gw.bus_endpoint())) << gw.log();
  pub.set(zmq::sockopt::linger, 10000);
  const std::vector<std::vector<std::string>> kinds = {
      {"not json"},
      {"a", "b", "c"},
      {"t", "\xc3\x28 invalid utf-8"},
      {"{\"type\":\"\xff\"}"},
      {"[]"},
      {"{\"data\":{}}"},
      {"x.y", "{\"type\":\"z\"}"},
      {"", ""},
      {"{\"type\":42}"},
      {"{\"type\":\"t\",\"specversion\":\"0.3\"}"},
  };
  // 3,000 of each kind. The sanitized gateway rejects ~7,000 a second, so 100,000 (as before)
  // took 14 s idle and passed the 60 s wait below on a CI machine loaded 3 times over.
  constexpr int kFlood = 30000;
  for (int i = 0; i < kFlood; ++i) {
    const auto& frames = kinds[static_cast<size_t>(i) % kinds.size()];
    for (size_t f = 0; f < frames.size(); ++f)
      pub.send(zmq::buffer(frames[f]),
               f + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // Far oversize messages (over twice max_message_bytes) come from another connection: the socket
  // refuses them by disconnecting, before they are received or counted.
  {
    zmq::socket_t big(ctx, zmq::socket_type::xpub);
    ASSERT_TRUE(connect_raw_publisher(big, gw.bus_endpoint()));
    big.set(zmq::sockopt::linger, 1000);
    std::string huge(3 << 20, 'x');
    for (int i = 0; i < 3; ++i) big.send(zmq::buffer(huge), zmq::send_flags::none);
  }
  std::string good = R"({"type":"good.after","data":{"ok":true}})";
  pub.send(zmq::str_buffer("good.after"), zmq::send_flags::sndmore);
  pub.send(zmq::buffer(good), zmq::send_flags::none);
  ASSERT_TRUE(rx.wait_for(1, 60s)) << gw.log().substr(0, 4000);
  EXPECT_EQ(rx.count(), 1u);
  // The event may reach the receiver before its commit lands and it counts as accepted.
  std::string m;
  EXPECT_TRUE(wait_until(
      [&] {
        m = http_get(gw.admin_port(), "/metrics");
        return metric_value(m, "hookgate_events_accepted_total") == 1;
      },
      10s));
  EXPECT_EQ(metric_value(m, "hookgate_events_rejected_total"), static_cast<uint64_t>(kFlood));
  EXPECT_EQ(metric_value(m, "hookgate_events_received_total"), static_cast<uint64_t>(kFlood) + 1);
  EXPECT_EQ(metric_value(m, "hookgate_events_accepted_total"),
            1u);  // rejected messages are not events
  EXPECT_TRUE(gw.running());
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait_exit(30s), 0) << gw.log().substr(gw.log().size() > 4000 ? gw.log().size() - 4000
                                                                            : 0);
}

// Hooks change under a steady stream: every event is delivered exactly once, and the new chain
// takes over without a restart. Then SIGHUP swaps the webhooks.
TEST(OperationsTest, HotReloadUnderSteadyStreamAndSighup) {
  TempDir dir;
  HttpReceiver rx, rx2;
  dir.write("hooks/_10_tag.yaml", "kind: transform\nactions:\n  - set: { data.gen: 0 }\n");
  GatewayProcess gw(dir);
  std::string cfg = config_with(
      "hooks: { directories: [./hooks], hot_reload: true }\nwebhooks:\n  - name: rx\n    url: " +
      rx.url() + "\n    events: [\"app.*\"]\n  - name: alerts\n    url: " + rx2.url() +
      "\n    events: [\"hookgate.hooks.reloaded\"]\n");
  ASSERT_TRUE(gw.start(cfg)) << gw.log();
  auto pub = bus::Publisher::connect({.endpoints = {gw.bus_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(10s));
  std::atomic<bool> done{false};
  // Each version is renamed into place, as deploy tools and editors save: a reload forced by
  // this never-settling stream (every 1.2 s) could otherwise read the file between its
  // truncation and its write, and a hook that fails to load is left out for that reload
  // (docs/hooks.md), which failed this test once under CI load.
  std::thread rewriter([&] {
    for (int gen = 1; !done; ++gen) {
      dir.write("hooks/.tag.tmp",
                "kind: transform\nactions:\n  - set: { data.gen: " + std::to_string(gen) + " }\n");
      std::filesystem::rename(dir.path() / "hooks/.tag.tmp", dir.path() / "hooks/_10_tag.yaml");
      std::this_thread::sleep_for(150ms);
    }
  });
  std::set<std::string> sent;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(pub.value()->publish("app.tick", "{\"i\":" + std::to_string(i) + "}"));
    sent.insert(pub.value()->last_id());
    std::this_thread::sleep_for(1ms);
  }
  done = true;
  rewriter.join();
  ASSERT_TRUE(rx.wait_for(sent.size(), 30s)) << rx.count();
  EXPECT_FALSE(rx.wait_for(sent.size() + 1, 500ms)) << "an event was delivered twice";
  std::map<std::string, int> seen;
  std::set<int> generations;
  for (const auto& r : rx.requests()) {
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    if (!d.IsObject() || !d.HasMember("id") || !d.HasMember("data") ||
        !d["data"].HasMember("gen") || !d["data"]["gen"].IsInt()) {
      ADD_FAILURE() << "delivered without the hook's data.gen: " << r.body << "\n" << gw.log();
      continue;
    }
    seen[d["id"].GetString()]++;
    generations.insert(d["data"]["gen"].GetInt());
  }
  EXPECT_EQ(seen.size(), sent.size());
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  EXPECT_GE(generations.size(), 2u) << "hooks were not reloaded during the stream";
  EXPECT_TRUE(rx2.wait_for(1, 5s)) << "no hookgate.hooks.reloaded diagnostic";

  // SIGHUP: the webhook now points elsewhere; queued deliveries are not lost.
  HttpReceiver rx3;
  std::string cfg2 = cfg;
  cfg2.replace(cfg2.find(rx.url()), rx.url().size(), rx3.url());
  dir.write("hookgate.yaml", cfg2);
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("configuration reloaded", 10s)) << gw.log();
  ASSERT_TRUE(pub.value()->publish("app.after-reload", "{}"));
  ASSERT_TRUE(rx3.wait_for(1, 10s)) << gw.log();
  EXPECT_EQ(rx.count(), sent.size());
}

// Found in review: a SIGHUP that caught the config file empty (rewritten in place: truncated
// first) swapped in the defaults, with no webhooks, and the events that followed went nowhere.
// Nor does a reload take CURVE key files `run` could not read.
TEST(OperationsTest, AReloadKeepsTheRunningConfigForAnEmptyFileOrUnreadableKeys) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  const std::string cfg = config_with(webhook_rx(rx.url()));
  ASSERT_TRUE(gw.start(cfg)) << gw.log();
  dir.write("hookgate.yaml", "# being rewritten\n");
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("holds no settings", 10s)) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  EXPECT_TRUE(rx.wait_for(1, 10s)) << gw.log();

  std::string curve = cfg;
  curve.replace(curve.find("receive_hwm: 200000"), std::string("receive_hwm: 200000").size(),
                "receive_hwm: 200000, curve: { enabled: true, secret_key_file: ./missing.key, "
                "allowed_clients: ./clients }");
  dir.write("hookgate.yaml", curve);
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("missing.key", 10s)) << gw.log();
  EXPECT_NE(gw.log().find("keeping the running configuration"), std::string::npos) << gw.log();
  EXPECT_EQ(gw.log().find("configuration reloaded"), std::string::npos) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  EXPECT_TRUE(rx.wait_for(2, 10s)) << gw.log();

  // Found in an exploratory run: a mistyped rotation secret was taken, and its webhook paused.
  dir.write("hookgate.yaml",
            cfg + "    secrets: [\"whsec_not*base64!!\", whsec_c2VjcmV0LXNpZ25pbmcta2V5]\n");
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("webhook rx: a whsec_ secret is not valid base64", 10s)) << gw.log();
  EXPECT_TRUE(wait_until(
      [&] { return count_occurrences(gw.log(), "keeping the running configuration") == 3; }, 10s))
      << gw.log();
  EXPECT_EQ(gw.log().find("configuration reloaded"), std::string::npos) << gw.log();
  EXPECT_EQ(gw.log().find("paused"), std::string::npos) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "user.created", "{}").empty());
  EXPECT_TRUE(rx.wait_for(3, 10s)) << gw.log();
  // Found in an exploratory run: a refused reload showed only in the log.
  EXPECT_EQ(
      metric_value(http_get(gw.admin_port(), "/metrics"), "hookgate_config_reloads_refused_total"),
      3u);
}

// A webhook paused at start for settings it cannot be sent with does not block later reloads
// (found in review: every SIGHUP was refused for it, a revoked publisher key included).
TEST(OperationsTest, AWebhookPausedAtStartDoesNotBlockReloads) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  const std::string bad = "  - name: bad\n    url: " + rx.url() +
                          "\n    events: [\"*\"]\n    secret: \"whsec_not*base64!!\"\n";
  ASSERT_TRUE(gw.start(config_with(webhook_rx(rx.url()) + bad))) << gw.log();
  ASSERT_TRUE(gw.wait_for_log("webhook bad paused", 10s)) << gw.log();
  dir.write("hookgate.yaml", config_with("log: { level: debug }\n" + webhook_rx(rx.url()) + bad));
  gw.signal(SIGHUP);
  EXPECT_TRUE(gw.wait_for_log("configuration reloaded", 10s)) << gw.log();
  EXPECT_EQ(gw.log().find("keeping the running configuration"), std::string::npos) << gw.log();
}

// A gateway whose one hook (strips data.password) sits in ./hooks, reloaded by SIGHUP only.
bool start_with_a_redaction_hook_only_a_sighup_reloads(TempDir& dir, GatewayProcess& gw,
                                                       HttpReceiver& rx) {
  dir.write("hooks/_10_strip.yaml",
            "kind: transform\nevents: [\"*\"]\nactions:\n  - remove: [data.password]\n");
  return gw.start(
      config_with("hooks: { directories: [./hooks], hot_reload: false }\n" + webhook_rx(rx.url())));
}

// Moves ./hooks to ./hooks.away and sends SIGHUP: true once the reload waits for the folder.
bool move_the_hooks_away_during_a_sighup(TempDir& dir, GatewayProcess& gw) {
  std::filesystem::rename(dir / "hooks", dir / "hooks.away");
  gw.signal(SIGHUP);
  return gw.wait_for_log("reload: hook directory", 5s);
}

// Found in an operator's test: a SIGHUP while a deploy had moved the hooks folder away reloaded
// at once without its hooks, and events went out unredacted; hot reload had a grace for that,
// the SIGHUP path did not. The reload now waits for the folder (up to 10 s), with the running
// chain in place.
TEST(OperationsTest, ASighupWaitsForAVanishedHookDirectory) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(start_with_a_redaction_hook_only_a_sighup_reloads(dir, gw, rx)) << gw.log();
  const std::string secret = R"({"user":"ann","password":"hunter2"})";
  ASSERT_FALSE(publish(gw.bus_endpoint(), "auth.failure", secret).empty());
  ASSERT_TRUE(rx.wait_for(1, 10s)) << gw.log();
  ASSERT_TRUE(move_the_hooks_away_during_a_sighup(dir, gw)) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "auth.failure", secret).empty());
  ASSERT_TRUE(rx.wait_for(2, 10s)) << gw.log();
  std::filesystem::rename(dir / "hooks.away", dir / "hooks");
  ASSERT_TRUE(gw.wait_for_log("configuration reloaded", 10s)) << gw.log();
  ASSERT_FALSE(publish(gw.bus_endpoint(), "auth.failure", secret).empty());
  ASSERT_TRUE(rx.wait_for(3, 10s)) << gw.log();
  for (const auto& req : rx.requests())
    EXPECT_EQ(req.body.find("hunter2"), std::string::npos) << "unredacted: " << req.body;
  EXPECT_EQ(gw.log().find("still missing"), std::string::npos) << gw.log();
}

// Found in review: a reload that waited for a vanished hook directory and was then given a
// broken file retried that file on every turn of the ingest loop, logging its errors each time.
TEST(OperationsTest, ABrokenFileEndsAReloadsWaitForAHookDirectory) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(start_with_a_redaction_hook_only_a_sighup_reloads(dir, gw, rx)) << gw.log();
  ASSERT_TRUE(move_the_hooks_away_during_a_sighup(dir, gw)) << gw.log();
  dir.write("hookgate.yaml", "bus: [\n");
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("has errors, keeping the running configuration", 5s)) << gw.log();
  std::this_thread::sleep_for(1s);  // time for retries, had the wait gone on
  EXPECT_EQ(count_occurrences(gw.log(), "has errors, keeping the running configuration"), 1u)
      << gw.log();
  EXPECT_EQ(gw.log().find("still missing"), std::string::npos) << gw.log();
}

// Found in review: a SIGHUP that arrived while the gateway was starting (program hooks' handshakes
// can take seconds) was logged as "reloading" and then dropped.
TEST(OperationsTest, ASighupDuringStartReloadsOnceTheGatewayRuns) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  // Once per start attempt under way (start() tries again on a port another test took).
  size_t signalled = 0;
  const bool started = start_behind_a_silent_hook(dir, gw, rx.url(), 3000, 10ms, [&] {
    if (const size_t starts = count_occurrences(gw.log(), "spool: "); starts > signalled) {
      signalled = starts;
      gw.signal(SIGHUP);
    }
  });
  ASSERT_TRUE(started) << gw.log();
  ASSERT_TRUE(gw.wait_for_log("once the gateway has started", 1s)) << gw.log();
  EXPECT_TRUE(gw.wait_for_log("reload: configuration reloaded", 15s)) << gw.log();
}

// Found in an SRE pass: the admin listener opened only once the hooks had loaded, so behind a
// slow program hook's handshake a liveness probe met refused connections for seconds. It opens
// first now: alive (200) and not ready (503) until the gateway runs.
TEST(OperationsTest, TheProbesAnswerWhileTheHooksLoad) {
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  bool alive_but_not_ready = false;
  const bool started = start_behind_a_silent_hook(dir, gw, rx.url(), 2000, 20ms, [&] {
    int health = 0;
    int ready = 0;
    (void)http_get(gw.admin_port(), "/healthz", &health);
    (void)http_get(gw.admin_port(), "/readyz", &ready);
    int status = 0;  // no hooks to list yet: still an answer, and proof the load is under way
    const auto d = parse_json(http_get(gw.admin_port(), "/status", &status));
    if (health == 200 && ready == 503 && status == 200 && d.IsObject() && d.HasMember("hooks") &&
        d["hooks"].IsArray() && d["hooks"].Empty())
      alive_but_not_ready = true;
  });
  ASSERT_TRUE(started) << gw.log();
  EXPECT_TRUE(alive_but_not_ready) << "no probe was answered while the hooks loaded";
  int ready = 0;
  (void)http_get(gw.admin_port(), "/readyz", &ready);
  EXPECT_EQ(ready, 200);
}

// Found in an operator's test: a SIGHUP while the gateway read its config (a `systemctl reload`
// right after the start) killed it, before it handled signals. Its config is a FIFO here, so the
// signal lands while the gateway waits to read it; the same FIFO serves the reload.
TEST(OperationsTest, ASighupWhileTheConfigIsReadWaitsForTheStart) {
  TempDir dir;
  HttpReceiver rx;
  const std::string fifo = (dir / "hookgate.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string yaml =
      "bus: { bind: \"tcp://127.0.0.1:0\" }\nadmin: { listen: \"127.0.0.1:0\" }\n"
      "spool: { path: ./spool.db }\n" +
      webhook_rx(rx.url());
  ChildProcess gw({HOOKGATE_BINARY, "run", "--config", fifo}, (dir / "run.log").string());
  ASSERT_TRUE(gw.started());
  // A write end opens once the gateway opens the FIFO to read it: then it is inside cmd_run.
  auto open_writer = [&] {
    int fd = -1;
    wait_until([&] { return (fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)) >= 0; }, 15s);
    return fd;
  };
  ::signal(SIGPIPE, SIG_IGN);  // a gateway gone before reading: a failed write, not this test's end
  auto feed = [&](int fd) {
    ASSERT_GE(fd, 0) << gw.log();
    ASSERT_EQ(::write(fd, yaml.data(), yaml.size()), static_cast<ssize_t>(yaml.size()));
    ::close(fd);
  };
  const int fd = open_writer();
  gw.signal(SIGHUP);
  std::this_thread::sleep_for(100ms);  // the signal, had it not been blocked, would have landed
  feed(fd);
  ASSERT_TRUE(wait_until(
      [&] { return gw.log().find("once the gateway has started") != std::string::npos; }, 15s))
      << gw.log();
  feed(open_writer());  // the reload reads the config again
  EXPECT_TRUE(wait_until(
      [&] { return gw.log().find("reload: configuration reloaded") != std::string::npos; }, 15s))
      << gw.log();
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait_exit(20s), 0) << gw.log();
}

// Found in a config torture pass: a start stuck reading its config (a FIFO nobody writes) had
// SIGTERM blocked too, so only SIGKILL ended it. Only SIGHUP is held that early now.
TEST(OperationsTest, ASigtermWhileTheConfigIsReadStopsTheStart) {
  TempDir dir;
  const std::string fifo = (dir / "hookgate.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ChildProcess gw({HOOKGATE_BINARY, "run", "--config", fifo}, (dir / "run.log").string());
  ASSERT_TRUE(gw.started());
  std::this_thread::sleep_for(300ms);  // inside the open of the FIFO, which waits for a writer
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait_exit(5s), 128 + SIGTERM) << gw.log();
}

// Found in review: SIGTERM during a reload waited for the whole load, here three hooks that each
// wait out a 3 s handshake timeout, before the shutdown grace even began.
TEST(OperationsTest, AStopDoesNotWaitForAReloadToFinish) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks/.keep", "");
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with(
      "hooks: { directories: [./hooks], hot_reload: false, default_timeout_ms: 3000 }\n" +
      webhook_rx(rx.url()))))
      << gw.log();
  for (const char* name : {"_10_a.sh", "_20_b.sh", "_30_c.sh"})
    dir.write(std::string("hooks/") + name, "#!/bin/sh\nexec sleep 60\n", /*executable=*/true);
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("hooks: reloading", 10s)) << gw.log();
  const auto stop_sent = std::chrono::steady_clock::now();
  gw.signal(SIGTERM);
  EXPECT_EQ(gw.wait_exit(20s), 0) << gw.log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_sent, 6s) << gw.log();
}

// A reload builds the next chain off the ingest thread: while a new program hook takes its time
// to answer the handshake (here: never, so the load waits out its 5 s timeout), events keep
// flowing through the running chain. Before, the bus was not read until the load ended.
TEST(OperationsTest, ASlowHookLoadDoesNotStopIntake) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks/.keep", "");  // the watched directory exists from the start
  GatewayProcess gw(dir);
  std::string cfg = config_with("hooks: { directories: [./hooks], hot_reload: true }\n" +
                                webhook_rx(rx.url(), "app.*"));
  ASSERT_TRUE(gw.start(cfg)) << gw.log();
  auto pub = bus::Publisher::connect({.endpoints = {gw.bus_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(10s));
  ASSERT_TRUE(pub.value()->publish("app.before", "{}"));
  ASSERT_TRUE(rx.wait_for(1, 10s));

  // Silent until killed: its load ends only at the 5 s handshake timeout.
  dir.write("hooks/_10_silent.sh", "#!/bin/sh\nexec sleep 60\n", /*executable=*/true);
  ASSERT_TRUE(gw.wait_for_log("hooks: reloading", 10s)) << gw.log();  // the load has begun
  const auto published = std::chrono::steady_clock::now();
  ASSERT_TRUE(pub.value()->publish("app.during", "{}"));
  ASSERT_TRUE(rx.wait_for(2, 15s)) << gw.log();
  EXPECT_LT(std::chrono::steady_clock::now() - published, 4s)
      << "the event waited for the hook load";
  // The load ends with the hook left out, and the gateway carries on.
  ASSERT_TRUE(gw.wait_for_log("no handshake line within", 15s)) << gw.log();
  ASSERT_TRUE(pub.value()->publish("app.after", "{}"));
  EXPECT_TRUE(rx.wait_for(3, 10s)) << gw.log();
}

// Found in review: a SIGHUP swapped in the new webhooks at once but the new hooks only once they
// had loaded (seconds, with program hooks), so a webhook added together with its redaction hook
// received unredacted events meanwhile. Both now change together.
TEST(OperationsTest, AReloadSwapsWebhooksAndHooksInTogether) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks-a/.keep", "");
  dir.write("hooks-b/_10_redact.yaml", "kind: transform\nactions:\n  - remove: [data.password]\n");
  // Slow to load: its handshake comes after 1.5 s.
  dir.write("hooks-b/_20_slow.sh",
            "#!/bin/sh\nsleep 1.5\necho '{\"hookgate\":1,\"kind\":\"veto\"}'\n"
            "while read -r line; do id=${line#*\\\"id\\\":}; id=${id%%,*}; "
            "printf '{\"id\":%s,\"action\":\"continue\"}\\n' \"$id\"; done\n",
            /*executable=*/true);
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(
      config_with("hooks: { directories: [./hooks-a], hot_reload: false }\nwebhooks: []\n")))
      << gw.log();
  auto pub = bus::Publisher::connect({.endpoints = {gw.bus_endpoint()}});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(10s));

  dir.write("hookgate.yaml",
            config_with("hooks: { directories: [./hooks-b], hot_reload: false }\n" +
                        webhook_rx(rx.url(), "app.*")));
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("hooks: reloading", 10s)) << gw.log();
  // Publish all through the load and until the new webhook has its first event.
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (rx.count() < 1 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(pub.value()->publish("app.login", R"({"user":"ann","password":"hunter2"})"));
    std::this_thread::sleep_for(25ms);
  }
  ASSERT_TRUE(rx.wait_for(1, 10s)) << gw.log();  // the new webhook is in place by now
  for (const auto& r : rx.requests())
    EXPECT_EQ(r.body.find("hunter2"), std::string::npos) << "unredacted: " << r.body;
}

// Found in an exploratory run: series appeared with their first rise, which increase() misses
// (a memory-mode webhook's drops, its attempts by result), and a removed hook's series stayed in
// /metrics, frozen, while a removed webhook's went.
TEST(OperationsTest, SeriesAreThereFromTheStartAndLeaveWithTheirHook) {
  TempDir dir;
  ClosedPort down;
  dir.write("hooks/_10_a.yaml", "kind: transform\nactions:\n  - remove: [data.x]\n");
  dir.write("hooks/_20_b.yaml", "kind: transform\nactions:\n  - remove: [data.y]\n");
  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
               "spool: { mode: memory, memory_max_pending: 3 }\n"
               "hooks: { directories: [./hooks], hot_reload: false }\n" +
               webhook_rx(down.url())))
      << gw.log();
  std::string m = http_get(gw.admin_port(), "/metrics");
  for (const char* series :
       {"hookgate_deliveries_dropped_total{webhook=\"rx\"} 0\n",
        "hookgate_delivery_attempts_total{webhook=\"rx\",result=\"connect_error\"} 0\n",
        "hookgate_delivery_attempts_total{webhook=\"rx\",result=\"5xx\"} 0\n",
        "hookgate_hook_runs_total{hook=\"b\",result=\"continue\"} 0\n"})
    EXPECT_NE(m.find(series), std::string::npos) << series << "\n" << m;
  std::filesystem::remove(dir / "hooks/_20_b.yaml");
  gw.signal(SIGHUP);
  EXPECT_TRUE(wait_until(
      [&] {
        m = http_get(gw.admin_port(), "/metrics");
        return m.find("{hook=\"b\"") == std::string::npos;
      },
      10s))
      << m << gw.log();
  EXPECT_NE(m.find("hookgate_hook_runs_total{hook=\"a\",result=\"continue\"} 0\n"),
            std::string::npos)
      << m;
}

// Found in review: SIGHUP took in new hooks.directories but kept watching the old ones, so a
// directory added by a reload never hot-reloaded (and hot_reload: false kept reloading). The
// watcher now follows the reloaded config.
TEST(OperationsTest, AReloadMovesTheWatcherToTheNewDirectories) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks-a/.keep", "");
  dir.write("hooks-b/.keep", "");
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config_with("hooks: { directories: [./hooks-a], hot_reload: true }\n" +
                                   webhook_rx(rx.url(), "app.*"))))
      << gw.log();
  dir.write("hookgate.yaml", config_with("hooks: { directories: [./hooks-b], hot_reload: true }\n" +
                                         webhook_rx(rx.url(), "app.*")));
  gw.signal(SIGHUP);
  ASSERT_TRUE(gw.wait_for_log("reload: configuration reloaded", 10s)) << gw.log();
  ASSERT_TRUE(wait_until(
      [&] {
        return count_occurrences(gw.log(), "hooks: 0 loaded") >= 2;  // start, then the reload's
      },
      10s))
      << gw.log();
  // A hook dropped into the new directory loads without another signal.
  dir.write("hooks-b/_10_tag.yaml", "kind: transform\nactions:\n  - set: { data.tagged: true }\n");
  EXPECT_TRUE(gw.wait_for_log("hooks: 1 loaded", 10s)) << gw.log();
}

// Found in review: a hook file whose name is not UTF-8 (a Latin-1 "café") made /status invalid
// JSON and a Prometheus scrape fail. It is reported under a printable stand-in.
TEST(OperationsTest, AHookFileNameThatIsNotUtf8KeepsStatusAndMetricsValid) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks/_10_caf\xe9.yaml", "kind: observe\n");
  // A directory name and a broken hook's error that are not UTF-8 either.
  dir.write("more\xe9/_20_bad\xe9.yaml", "kind: observe\nbogus: 1\n");
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(
      config_with("hooks: { directories: [./hooks, \"./more\xe9\"] }\n" + webhook_rx(rx.url()))))
      << gw.log();
  const std::string status = http_get(gw.admin_port(), "/status");
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(status.c_str());
  EXPECT_FALSE(d.HasParseError()) << status;
  EXPECT_EQ(status.find('\xe9'), std::string::npos);
  EXPECT_NE(status.find("_10_caf?"), std::string::npos) << status;
  EXPECT_NE(status.find("more?"), std::string::npos) << status;
  EXPECT_NE(status.find("\"error\""), std::string::npos) << status;
  const std::string metrics = http_get(gw.admin_port(), "/metrics");
  EXPECT_EQ(metrics.find('\xe9'), std::string::npos);
}

// Found in review: stop_stale (scripts/stop-stale.sh, used by the quickstart and the examples)
// matched "hookgate" or "tail" anywhere in a pid's command line, so after a reboot a reused pid
// could be an editor or a ctest run from a folder named hookgate; and a process that outlived its
// 5 s was left running with its pidfile gone.
TEST(OperationsTest, StopStaleStopsOnlyTheProcessItRecorded) {
  TempDir dir;
  const std::string script = "set -euo pipefail\n. '" + std::string(HOOKGATE_SOURCE_DIR) +
                             "/scripts/stop-stale.sh'\nrun='" + dir.path().string() +
                             "'\n"
                             // A process whose name only looks like ours, and a stale record of it.
                             "(exec -a tailor-hookgate sleep 30) & bystander=$!\n"
                             "echo \"$bystander 12345\" >\"$run/old.pid\"\n"
                             "echo \"$bystander\" >\"$run/older.pid\"\n"
                             // One we started, ignoring SIGTERM like a gateway stuck draining.
                             "bash -c 'trap \"\" TERM; : >\"$0\"; sleep 30' \"$run/trapped\" "
                             "& ours=$!\n"
                             "until [ -e \"$run/trapped\" ]; do sleep 0.01; done\n"
                             "record_pid \"$run/ours.pid\" $ours\n"
                             "stop_stale \"$run\"\n"
                             "kill -0 $bystander && echo bystander-alive\n"
                             "kill -0 $ours 2>/dev/null || echo ours-gone\n"
                             "ls \"$run\"/*.pid 2>/dev/null || echo no-pidfiles\n"
                             "kill $bystander\n";
  auto r = run_program({"/bin/bash", "-c", script});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("bystander-alive"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("ours-gone"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("no-pidfiles"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("ignored SIGTERM for 10 s; sending SIGKILL"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hookgate::testing
