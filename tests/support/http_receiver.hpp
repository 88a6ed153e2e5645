#pragma once
// A real HTTP/1.1 server on 127.0.0.1 for tests: the webhook endpoint the dispatcher (libcurl),
// integration tests and Python clients talk to. One thread accepts; each connection gets its own
// thread, so a handler that delays its answer (a hung endpoint) never holds up other
// connections. Keep-alive, Content-Length and chunked request bodies, Expect: 100-continue.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace hookgate::testing {

// A loopback port held bound but not listening: connecting to it is refused, as to a receiver
// that is down, and no other socket can take it meanwhile (a port picked and closed can be, by
// any process). An HttpReceiver made from it listens on the same socket: the receiver comes up.
class ClosedPort {
 public:
  ClosedPort();  // throws std::runtime_error
  ~ClosedPort();
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }
  std::string url(const std::string& path = "/") const;

 private:
  friend class HttpReceiver;
  int fd_ = -1;
  int port_ = 0;
};

class HttpReceiver {
 public:
  struct Request {
    std::string method;
    std::string path;  // the request target as sent, query included
    std::string body;
    std::map<std::string, std::string> headers;  // lower-cased names; repeats joined by ", "
    int64_t received_ns = 0;     // steady clock (hookgate::now_steady_ns) when it fully arrived
    uint64_t connection_id = 0;  // 1, 2, ... in accept order: equal ids mean a reused connection

    // The value of a header by case-insensitive name, "" when absent.
    std::string header(std::string_view name) const;
  };

  struct Response {
    int status = 200;
    std::string body;
    std::map<std::string, std::string> headers;
    // Wait this long before answering: a slow or hung endpoint. stop() cuts it short.
    std::chrono::milliseconds delay{0};
  };

  using Handler = std::function<Response(const Request&)>;

  // Listens on 127.0.0.1. Throws std::runtime_error if it cannot.
  // port 0 picks a free one; a fixed port lets a test bring an endpoint back up at the same URL.
  explicit HttpReceiver(int port = 0);
  // Listens on `down`'s socket (which is then closed with the receiver, not by `down`).
  explicit HttpReceiver(ClosedPort& down);
  ~HttpReceiver();
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const;

  // Every request so far, in arrival order. A request is recorded as soon as its body has
  // arrived, before the handler runs (so before any delay).
  std::vector<Request> requests() const;
  size_t count() const;
  // Blocks until at least n requests have arrived or the timeout passes; true if they did.
  bool wait_for(size_t n, std::chrono::milliseconds timeout) const;
  // Connections accepted so far.
  size_t connection_count() const;

  // Decides each answer (default: 200 with an empty body). Runs on the connection's thread.
  void set_handler(Handler handler);

  // Stops accepting, cuts delays short, closes every connection and joins all threads.
  // Idempotent; the destructor calls it.
  void stop();

 private:
  struct Connection {
    int fd = -1;
    uint64_t id = 0;
    std::thread thread;
    bool done = false;  // guarded by mu_
  };

  void accept_loop();
  void serve(Connection* connection);
  // Waits up to `delay`; false if the receiver is stopping.
  bool sleep_unless_stopping(std::chrono::milliseconds delay);
  void reap_finished_connections();

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // a request arrived, or stopping
  bool stopping_ = false;
  std::vector<Request> requests_;
  Handler handler_;
  std::list<std::unique_ptr<Connection>> connections_;
  uint64_t connections_accepted_ = 0;
  std::mutex stop_mu_;  // serializes stop()
};

}  // namespace hookgate::testing
