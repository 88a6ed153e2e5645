#include "bus/subscriber.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "bus/publisher.hpp"
#include "tests/support/gateway_process.hpp"

namespace hookgate::bus {
namespace {

void ignore_signal(int) {}

// Found in a soak: a queued event kept the whole 8 KiB read buffer it arrived in (zero-copy
// decoding), about 8 KiB per event while hooks were slow. The subscriber's context copies.
TEST(SubscriberTest, QueuedMessagesAreCopiedOutOfTheReadBuffer) {
  zmq::context_t ctx;
  if (zmq_ctx_get(ctx.handle(), kZmqZeroCopyRecv) < 0)
    GTEST_SKIP() << "this libzmq has no ZMQ_ZERO_COPY_RECV (the subscriber then keeps zero-copy)";
  ASSERT_EQ(zmq_ctx_get(ctx.handle(), kZmqZeroCopyRecv), 1);  // libzmq's default
  config::BusConfig cfg;
  cfg.bind = "tcp://127.0.0.1:*";
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub) << sub.error().message;
  EXPECT_EQ(zmq_ctx_get(ctx.handle(), kZmqZeroCopyRecv), 0);
}

// Found in review: a signal handler anywhere in the process (a native hook's SIGALRM, a profiler)
// made libzmq's poll fail with EINTR, cppzmq threw it, and the uncaught exception ended the
// gateway from its ingest thread.
TEST(SubscriberTest, ASignalDuringTheWaitIsNotAnError) {
  struct sigaction handler {
  }, before{};
  handler.sa_handler = ignore_signal;
  handler.sa_flags = SA_RESTART;  // libzmq's poll is interrupted even so
  sigemptyset(&handler.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &handler, &before), 0);

  zmq::context_t ctx;
  config::BusConfig cfg;
  cfg.bind = "tcp://127.0.0.1:*";
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub) << sub.error().message;

  std::atomic<bool> stop{false};
  std::atomic<int> received{0};
  std::atomic<bool> threw{false};
  std::string failure;  // read after the join
  std::thread receiver([&] {
    try {
      std::vector<zmq::message_t> frames;
      while (!stop)
        if (sub.value()->receive(frames, std::chrono::milliseconds(200))) ++received;
    } catch (const std::exception& e) {
      failure = e.what();
      threw = true;
    }
  });
  const pthread_t target = receiver.native_handle();
  for (int i = 0; i < 300 && !threw; ++i) {
    ::pthread_kill(target, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  auto finish = [&] {
    stop = true;
    receiver.join();
    ::sigaction(SIGUSR1, &before, nullptr);
  };
  if (threw) {
    finish();
    FAIL() << "receive() threw: " << failure;
  }

  // Still receiving after the signals.
  auto pub = Publisher::connect({.endpoints = {sub.value()->bound_endpoint()}});
  EXPECT_TRUE(pub && pub.value()->wait_for_subscriber(std::chrono::seconds(5)) &&
              pub.value()->publish("app.event", "{}"));
  (void)testing::wait_until([&] { return received > 0 || threw; }, std::chrono::seconds(5));
  finish();
  EXPECT_EQ(failure, "");
  EXPECT_EQ(received, 1);
}

// Found in review: a frame over the socket's hard cap (twice bus.max_message_bytes) from a peer
// the gateway connected to (a `hookgate bus` proxy whose own limit is higher) ends that
// connection with a protocol error, after which libzmq never dials the endpoint again: the
// gateway stayed deaf until restarted. It dials again by itself now, and counts the connection.
TEST(SubscriberTest, AConnectEndpointThatSentAnOversizeFrameIsDialledAgain) {
  zmq::context_t ctx;
  zmq::socket_t proxy(ctx, zmq::socket_type::xpub);
  proxy.set(zmq::sockopt::linger, 0);
  proxy.bind("tcp://127.0.0.1:*");
  config::BusConfig cfg;
  cfg.bind.reset();
  cfg.connect = {proxy.get(zmq::sockopt::last_endpoint)};
  cfg.max_message_bytes = 100;  // the socket refuses frames over 200 bytes
  auto sub = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(sub) << sub.error().message;
  const auto live = sub.value()->live_connections();
  ASSERT_TRUE(live);
  auto subscribed = [&] {
    zmq::message_t m;
    return testing::wait_until(
        [&] {
          std::vector<zmq::message_t> frames;
          (void)sub.value()->receive(frames, std::chrono::milliseconds(10));
          return proxy.recv(m, zmq::recv_flags::dontwait).has_value() && m.size() > 0 &&
                 m.data<char>()[0] == 1;
        },
        std::chrono::seconds(10));
  };
  ASSERT_TRUE(subscribed());
  ASSERT_TRUE(testing::wait_until([&] { return live->load() == 1; }, std::chrono::seconds(5)));

  proxy.send(zmq::buffer(std::string(1000, 'x')));
  // The connection ends; the subscriber's receive() dials again (its subscription comes back).
  ASSERT_TRUE(subscribed()) << "never dialled again";
  std::vector<zmq::message_t> frames;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        proxy.send(zmq::buffer(std::string(R"({"type":"app.event"})")));
        return sub.value()->receive(frames, std::chrono::milliseconds(50));
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(testing::wait_until([&] { return live->load() == 1; }, std::chrono::seconds(5)));
}

// Found in an exploratory run: libzmq unlinks an ipc:// socket file before it binds, so a second
// gateway on one path took it over and left the first deaf (its probes still 200). The second
// is refused now; a stale file nobody listens on is still bound over.
TEST(SubscriberTest, AnIpcPathAnotherSocketListensOnIsRefused) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "bus.sock").string();
  zmq::context_t ctx;
  config::BusConfig cfg;
  cfg.bind = "ipc://" + path;
  auto first = Subscriber::open(ctx, cfg);
  ASSERT_TRUE(first) << first.error().message;
  auto second = Subscriber::open(ctx, cfg);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("another process listens on " + path), std::string::npos)
      << second.error().message;
  // The first still receives.
  std::atomic<int> received{0};
  std::atomic<bool> stop{false};
  std::thread receiver([&] {
    std::vector<zmq::message_t> frames;
    while (!stop)
      if (first.value()->receive(frames, std::chrono::milliseconds(100))) ++received;
  });
  auto pub = Publisher::connect({.endpoints = {*cfg.bind}});
  EXPECT_TRUE(pub && pub.value()->wait_for_subscriber(std::chrono::seconds(5)) &&
              pub.value()->publish("app.event", "{}"));
  EXPECT_TRUE(testing::wait_until([&] { return received == 1; }, std::chrono::seconds(5)));
  stop = true;
  receiver.join();
  first.value().reset();
  // Left behind by a crash (nobody listens): bound over, as before.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", (path + ".stale").c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
  cfg.bind = "ipc://" + path + ".stale";
  auto over_stale = Subscriber::open(ctx, cfg);
  EXPECT_TRUE(over_stale) << over_stale.error().message;
  // Anything but a socket at the path is someone's file, which libzmq would delete (found in an
  // adversarial run: a bind named the spool file and turned it into a socket).
  const std::string precious = dir.write("precious.db", "keep me");
  cfg.bind = "ipc://" + precious;
  auto over_file = Subscriber::open(ctx, cfg);
  ASSERT_FALSE(over_file);
  EXPECT_NE(over_file.error().message.find("exists and is not a socket: binding would delete it"),
            std::string::npos)
      << over_file.error().message;
  EXPECT_EQ(testing::read_text(precious), "keep me");
}

}  // namespace
}  // namespace hookgate::bus
