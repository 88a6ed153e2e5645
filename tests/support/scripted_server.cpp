#include "tests/support/scripted_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace hookgate::testing {

std::string read_request(int fd) {
  std::string data;
  char buffer[65536];
  for (;;) {
    size_t head_end = data.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      size_t length = 0;
      size_t at = data.find("Content-Length: ");
      if (at != std::string::npos && at < head_end) length = std::stoul(data.substr(at + 16));
      if (data.size() >= head_end + 4 + length) return data;
    }
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
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error("cannot listen");
  socklen_t length = sizeof address;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
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
  for (int fd : fds) ::close(fd);
}

std::string ScriptedServer::read(int fd) {
  std::string request = read_request(fd);
  if (!request.empty()) {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
  }
  return request;
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
