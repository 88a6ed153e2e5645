#include "tests/support/raw_zmtp_peer.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace hookgate::testing {
namespace {

bool send_all_bytes(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

int connect_to(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = endpoint.substr(6);
    if (path.size() >= sizeof address.sun_path) return -1;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0)
      return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  if (endpoint.rfind("tcp://", 0) != 0) return -1;
  const size_t colon = endpoint.rfind(':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))));
  if (::inet_pton(AF_INET, endpoint.substr(6, colon - 6).c_str(), &address.sin_addr) != 1)
    return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0)
    return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

}  // namespace

RawZmtpPeer::RawZmtpPeer(const std::string& endpoint, bool socket_type)
    : fd_(connect_to(endpoint)) {
  if (fd_ < 0) return;
  // Greeting (RFC 23): signature, version 3.0, mechanism NULL, as-server 0, filler.
  std::string greeting("\xff\0\0\0\0\0\0\0\x01\x7f\x03\x00", 12);
  std::string mechanism("NULL");
  mechanism.resize(20, '\0');
  greeting += mechanism;
  greeting.append(32, '\0');
  if (!send_all_bytes(fd_, greeting)) return;
  char peer[64];
  for (size_t got = 0; got < sizeof peer;) {
    ssize_t n = ::recv(fd_, peer + got, sizeof peer - got, 0);
    if (n <= 0) return;
    got += static_cast<size_t>(n);
  }
  // READY with the one property every libzmq peer sends, Socket-Type, or with none.
  std::string body = "\x05READY";
  if (socket_type) {
    body += "\x0bSocket-Type";
    body += std::string("\0\0\0\x04", 4) + "XSUB";
  }
  std::string command = "\x04";
  command += static_cast<char>(body.size());
  ok_ = send_all_bytes(fd_, command + body);
}

RawZmtpPeer::~RawZmtpPeer() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawZmtpPeer::send_frame(std::string_view bytes) {
  if (!ok_ || bytes.size() > 255) return false;
  std::string frame(1, '\0');  // flags: last frame, short size
  frame += static_cast<char>(bytes.size());
  frame += bytes;
  return send_all_bytes(fd_, frame);
}

}  // namespace hookgate::testing
