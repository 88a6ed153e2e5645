#include "tests/support/scripted_server.hpp"
#include "tests/support/loopback.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace hookgate::testing {

std::string read_request(int fd) {
  std::string data;
  char buffer[65536];
  size_t head_end = std::string::npos;
  size_t length = 0;
  for (;;) {
    // The head is looked for once: searching all of a 16 MiB body on every read took seconds.
    if (head_end == std::string::npos) {
      head_end = data.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t at = data.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) length = std::stoul(data.substr(at + 16));
      }
    }
    if (head_end != std::string::npos && data.size() >= head_end + 4 + length) return data;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return "";
    data.append(buffer, static_cast<size_t>(n));
  }
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

ScriptedServer::ScriptedServer(Script script) : script_(std::move(script)) {
  const LoopbackSocket listener = bind_loopback(0, 64);
  if (listener.fd < 0) throw std::runtime_error("cannot listen");
  listen_fd_ = listener.fd;
  port_ = listener.port;
  acceptor_ = std::thread([this] {
    for (int index = 0;; ++index) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      connections_.fetch_add(1);
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd, index] { script_(*this, fd, index); });
    }
  });
}

ScriptedServer::~ScriptedServer() {
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  acceptor_.join();  // no connection is added after this
  // Joined outside the lock: a script inside read() takes it to record a request, and a request
  // that arrived as the server was going away hung the test here.
  std::vector<int> fds;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    fds = fds_;
    threads.swap(threads_);
  }
  for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
  for (auto& thread : threads) thread.join();
  // Those a script has not reset() meanwhile (it closed them itself).
  std::lock_guard lock(mu_);
  for (int fd : fds_) ::close(fd);
}

std::string ScriptedServer::read(int fd) {
  std::string request = read_request(fd);
  if (!request.empty()) {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
  }
  return request;
}

void ScriptedServer::reset(int fd) {
  std::lock_guard lock(mu_);  // so the destructor neither shuts down nor closes it again
  fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  const linger abort{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(fd);
}

std::string ScriptedServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<std::string> ScriptedServer::requests() {
  std::lock_guard lock(mu_);
  return requests_;
}

ScriptedServer::Script answer_each(std::string response) {
  return [response](ScriptedServer& server, int fd, int) {
    while (!server.read(fd).empty()) send_all(fd, response);
  };
}

}  // namespace hookgate::testing
