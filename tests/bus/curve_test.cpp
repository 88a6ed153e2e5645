#include "bus/curve.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "bus/publisher.hpp"
#include "bus/subscriber.hpp"
#include "gateway/common/metrics.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/receiving_thread.hpp"

namespace hookgate::bus {
namespace {
namespace fs = std::filesystem;

using testing::TempDir;

TEST(CurveTest, KeyFilesRoundTrip) {
  TempDir dir;
  auto keys = generate_curve_keypair();
  ASSERT_EQ(keys.public_key.size(), 40u);
  dir.write("k", format_keypair_file(keys, true));
  auto back = read_key_file((dir / "k").string());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->public_key, keys.public_key);
  EXPECT_EQ(back->secret_key, keys.secret_key);
  dir.write("bad", "public: nope\n");
  EXPECT_FALSE(read_key_file((dir / "bad").string()));
}

// ':' and '=' are Z85 digits: a line that is a whole key is a key, not "label: value".
TEST(CurveTest, BareKeysMayHoldColonsAndEquals) {
  TempDir dir;
  const std::string with_colon = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  std::string with_equals;
  for (int i = 0; i < 1000 && with_equals.empty(); ++i) {
    auto k = generate_curve_keypair().public_key;
    if (k.find('=') != std::string::npos && k.find(':') == std::string::npos) with_equals = k;
  }
  ASSERT_FALSE(with_equals.empty());
  const std::string labelled = generate_curve_keypair().public_key;

  dir.write("allowed", "# one key a line\n" + with_colon + "\n  " + with_equals +
                           "  \nsvc = " + labelled + "\n");
  auto list = read_allowed_clients((dir / "allowed").string());
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(*list, (std::set<std::string>{with_colon, with_equals, labelled}));

  fs::create_directory(dir / "clients");
  dir.write("clients/a.pub", with_colon + "\n");
  dir.write("clients/b.pub", "public: " + with_equals + "\n");
  auto folder = read_allowed_clients((dir / "clients").string());
  ASSERT_TRUE(folder) << folder.error().message;
  EXPECT_EQ(*folder, (std::set<std::string>{with_colon, with_equals}));

  dir.write("server.pub", with_colon + "\n");
  auto server = read_server_key((dir / "server.pub").string());
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_EQ(*server, with_colon);
}

// Found in review: revoking a publisher whose keygen output (svc.key with its secret, and
// svc.key.pub) sat in the allow-list folder by removing its .pub, as the docs say, left it
// allowed through the .key. A .key that holds only a public key still lists it.
TEST(CurveTest, AnAllowListFolderSkipsKeypairFiles) {
  TempDir dir;
  const auto svc = generate_curve_keypair();
  const auto legacy = generate_curve_keypair();
  fs::create_directory(dir / "clients");
  dir.write("clients/svc.key", format_keypair_file(svc, true));
  dir.write("clients/svc.key.pub", format_keypair_file(svc, false));
  dir.write("clients/legacy.key", format_keypair_file(legacy, false));
  auto listed = read_allowed_clients((dir / "clients").string());
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(*listed, (std::set<std::string>{svc.public_key, legacy.public_key}));
  fs::remove(dir / "clients/legacy.key");

  fs::remove(dir / "clients/svc.key.pub");
  auto revoked = read_allowed_clients((dir / "clients").string());
  ASSERT_TRUE(revoked) << revoked.error().message;
  EXPECT_TRUE(revoked->empty());
}

// Found in review: a folder's team.pub with two keys admitted only the last one, and a keypair
// file given as a single-file list put its secret key on the list. Both are errors now.
TEST(CurveTest, AKeyFileWithTwoKeysOrAListWithASecretKeyIsAnError) {
  TempDir dir;
  const auto a = generate_curve_keypair();
  const auto b = generate_curve_keypair();
  fs::create_directory(dir / "clients");
  dir.write("clients/team.pub", a.public_key + "\n" + b.public_key + "\n");
  auto folder = read_allowed_clients((dir / "clients").string());
  ASSERT_FALSE(folder);
  EXPECT_NE(folder.error().message.find("team.pub holds more than one public key"),
            std::string::npos)
      << folder.error().message;
  dir.write("list", format_keypair_file(a, true));
  auto keypair = read_allowed_clients((dir / "list").string());
  ASSERT_FALSE(keypair);
  EXPECT_NE(keypair.error().message.find("holds a secret key"), std::string::npos)
      << keypair.error().message;
  EXPECT_EQ(keypair.error().message.find(a.secret_key), std::string::npos);
}

// Found in review: a key file path of exactly 40 characters, all in the Z85 alphabet (as
// /etc/hookgate/keys/proxy-server1.key.pub is), was taken for the key itself.
// Found in review: a secret key put where its file's path belongs (secret_key_file:
// "${BUS_SECRET}") was printed by `check` and `run` in "cannot read key file <path>".
TEST(CurveTest, AKeyGivenAsAPathIsNotShownInTheError) {
  const auto keys = generate_curve_keypair();
  auto inline_key = read_key_file("/etc/hookgate/" + keys.secret_key);
  ASSERT_FALSE(inline_key);
  EXPECT_EQ(inline_key.error().message.find(keys.secret_key), std::string::npos);
  EXPECT_NE(inline_key.error().message.find("looks like a Z85 key"), std::string::npos);
  // Also with the line break a key from a file or a Kubernetes secret ends in.
  auto with_newline = read_key_file("/etc/hookgate/" + keys.secret_key + "\n");
  ASSERT_FALSE(with_newline);
  EXPECT_EQ(with_newline.error().message.find(keys.secret_key), std::string::npos);
  // A long ordinary path keeps open()'s reason (the key check's decoding set errno).
  auto long_path = read_key_file("/etc/hookgate/keys/production_gateway_secret.key");
  ASSERT_FALSE(long_path);
  EXPECT_NE(long_path.error().message.find("No such file or directory"), std::string::npos)
      << long_path.error().message;
  // An ordinary missing file is named, with the reason.
  auto missing = read_key_file("/etc/hookgate/keys/proxy-server1.key.pub");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/etc/hookgate/keys/proxy-server1.key.pub: No such file"),
            std::string::npos)
      << missing.error().message;
}

TEST(CurveTest, AFortyCharacterKeyFilePathIsReadAsAFile) {
  char made[] = "/tmp/hg-z85-XXXXXX";  // short enough for a 40-character path; unique
  ASSERT_NE(::mkdtemp(made), nullptr);
  const std::string base = made;
  std::string path = base + "/";
  path += std::string(40 - path.size() - 4, 'k') + ".pub";
  ASSERT_EQ(path.size(), 40u);
  const auto keys = generate_curve_keypair();
  std::ofstream(path) << format_keypair_file(keys, false);
  auto server = read_server_key(path);
  fs::remove_all(base);
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_EQ(*server, keys.public_key);
}

// A CURVE server bus bound on loopback: its keypair written to dir/server.key, its allow-list at
// `allowed` (a file or a folder).
config::BusConfig curve_server_bus(const TempDir& dir, const CurveKeypair& server,
                                   const fs::path& allowed) {
  dir.write("server.key", format_keypair_file(server, true));
  config::BusConfig cfg;
  cfg.bind = "tcp://127.0.0.1:*";
  cfg.curve = {true, (dir / "server.key").string(), allowed.string()};
  return cfg;
}

// A publisher connected to `sub` as the CURVE client `client`.
Result<std::unique_ptr<Publisher>> curve_publisher(const Subscriber& sub,
                                                   const CurveKeypair& server,
                                                   const CurveKeypair& client) {
  return Publisher::connect({.endpoints = {sub.bound_endpoint()},
                             .server_public_key = server.public_key,
                             .client_keys = client});
}

// `client`'s events reach `sub` (read by `rx`): its handshake passed the allow-list.
void expect_events_get_in(const Subscriber& sub, testing::ReceivingThread& rx,
                          const CurveKeypair& server, const CurveKeypair& client) {
  auto pub = curve_publisher(sub, server, client);
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("ok.event", "{}"));
  auto parts = rx.next(std::chrono::seconds(5));
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts[0], "ok.event");
}

// libzmq admits any client that knows the server key unless ZAP says no: only listed keys pass.
// Found in review: every refused handshake was logged, and a peer that knows the (public) server
// key can open them as fast as it likes. Every one is counted; at most 5 lines a second logged.
TEST(CurveTest, OnlyAllowListedClientsGetEventsIn) {
  testing::LogCapture log;  // before the ZAP handler, whose thread logs
  TempDir dir;
  auto server = generate_curve_keypair();
  auto listed = generate_curve_keypair();
  auto unlisted = generate_curve_keypair();
  fs::create_directories(dir / "clients");
  dir.write("clients/svc.pub", format_keypair_file(listed, false));

  zmq::context_t ctx;
  auto sub = Subscriber::open(ctx, curve_server_bus(dir, server, dir / "clients"));
  ASSERT_TRUE(sub) << sub.error().message;

  testing::ReceivingThread rx(*sub.value());
  auto bad = curve_publisher(*sub.value(), server, unlisted);
  ASSERT_TRUE(bad);
  EXPECT_FALSE(bad.value()->wait_for_subscriber(std::chrono::milliseconds(500)));
  (void)bad.value()->publish("evil.event", "{}");
  EXPECT_TRUE(rx.next(std::chrono::milliseconds(300)).empty());

  ASSERT_NO_FATAL_FAILURE(expect_events_get_in(*sub.value(), rx, server, listed));

  // A flood of refused handshakes: all counted, few logged.
  auto& denied = metrics::counter("hookgate_bus_auth_denied_total", "");
  const uint64_t before = denied.value();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kAttempts = 40;
  {
    zmq::context_t clients;
    std::vector<zmq::socket_t> sockets;
    for (int i = 0; i < kAttempts; ++i) {
      zmq::socket_t s(clients, zmq::socket_type::sub);
      s.set(zmq::sockopt::linger, 0);
      ASSERT_TRUE(configure_curve_client(s, server.public_key, unlisted));
      s.connect(sub.value()->bound_endpoint());
      sockets.push_back(std::move(s));
    }
    ASSERT_TRUE(testing::wait_until([&] { return denied.value() >= before + kAttempts; },
                                    std::chrono::seconds(10)));
  }
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  const size_t lines = log.lines_containing("bus: refused CURVE client").size();
  EXPECT_GE(lines, 1u);  // the first bad publisher's, at least
  EXPECT_LE(lines, static_cast<size_t>(5 * (seconds + 2))) << seconds << " s";
  stop_zap_authenticator(ctx);
}

// Found in a platform engineer's pass: with a wrong server key the server closes each connection
// without a word, and libzmq dialled again every 100 ms (7 handshakes a second, logged on both
// sides). A CURVE publisher now waits a second or two between dials.
TEST(CurveTest, AWrongServerKeyIsDialledAgainOnlyEverySecondOrSo) {
  auto server = generate_curve_keypair();
  auto client = generate_curve_keypair();
  auto someone_else = generate_curve_keypair();
  zmq::context_t ctx;
  zmq::socket_t bus(ctx, zmq::socket_type::xsub);
  bus.set(zmq::sockopt::linger, 0);
  bus.set(zmq::sockopt::curve_server, true);
  bus.set(zmq::sockopt::curve_secretkey, server.secret_key);
  ASSERT_EQ(zmq_socket_monitor(bus.handle(), "inproc://wrong-key-accepts", ZMQ_EVENT_ACCEPTED), 0);
  zmq::socket_t accepts(ctx, zmq::socket_type::pair);
  accepts.connect("inproc://wrong-key-accepts");
  bus.bind("tcp://127.0.0.1:*");
  auto pub = Publisher::connect({.endpoints = {bus.get(zmq::sockopt::last_endpoint)},
                                 .server_public_key = someone_else.public_key,
                                 .client_keys = client});
  ASSERT_TRUE(pub) << pub.error().message;
  int accepted = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  while (std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t item{accepts.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) > 0)
      while (read_monitor_event(accepts)) ++accepted;
  }
  EXPECT_GE(accepted, 1);
  EXPECT_LE(accepted, 4) << "a connection every 100 ms would be about 25";
  pub.value().reset();
  zmq_socket_monitor(bus.handle(), nullptr, 0);
}

// Found in review: a signal caught without SA_RESTART (say, by a native hook's handler) made the
// ZAP handler's poll throw EINTR, and the handler stopped for good. libzmq then admits clients
// unvetted, which the allow-list check refuses: no new publisher, listed or not, got in again.
TEST(CurveTest, ASignalDoesNotStopTheZapHandler) {
  TempDir dir;
  auto server = generate_curve_keypair();
  auto listed = generate_curve_keypair();
  fs::create_directories(dir / "clients");
  dir.write("clients/svc.pub", format_keypair_file(listed, false));
  zmq::context_t ctx;
  auto sub = Subscriber::open(ctx, curve_server_bus(dir, server, dir / "clients"));
  ASSERT_TRUE(sub) << sub.error().message;

  struct sigaction ignore {};
  ignore.sa_handler = [](int) {};
  sigemptyset(&ignore.sa_mask);
  ignore.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &before), 0);
  // The handler's thread, once it has named itself (it may not have run yet).
  std::vector<pid_t> zap_threads;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        zap_threads.clear();
        for (const auto& task : fs::directory_iterator("/proc/self/task"))
          if (testing::read_text(task.path() / "comm") == "hg-zap\n")
            zap_threads.push_back(std::stoi(task.path().filename().string()));
        return !zap_threads.empty();
      },
      std::chrono::seconds(5)));
  int signalled = 0;
  for (const pid_t tid : zap_threads) {
    for (int i = 0; i < 5; ++i, ++signalled) {
      ::syscall(SYS_tgkill, ::getpid(), tid, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::sigaction(SIGUSR1, &before, nullptr);
  ASSERT_GT(signalled, 0);

  testing::ReceivingThread rx(*sub.value());
  ASSERT_NO_FATAL_FAILURE(expect_events_get_in(*sub.value(), rx, server, listed));
  stop_zap_authenticator(ctx);
}

// Found in review: ZAP is asked only at the handshake, so a publisher whose key was removed from
// the allow-list (and the list re-read, as SIGHUP does) kept sending over its open connection.
TEST(CurveTest, AKeyRemovedFromTheAllowListIsRefusedOnItsOpenConnection) {
  TempDir dir;
  auto server = generate_curve_keypair();
  auto client = generate_curve_keypair();
  dir.write("allowed", format_keypair_file(client, false));

  zmq::context_t ctx;
  const config::BusConfig cfg = curve_server_bus(dir, server, dir / "allowed");
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub) << sub.error().message;
  testing::ReceivingThread rx(*sub.value());
  auto pub = curve_publisher(*sub.value(), server, client);
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(std::chrono::seconds(5)));
  ASSERT_TRUE(pub.value()->publish("app.before", "{}"));
  ASSERT_FALSE(rx.next(std::chrono::seconds(5)).empty());

  auto& denied = metrics::counter("hookgate_bus_messages_denied_total", "");
  const uint64_t denied_before = denied.value();
  dir.write("allowed", "# nobody\n");
  ASSERT_TRUE(ensure_zap_authenticator(ctx, cfg.curve));  // what a reload does
  ASSERT_TRUE(pub.value()->publish("app.revoked", "{}"));
  // Once the message has been refused, nothing of it may have arrived.
  EXPECT_TRUE(testing::wait_until([&] { return denied.value() == denied_before + 1; },
                                  std::chrono::seconds(5)));
  EXPECT_TRUE(rx.next(std::chrono::milliseconds(500)).empty()) << "a revoked key got an event in";
  EXPECT_EQ(denied.value(), denied_before + 1);

  dir.write("allowed", format_keypair_file(client, false));
  ASSERT_TRUE(ensure_zap_authenticator(ctx, cfg.curve));
  ASSERT_TRUE(pub.value()->publish("app.again", "{}"));
  auto parts = rx.next(std::chrono::seconds(5));
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts[0], "app.again");
  stop_zap_authenticator(ctx);
}

// Found in review: libzmq 4.3 admits every CURVE client when no ZAP handler answers (its thread
// died, or a context outlived its registry entry). Messages over such a connection carry no
// User-Id, and the subscriber now refuses them.
TEST(CurveTest, WithoutAZapHandlerNothingGetsIn) {
  TempDir dir;
  auto server = generate_curve_keypair();
  auto stranger = generate_curve_keypair();
  dir.write("allowed", "# nobody\n");

  zmq::context_t ctx;
  auto sub = Subscriber::open(ctx, curve_server_bus(dir, server, dir / "allowed"));
  ASSERT_TRUE(sub) << sub.error().message;
  stop_zap_authenticator(ctx);  // the handler is gone
  testing::ReceivingThread rx(*sub.value());
  auto pub = curve_publisher(*sub.value(), server, stranger);
  ASSERT_TRUE(pub);
  if (!pub.value()->wait_for_subscriber(std::chrono::seconds(2)))
    GTEST_SKIP() << "this libzmq refuses clients without a ZAP handler by itself";
  ASSERT_TRUE(pub.value()->publish("evil.event", "{}"));
  EXPECT_TRUE(rx.next(std::chrono::milliseconds(500)).empty()) << "an unvetted client got in";
}

}  // namespace
}  // namespace hookgate::bus
