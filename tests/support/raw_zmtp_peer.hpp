#pragma once
// A ZMTP 3.0 peer written by hand (NULL security, socket type XSUB), for frames a libzmq socket
// filters before they leave it: an unsubscribe for a prefix this peer never subscribed to.
#include <string>
#include <string_view>

namespace hookgate::testing {

class RawZmtpPeer {
 public:
  // Connects to `endpoint` (tcp://HOST:PORT with an IPv4 HOST, or ipc://PATH) and completes the
  // handshake; ok() says whether it did. Without `socket_type`, its READY names no Socket-Type
  // (libzmq accepts that).
  explicit RawZmtpPeer(const std::string& endpoint, bool socket_type = true);
  ~RawZmtpPeer();
  RawZmtpPeer(const RawZmtpPeer&) = delete;
  RawZmtpPeer& operator=(const RawZmtpPeer&) = delete;

  bool ok() const { return ok_; }
  // Sends one message of one frame; false when the connection is gone.
  bool send_frame(std::string_view bytes);

 private:
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace hookgate::testing
