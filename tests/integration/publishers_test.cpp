// The example publishers (examples/publishers/) against a real gateway: each one's event arrives,
// and each refuses, with a non-zero exit, a type the gateway's bus.topics leave out (ZeroMQ would
// drop it without a word).
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "tests/support/gateway_process.hpp"
#include "tests/support/http_receiver.hpp"

namespace hookgate::testing {
namespace {

using namespace std::chrono_literals;

const std::string kPublishers = std::string(HOOKGATE_SOURCE_DIR) + "/examples/publishers";

std::string config(const std::string& url, const std::string& topics) {
  return "bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\"" + topics +
         " }\n"
         "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
         "spool: { mode: memory }\nwebhooks:\n  - name: rx\n    url: " +
         url + "\n    events: [\"*\"]\n";
}

TEST(ExamplePublishersTest, EachPublisherDeliversItsEvent) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config(rx.url(), ""))) << gw.log();

  auto py = run_program({"/usr/bin/python3", kPublishers + "/publish.py", gw.bus_endpoint()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto sh = run_program({"/bin/sh", kPublishers + "/publish.sh", gw.bus_endpoint()}, "",
                        {std::string("HOOKGATE=") + HOOKGATE_BINARY});
  ASSERT_EQ(sh.exit_code, 0) << sh.err;
  auto cpp = run_program({HOOKGATE_EXAMPLE_PUBLISHER, gw.bus_endpoint()});
  ASSERT_EQ(cpp.exit_code, 0) << cpp.err;

  ASSERT_TRUE(rx.wait_for(3, 10s)) << gw.log();
  std::multiset<std::string> types;
  for (const auto& r : rx.requests()) types.insert(r.header("x-hookgate-event"));
  EXPECT_EQ(types, (std::multiset<std::string>{"auth.failure", "deploy.finished", "user.created"}));
  // Each prints the id of the event it published.
  for (const auto* out : {&py.out, &sh.out, &cpp.out}) EXPECT_FALSE(out->empty());
}

// publish.py used to take the first subscription as "someone listens" and exit 0 while ZeroMQ
// dropped an event that no `bus.topics` prefix matched.
TEST(ExamplePublishersTest, PythonPublisherRefusesATypeTheTopicsLeaveOut) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  ASSERT_TRUE(gw.start(config(rx.url(), ", topics: [\"user.\", \"deploy.\"]"))) << gw.log();
  auto py = run_program({"/usr/bin/python3", kPublishers + "/publish.py", gw.bus_endpoint()});
  EXPECT_NE(py.exit_code, 0) << py.out;
  EXPECT_NE(py.err.find("'auth.failure'"), std::string::npos) << py.err;
  EXPECT_NE(py.err.find("bus.topics"), std::string::npos) << py.err;
}

// Found in an exploratory run: a mistyped endpoint ended publish.py in a pyzmq traceback, where
// `hookgate publish` and the C++ example say what is wrong.
TEST(ExamplePublishersTest, PythonPublisherSaysWhatIsWrongWithAnEndpoint) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  auto py = run_program({"/usr/bin/python3", kPublishers + "/publish.py", "notanendpoint"});
  EXPECT_EQ(py.exit_code, 1) << py.out;
  EXPECT_NE(py.err.find("cannot connect to 'notanendpoint'"), std::string::npos) << py.err;
  EXPECT_EQ(py.err.find("Traceback"), std::string::npos) << py.err;
}

}  // namespace
}  // namespace hookgate::testing
