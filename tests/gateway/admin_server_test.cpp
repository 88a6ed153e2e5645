#include "gateway/admin_server.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>

#include "tests/support/gateway_process.hpp"

namespace hookgate {
namespace {

using namespace std::chrono_literals;
using testing::http_get;

// GET `path` on a thread; the future holds "STATUS BODY".
std::future<std::string> get_async(int port, const std::string& path) {
  return std::async(std::launch::async, [port, path] {
    int status = 0;
    std::string body = http_get(port, path, &status);
    return std::to_string(status) + " " + body;
  });
}

// A /status render held until release(), as a native hook's slow snapshot would hold it.
class HeldStatus {
 public:
  std::string render() {
    std::unique_lock lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    return "{}";
  }
  bool wait_entered(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return entered_ >= n; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool released_ = false;
};

// Found in review: two /status requests, each waiting on native hooks' snapshots, held both admin
// threads, and /healthz went unanswered while they did.
TEST(AdminServerTest, ASlowStatusLeavesAThreadForTheProbes) {
  HeldStatus held;
  std::future<std::string> first, second, probe;  // outlive the release below
  auto server = AdminServer::start("127.0.0.1:0", "",
                                   {.ready = [] { return true; },
                                    .metrics = [] { return std::string("m 1\n"); },
                                    .status_json = [&] { return held.render(); }});
  ASSERT_TRUE(server) << server.error().message;
  // Destroyed before the server and the futures, so a failed assertion does not hang.
  struct ReleaseOnExit {
    HeldStatus& held;
    ~ReleaseOnExit() { held.release(); }
  } release_on_exit{held};
  const int port = server.value()->port();
  first = get_async(port, "/status");
  ASSERT_TRUE(held.wait_entered(1));
  second = get_async(port, "/status");
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready) << "a second /status was held";
  EXPECT_EQ(second.get().substr(0, 4), "503 ");
  probe = get_async(port, "/healthz");
  ASSERT_EQ(probe.wait_for(10s), std::future_status::ready) << "/healthz was not answered";
  EXPECT_EQ(probe.get(), "200 ok\n");
  held.release();
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(first.get(), "200 {}");
  EXPECT_EQ(http_get(port, "/status"), "{}") << "the lock is released after a render";
}

TEST(AdminServerTest, AHandlerThatThrowsAnswers500) {
  auto server = AdminServer::start("127.0.0.1:0", "", {.metrics = []() -> std::string {
                                     throw std::runtime_error("no memory for the text");
                                   }});
  ASSERT_TRUE(server) << server.error().message;
  int status = 0;
  http_get(server.value()->port(), "/metrics", &status);
  EXPECT_EQ(status, 500);
  http_get(server.value()->port(), "/healthz", &status);
  EXPECT_EQ(status, 200) << "the server is still up";
}

TEST(AdminServerTest, TokensGuardAllButTheProbes) {
  auto server = AdminServer::start(
      "127.0.0.1:0", "s3cret",
      {.ready = [] { return false; }, .metrics = [] { return std::string("m 1\n"); }});
  ASSERT_TRUE(server) << server.error().message;
  const int port = server.value()->port();
  int status = 0;
  http_get(port, "/metrics", &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(http_get(port, "/metrics", &status, "s3cret"), "m 1\n");
  EXPECT_EQ(status, 200);
  http_get(port, "/metrics", &status, "wrong");
  EXPECT_EQ(status, 401);
  http_get(port, "/readyz", &status);
  EXPECT_EQ(status, 503);
  http_get(port, "/healthz", &status);
  EXPECT_EQ(status, 200);
  http_get(port, "/nothing", &status, "s3cret");
  EXPECT_EQ(status, 404);
}

}  // namespace
}  // namespace hookgate
