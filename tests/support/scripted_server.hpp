#pragma once
// A TCP server on 127.0.0.1 that runs a script per connection, for HTTP clients facing what a
// well-behaved server never does: early answers, endless bodies, resets, garbage. The ordinary
// paths use HttpReceiver.
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace hookgate::testing {

// Reads one request (head and Content-Length body); "" when the peer closed first.
std::string read_request(int fd);

// Sends all of `data`, or stops at the first error (the peer went away).
void send_all(int fd, std::string_view data);

// Accepts connections and runs `script` on each, on a thread of its own; records every request
// it reads through read().
class ScriptedServer {
 public:
  using Script = std::function<void(ScriptedServer&, int fd, int connection_index)>;

  explicit ScriptedServer(Script script);
  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string read(int fd);
  // Closes `fd` with a reset (SO_LINGER 0) instead of a FIN; the server no longer holds it.
  void reset(int fd);
  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const;
  int connections() const { return connections_.load(); }
  std::vector<std::string> requests();

 private:
  Script script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::vector<std::string> requests_;
};

// Answers every request on a connection with `response`, keeping the connection open.
ScriptedServer::Script answer_each(std::string response);

}  // namespace hookgate::testing
