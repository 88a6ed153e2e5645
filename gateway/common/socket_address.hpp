#pragma once
// A socket address built from a literal IPv4 or IPv6 address (no resolver): what the admin
// endpoint listens on and what the built-in HTTP client connects to when the URL's host is an IP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace hookgate {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

struct HostPort {
  std::string host;  // as written, brackets of an IPv6 literal removed; may be empty
  uint16_t port = 0;
};

// "HOST:PORT" (`admin.listen`): the port all digits, 0 to 65535 (0: the kernel picks); nullopt
// otherwise. The host is not checked here.
inline std::optional<HostPort> split_host_port(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 >= listen.size() || listen.size() - colon > 6)
    return std::nullopt;
  unsigned port = 0;
  for (size_t i = colon + 1; i < listen.size(); ++i) {
    if (listen[i] < '0' || listen[i] > '9') return std::nullopt;
    port = port * 10 + static_cast<unsigned>(listen[i] - '0');
  }
  if (port > 65535) return std::nullopt;
  std::string host = listen.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return HostPort{std::move(host), static_cast<uint16_t>(port)};
}

// nullopt when `host` is not a literal address (a name, or garbage). IPv6 without brackets.
inline std::optional<SocketAddress> numeric_socket_address(const std::string& host, uint16_t port) {
  SocketAddress address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    address.length = sizeof(sockaddr_in);
    return address;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    address.length = sizeof(sockaddr_in6);
    return address;
  }
  return std::nullopt;
}

// Why a listener cannot bind `address`, learnt by binding a throwaway socket to it (strerror's
// text: "Cannot assign requested address" for an address that is not this machine's, "Permission
// denied" for a privileged port); nullopt when it binds. Port 0 asks only about the address.
inline std::optional<std::string> bind_problem(const SocketAddress& address) {
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string(std::strerror(errno));
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  std::optional<std::string> problem;
  if (::bind(fd, address.get(), address.length) != 0) problem = std::strerror(errno);
  ::close(fd);
  return problem;
}

}  // namespace hookgate
