#include "bus/curve.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "bus/publisher.hpp"
#include "bus/subscriber.hpp"
#include "tests/support/receiving_thread.hpp"

namespace hookgate::bus {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("hg-curve-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

TEST(CurveTest, KeyFilesRoundTrip) {
  TempDir dir;
  auto keys = generate_curve_keypair();
  ASSERT_EQ(keys.public_key.size(), 40u);
  write(dir.path / "k", format_keypair_file(keys, true));
  auto back = read_key_file((dir.path / "k").string());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->public_key, keys.public_key);
  EXPECT_EQ(back->secret_key, keys.secret_key);
  write(dir.path / "bad", "public: nope\n");
  EXPECT_FALSE(read_key_file((dir.path / "bad").string()));
}

// libzmq admits any client that knows the server key unless ZAP says no: only listed keys pass.
TEST(CurveTest, OnlyAllowListedClientsGetEventsIn) {
  TempDir dir;
  auto server = generate_curve_keypair();
  auto listed = generate_curve_keypair();
  auto unlisted = generate_curve_keypair();
  write(dir.path / "server.key", format_keypair_file(server, true));
  fs::create_directories(dir.path / "clients");
  write(dir.path / "clients" / "svc.key", format_keypair_file(listed, false));

  zmq::context_t ctx;
  config::BusConfig cfg;
  cfg.bind = "tcp://127.0.0.1:*";
  cfg.curve = {true, (dir.path / "server.key").string(), (dir.path / "clients").string()};
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub) << sub.error().message;

  testing::ReceivingThread rx(*sub.value());
  auto bad = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()},
                                 .server_public_key = server.public_key,
                                 .client_keys = unlisted});
  ASSERT_TRUE(bad);
  EXPECT_FALSE(bad.value()->wait_for_subscriber(std::chrono::milliseconds(500)));
  (void)bad.value()->publish("evil.event", "{}");
  EXPECT_TRUE(rx.next(std::chrono::milliseconds(300)).empty());

  auto good = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()},
                                  .server_public_key = server.public_key,
                                  .client_keys = listed});
  ASSERT_TRUE(good);
  ASSERT_TRUE(good.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(good.value()->publish("ok.event", "{}"));
  auto parts = rx.next(std::chrono::seconds(5));
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts[0], "ok.event");
  stop_zap_authenticator(ctx);
}

}  // namespace
}  // namespace hookgate::bus
