// The bus through the binary: CURVE allow-list on the gateway's socket, and the `hookgate bus`
// proxy between publishers and subscribers.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "tests/support/gateway_process.hpp"
#include "tests/support/http_receiver.hpp"

extern char** environ;

namespace hookgate::testing {
namespace {

using namespace std::chrono_literals;

// Starts `hookgate bus --frontend F --backend B EXTRA...`; -1 if it could not be spawned.
pid_t spawn_proxy(const std::string& frontend, const std::string& backend,
                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {HOOKGATE_BINARY, "bus",       "--frontend",
                                   frontend,        "--backend", backend};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  return posix_spawn(&pid, HOOKGATE_BINARY, nullptr, nullptr, argv.data(), environ) == 0 ? pid : -1;
}

TEST(BusSecurityTest, OnlyListedPublisherKeysGetEventsIn) {
  TempDir dir;
  HttpReceiver rx;
  ASSERT_EQ(run_hookgate({"keygen", "--out", (dir / "server.key").string()}).exit_code, 0);
  ASSERT_EQ(run_hookgate({"keygen", "--out", (dir / "listed.key").string()}).exit_code, 0);
  ASSERT_EQ(run_hookgate({"keygen", "--out", (dir / "unlisted.key").string()}).exit_code, 0);
  std::filesystem::create_directories(dir / "clients");
  std::filesystem::copy_file(dir / "listed.key.pub", dir / "clients" / "listed.pub");
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(
      "bus:\n  bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\"\n"
      "  curve: { enabled: true, secret_key_file: ./server.key, allowed_clients: ./clients }\n"
      "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\nspool: { path: ./spool.db }\n"
      "webhooks:\n  - name: rx\n    url: " +
      rx.url() + "\n    events: [\"app.*\"]\n"))
      << gw.log();
  auto send = [&](const std::string& key, const std::string& type) {
    return run_hookgate({"publish", "--endpoint", gw.bus_endpoint(), "--type", type, "--data", "{}",
                         "--server-key", (dir / "server.key.pub").string(), "--client-key", key,
                         "--wait-ms", "1500"});
  };
  auto denied = send((dir / "unlisted.key").string(), "app.evil");
  EXPECT_NE(denied.exit_code, 0);
  auto plain = run_hookgate({"publish", "--endpoint", gw.bus_endpoint(), "--type", "app.plain",
                             "--data", "{}", "--wait-ms", "1500"});
  EXPECT_NE(plain.exit_code, 0);
  auto allowed = send((dir / "listed.key").string(), "app.good");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  ASSERT_TRUE(rx.wait_for(1, 10s)) << gw.log();
  EXPECT_FALSE(rx.wait_for(2, 500ms));
  EXPECT_EQ(rx.requests()[0].header("x-hookgate-event"), "app.good");
  EXPECT_TRUE(gw.wait_for_log("not in allowed_clients", 5s)) << gw.log();
  std::string m = http_get(gw.admin_port(), "/metrics");
  EXPECT_NE(metric_value(m, "hookgate_bus_auth_denied_total"), UINT64_MAX);
  EXPECT_GE(metric_value(m, "hookgate_bus_auth_denied_total"), 1u);
}

TEST(BusSecurityTest, ProxyFansPublishersToGatewayAndATap) {
  TempDir dir;
  HttpReceiver rx;
  int front = free_tcp_port(), back = free_tcp_port();
  std::string frontend = "tcp://127.0.0.1:" + std::to_string(front);
  std::string backend = "tcp://127.0.0.1:" + std::to_string(back);
  pid_t proxy = spawn_proxy(frontend, backend);
  ASSERT_GT(proxy, 0);

  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus: { connect: [\"" + backend +
               "\"] }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\nspool: { mode: memory }\n"
               "webhooks:\n  - name: rx\n    url: " +
               rx.url() + "\n    events: [\"app.*\"]\n"))
      << gw.log();
  // Two publishers, each a separate process, both through the proxy's frontend.
  ASSERT_FALSE(publish(frontend, "app.one", "{}").empty());
  ASSERT_FALSE(publish(frontend, "app.two", "{}").empty());
  ASSERT_TRUE(rx.wait_for(2, 10s)) << gw.log();
  kill(proxy, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(proxy, &status, 0), proxy);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// CURVE end to end through the proxy: the publisher and the gateway are both CURVE clients of a
// `hookgate bus` proxy whose ZAP allow-list names them (bus.curve.server_key: client mode).
TEST(BusSecurityTest, GatewayConnectsAsCurveClientOfASecuredProxy) {
  TempDir dir;
  HttpReceiver rx;
  for (const char* name : {"proxy", "gateway", "publisher"})
    ASSERT_EQ(
        run_hookgate({"keygen", "--out", (dir / (std::string(name) + ".key")).string()}).exit_code,
        0);
  std::filesystem::create_directories(dir / "clients");
  std::filesystem::copy_file(dir / "gateway.key.pub", dir / "clients" / "gateway.pub");
  std::filesystem::copy_file(dir / "publisher.key.pub", dir / "clients" / "publisher.pub");
  int front = free_tcp_port(), back = free_tcp_port();
  std::string frontend = "tcp://127.0.0.1:" + std::to_string(front);
  std::string backend = "tcp://127.0.0.1:" + std::to_string(back);
  pid_t proxy = spawn_proxy(frontend, backend,
                            {"--curve-secret-key", (dir / "proxy.key").string(),
                             "--allowed-clients", (dir / "clients").string()});
  ASSERT_GT(proxy, 0);

  GatewayProcess gw(dir);
  ASSERT_TRUE(
      gw.start("bus:\n  connect: [\"" + backend +
               "\"]\n"
               "  curve: { enabled: true, server_key: ./proxy.key.pub, secret_key_file: "
               "./gateway.key }\n"
               "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\nspool: { mode: memory }\n"
               "webhooks:\n  - name: rx\n    url: " +
               rx.url() + "\n    events: [\"app.*\"]\n"))
      << gw.log();
  auto sent = run_hookgate({"publish", "--endpoint", frontend, "--type", "app.secured", "--data",
                            "{}", "--server-key", (dir / "proxy.key.pub").string(), "--client-key",
                            (dir / "publisher.key").string(), "--wait-ms", "5000"});
  EXPECT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_TRUE(rx.wait_for(1, 10s)) << gw.log();
  if (rx.count() > 0) {
    EXPECT_EQ(rx.requests()[0].header("x-hookgate-event"), "app.secured");
  }
  kill(proxy, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(proxy, &status, 0), proxy);
}

}  // namespace
}  // namespace hookgate::testing
