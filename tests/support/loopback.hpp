#pragma once
// TCP on 127.0.0.1 for the test servers and raw test clients: one way to bind a free port and
// one way to connect, instead of a sockaddr_in spelled out in every file.

namespace hookgate::testing {

struct LoopbackSocket {
  int fd = -1;  // -1: socket, bind or listen failed
  int port = 0;
};

// Binds 127.0.0.1:port (0: the kernel picks a free one) and listens with `backlog`; a backlog of
// 0 binds only, which keeps the port taken while connections to it are refused.
[[nodiscard]] LoopbackSocket bind_loopback(int port = 0, int backlog = 128);

// A connected socket to 127.0.0.1:port, or -1. `from`: another loopback address to connect
// from (127.0.0.2, ...), for a server's view of several clients.
[[nodiscard]] int connect_loopback(int port, const char* from = nullptr);

}  // namespace hookgate::testing
