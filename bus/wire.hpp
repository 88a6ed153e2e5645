#pragma once
// The bus wire format (PRODUCT.md "Events", pinned): a ZeroMQ multipart message of two frames,
// [event type, JSON envelope], so SUB prefix filters select by type. A single frame holding only
// the JSON is accepted too.
#include <zmq.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/common/result.hpp"
#include "gateway/event.hpp"

namespace hookgate::bus {

// The frames of a bus message (topic, envelope); the subscriber's read_all keeps one more at most.
inline constexpr size_t kMaxMessageFrames = 2;

// TCP keepalive and a user timeout on every bus connection, so a peer that is gone (a NAT or a
// firewall that dropped the flow, a host that vanished) is found and ZeroMQ reconnects, instead
// of the connection hanging until TCP gives up about 15 minutes later: an idle connection after
// about kKeepaliveIdleS + kKeepaliveCount × kKeepaliveIntervalS seconds (the probes also keep NAT
// mappings alive), one with data unacknowledged (a publisher or a proxy still sending) after
// kUnacknowledgedMaxMs. A live peer that only reads slowly still answers the kernel's
// zero-window probes and is kept (Linux 5.x and later). Not ZMTP heartbeats: libzmq counts their
// timeout while a socket whose queue is full has stopped reading, so a gateway held 30 s by a
// slow hook or a stuck spool would drop its publishers' connections and what they buffered.
inline constexpr int kKeepaliveIdleS = 60;
inline constexpr int kKeepaliveIntervalS = 10;
inline constexpr int kKeepaliveCount = 3;
inline constexpr int kUnacknowledgedMaxMs = 90000;

// Why libzmq cannot use `endpoint` (tcp:// only; other transports are left to it); nullopt if it
// looks usable. A bound socket may take port `*` (any free one) or 0. libzmq itself takes a port
// over 65535 modulo 65536 (tcp://127.0.0.1:99999 dials 34463), so every socket's endpoints are
// checked here first: the config's, the publisher library's and `hookgate bus`'s.
std::optional<std::string> tcp_endpoint_problem(std::string_view endpoint, bool bind);

// Why `run` could not bind `endpoint` on this machine: ZeroMQ binds an IP address, `*` or a
// network interface, never a host name (`tcp://localhost:5556` fails with "No such device"), and
// an IP address must be this machine's (tried with a throwaway socket on port 0); an ipc:// socket
// file needs a folder that exists and this user may write. Nothing for other transports, or when
// the endpoint is fine.
std::optional<std::string> bind_endpoint_problem(const std::string& endpoint);

// Why binding an ipc:// endpoint must not go ahead: a process listens on its socket file. libzmq
// unlinks the file before it binds, so a second gateway or proxy on one path took it over and
// left the first deaf, its probes still 200 (found in an exploratory run; tcp:// fails with
// EADDRINUSE instead). Learnt by connecting: a stale file nobody listens on is no problem.
std::optional<std::string> ipc_listener_problem(const std::string& endpoint);

// Binds `socket` to `endpoint` as every bus socket does: a tcp:// endpoint libzmq would misread
// is refused (tcp_endpoint_problem), and so is an ipc:// path that another process
// listens on, or that holds a file, is refused (ipc_listener_problem), and a failed bind says why
// (bind_endpoint_problem). `what` names the socket: "cannot bind WHAT to ENDPOINT: ...".
[[nodiscard]] Status bind_explained(zmq::socket_t& socket, const std::string& endpoint,
                                    std::string_view what);

// Two `bus.connect` endpoints that reach one peer (tcp://localhost:5556 and tcp://127.0.0.1:5556,
// or two spellings of one ipc:// path): each event would arrive twice, once per connection.
// Resolves host names (so for `check`, not the gateway's start, which must not wait on DNS).
struct SamePeer {
  size_t first = 0, second = 0;  // indexes into the list
  std::string peer;              // the address both reach
};
std::optional<SamePeer> same_peer(const std::vector<std::string>& connect);

// What every bus socket (subscriber, publisher, proxy) sets before binding or connecting to
// `connect` and `bind`: the keepalive above, and IPv6 when one of them is a bracketed address
// (`tcp://[::]:5556`). Only then: with IPv6 on, ZeroMQ binds an IPv4 address as IPv4-mapped
// (`tcp://[::ffff:127.0.0.1]:...`), a name that IPv4-only peers cannot connect to.
void set_transport_options(zmq::socket_t& socket, const std::vector<std::string>& connect,
                           const std::optional<std::string>& bind);

// Whether `message`, read from an XPUB socket, is an unsubscribe that a peer sent (as opposed to
// the one libzmq itself hands over when the last subscriber of a prefix goes away, which carries
// no peer metadata). libzmq passes a peer's unsubscribe on even for a prefix that peer never
// subscribed to, so one forged frame would make a proxy cancel every gateway's subscription
// upstream, or a publisher believe nobody listens. hookgate's subscribers never unsubscribe
// while connected, so the proxy and a publisher that only binds ignore such frames. (Not a
// publisher that connects: its peers are the endpoints it chose, and a proxy's genuine
// unsubscribes reach it from the proxy's socket, metadata and all.)
bool is_unsubscribe_from_a_peer(const zmq::message_t& message);

// Why a message was refused; `reason` is safe to log (it quotes at most a short prefix).
struct Rejection {
  std::string reason;
  std::string event_type;  // when it could be read
  std::string event_id;
  // The publisher library's stream stamp, when the envelope parsed and carried one: a rejected
  // message still arrived, so its number is no gap.
  std::string stream;
  std::optional<uint64_t> sequence;
};

// The publisher library's stamp on `event` (kStreamAttribute, kSequenceAttribute), if it has a
// well-formed one: a stream id of at most kMaxStreamIdBytes (the library's is a 36-character
// UUID; a longer one is ignored, since the gateway keeps each stream id it sees). The view points
// into the event.
struct StreamStamp {
  std::string_view stream;
  uint64_t sequence;
};
std::optional<StreamStamp> stream_stamp(const Event& event);

// Decodes and normalizes one received message. With two frames the topic must equal the envelope's
// `type`, or stand in for it when the envelope has none.
Result<Event, Rejection> decode_message(std::vector<zmq::message_t>& frames,
                                        size_t max_message_bytes, int64_t now_unix_ms);

// The two frames for `event` (which must already be normalized).
void encode_message(const Event& event, std::vector<zmq::message_t>& frames);

}  // namespace hookgate::bus
