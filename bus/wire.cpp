#include "bus/wire.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>

#include "bus/sequence_gaps.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/file_folder.hpp"
#include "gateway/common/socket_address.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::bus {

void set_transport_options(zmq::socket_t& socket, const std::vector<std::string>& connect,
                           const std::optional<std::string>& bind) {
  const auto bracketed = [](const std::string& e) { return e.find("://[") != std::string::npos; };
  if (std::any_of(connect.begin(), connect.end(), bracketed) || (bind && bracketed(*bind)))
    socket.set(zmq::sockopt::ipv6, true);
  socket.set(zmq::sockopt::tcp_keepalive, 1);
  socket.set(zmq::sockopt::tcp_keepalive_idle, kKeepaliveIdleS);
  socket.set(zmq::sockopt::tcp_keepalive_intvl, kKeepaliveIntervalS);
  socket.set(zmq::sockopt::tcp_keepalive_cnt, kKeepaliveCount);
  socket.set(zmq::sockopt::tcp_maxrt, kUnacknowledgedMaxMs);
}

bool is_unsubscribe_from_a_peer(const zmq::message_t& message) {
  if (message.size() == 0 || *static_cast<const unsigned char*>(message.data()) != 0) return false;
  // A peer's messages carry metadata (its handshake's Socket-Type, which a hand-made READY may
  // leave out, and the Peer-Address libzmq adds for tcp and ipc); libzmq's own carry none.
  zmq_msg_t* raw = const_cast<zmq::message_t&>(message).handle();
  return zmq_msg_gets(raw, "Socket-Type") != nullptr ||
         zmq_msg_gets(raw, "Peer-Address") != nullptr;
}

namespace {

// The socket file an ipc:// endpoint names; nullopt for another transport, `ipc://*` (a fresh
// file libzmq names) and `ipc://@name` (Linux's abstract namespace, no file).
std::optional<std::string> ipc_socket_file(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) != 0) return std::nullopt;
  std::string path = endpoint.substr(6);
  if (path.empty() || path == "*" || path[0] == '@') return std::nullopt;
  return path;
}

// libzmq unlinks whatever is at the path before it binds: anything but a socket there is a
// file of someone's (found in an adversarial run: `bind: ipc://data/s.db` turned the spool into
// a socket, and a config typo could do it to any file the gateway may delete).
std::optional<std::string> ipc_path_not_a_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISSOCK(st.st_mode)) return std::nullopt;
  return path + " exists and is not a socket: binding would delete it (name a path of its own)";
}

}  // namespace

std::optional<std::string> ipc_listener_problem(const std::string& endpoint) {
  const auto path = ipc_socket_file(endpoint);
  if (!path) return std::nullopt;
  if (auto why = ipc_path_not_a_socket(*path)) return why;
  sockaddr_un address{};
  if (path->size() >= sizeof address.sun_path) return std::nullopt;  // libzmq says why
  address.sun_family = AF_UNIX;
  std::copy(path->begin(), path->end(), address.sun_path);
  // Non-blocking: a listener that is stopped with its backlog full must not hang this start
  // (EAGAIN then says someone listens). Only a refusal or no file at all means nobody does: a
  // file this user may not connect to (EACCES) may be another user's live socket.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::nullopt;
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = rc == 0 ? 0 : errno;
  ::close(fd);
  if (error == ECONNREFUSED || error == ENOENT) return std::nullopt;
  if (error == EACCES || error == EPERM)
    return "a socket file this user may not use is in the way at " + *path +
           " (another user's gateway or proxy?)";
  return "another process listens on " + *path +
         " (a running gateway or proxy?); binding would take the socket file from it";
}

Status bind_explained(zmq::socket_t& socket, const std::string& endpoint, std::string_view what) {
  const std::string refused = "cannot bind " + std::string(what) + " to " + endpoint + ": ";
  if (auto why = tcp_endpoint_problem(endpoint, true)) return make_error(refused + *why);
  if (auto why = ipc_listener_problem(endpoint)) return make_error(refused + *why);
  try {
    socket.bind(endpoint);
    return {};
  } catch (const zmq::error_t& e) {
    std::string message = refused + e.what();
    if (auto why = bind_endpoint_problem(endpoint)) message += " (" + *why + ")";
    return make_error(message);
  }
}

std::optional<std::string> tcp_endpoint_problem(std::string_view endpoint, bool bind) {
  if (!endpoint.starts_with("tcp://")) return std::nullopt;
  if (endpoint.find_first_of(" \t\r\n") != std::string_view::npos)
    return "holds a space or line break";
  // tcp://[SOURCE;]HOST:PORT: the port ends the text.
  const std::string address(endpoint.substr(std::string_view("tcp://").size()));
  if (address.ends_with(":*")) {
    if (bind) return std::nullopt;
    return "port * is for bus.bind and other bound sockets; a connection needs the peer's port";
  }
  if (address.find(':') == std::string::npos || address.ends_with(":"))
    return std::string("no port (tcp://HOST:PORT") + (bind ? ", or tcp://HOST:* for any)" : ")");
  const auto split = split_host_port(address);
  if (!split || (split->port == 0 && !bind)) return "the port is not a number from 1 to 65535";
  // libzmq refuses `*` at `run` (EINVAL), and takes an empty host and never connects.
  if (!bind) {
    const std::string_view peer = std::string_view(address).substr(address.rfind(';') + 1);
    const std::string_view host = peer.substr(0, peer.rfind(':'));
    if (host.empty() || host == "*" || host == "[*]")
      return "a connection needs the peer's host or address (* and an empty host are for "
             "bus.bind and other bound sockets)";
  }
  return std::nullopt;
}

std::optional<std::string> bind_endpoint_problem(const std::string& endpoint) {
  if (auto path = ipc_socket_file(endpoint)) {
    if (auto why = file_folder_problem(*path)) return "socket file " + *path + ": " + *why;
    return ipc_path_not_a_socket(*path);
  }
  if (endpoint.rfind("tcp://", 0) != 0) return std::nullopt;
  const std::string_view address = std::string_view(endpoint).substr(6);
  std::string host(address.substr(0, address.rfind(':')));
  if (host.empty() || host == "*") return std::nullopt;
  // An address: is it this machine's? (Port 0: whether the port is free is another matter, and
  // `check` runs beside the gateway that holds it.) A zone-scoped one (fe80::1%eth0) is let be.
  std::string literal = host;
  if (literal.size() > 2 && literal.front() == '[' && literal.back() == ']')
    literal = literal.substr(1, literal.size() - 2);
  if (auto address = numeric_socket_address(literal, 0)) {
    if (auto why = bind_problem(*address))
      return "'" + host + "' is not an address this machine can listen on (" + *why + ")";
    return std::nullopt;
  }
  const std::string without_zone = literal.substr(0, literal.find('%'));  // fe80::1%eth0
  in6_addr ip{};
  if (inet_pton(AF_INET6, without_zone.c_str(), &ip) == 1 || if_nametoindex(host.c_str()) != 0)
    return std::nullopt;
  return "'" + host +
         "' is neither an IP address nor a network interface here; a bind takes an address "
         "(tcp://127.0.0.1:5556), * (every interface) or an interface name, not a host name";
}

namespace {

// The peers an endpoint reaches, as "address:port" or "ipc:PATH"; the endpoint itself when it
// names neither (another transport, a source address, a name that does not resolve).
std::vector<std::string> peers_of(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0) {
    const auto file = ipc_socket_file(endpoint);
    if (!file) return {endpoint};  // the abstract namespace, or `*`: as written
    const std::string& path = *file;
    std::error_code ec;
    // Absolute first: weakly_canonical leaves a relative path relative.
    const auto canonical =
        std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return {"ipc:" + (ec ? path : canonical.string())};
  }
  if (endpoint.rfind("tcp://", 0) != 0 || endpoint.find(';') != std::string::npos)
    return {endpoint};
  const auto host_port = split_host_port(endpoint.substr(6));
  if (!host_port) return {endpoint};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host_port->host.c_str(), std::to_string(host_port->port).c_str(), &hints,
                  &found) != 0)
    return {endpoint};
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char numeric[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, numeric, sizeof numeric, nullptr, 0,
                    NI_NUMERICHOST) != 0)
      continue;
    const bool v6 = a->ai_family == AF_INET6;
    out.push_back((v6 ? "[" : "") + std::string(numeric) + (v6 ? "]:" : ":") +
                  std::to_string(host_port->port));
  }
  freeaddrinfo(found);
  if (out.empty()) out.push_back(endpoint);
  return out;
}

// Copies the stream stamp of a parsed but rejected envelope into `rej`.
Rejection with_sequence(const Event& ev, Rejection rej) {
  if (auto stamp = stream_stamp(ev)) {
    rej.stream = stamp->stream;
    rej.sequence = stamp->sequence;
  }
  return rej;
}

}  // namespace

std::optional<SamePeer> same_peer(const std::vector<std::string>& connect) {
  if (connect.size() < 2) return std::nullopt;  // no lookup for nothing to compare
  std::map<std::string, size_t> reached;        // peer → the first endpoint that reaches it
  for (size_t i = 0; i < connect.size(); ++i) {
    for (const auto& peer : peers_of(connect[i])) {
      auto [it, fresh] = reached.emplace(peer, i);
      if (!fresh && it->second != i) return SamePeer{it->second, i, peer};
    }
  }
  return std::nullopt;
}

std::optional<StreamStamp> stream_stamp(const Event& event) {
  const JsonValue* stream = event.find(kStreamAttribute);
  const JsonValue* seq = event.find(kSequenceAttribute);
  if (stream == nullptr || seq == nullptr || !stream->IsString() || !seq->IsUint64() ||
      stream->GetStringLength() > kMaxStreamIdBytes)
    return std::nullopt;
  return StreamStamp{std::string_view(stream->GetString(), stream->GetStringLength()),
                     seq->GetUint64()};
}

Result<Event, Rejection> decode_message(std::vector<zmq::message_t>& frames,
                                        size_t max_message_bytes, int64_t now_unix_ms) {
  if (frames.empty() || frames.size() > kMaxMessageFrames)
    return Rejection{"expected 1 or 2 frames, got " +
                     (frames.empty() ? std::string("none") : std::string("more"))};
  size_t total = 0;
  for (const auto& f : frames) total += f.size();
  std::string_view topic;
  if (frames.size() == 2) topic = frames[0].to_string_view();
  // What a rejection names (type, id) came from the sender: logs and diagnostics get a short,
  // printable copy, never the raw text (up to 2 MiB, control characters included).
  constexpr size_t kNamedMax = 200;
  std::string_view json = frames.back().to_string_view();
  // Refused before its envelope is read, a message still carries its sequence stamp: without it
  // the gap it leaves counts as a message that never arrived, so it would be counted twice and
  // send operators looking for a loss on the network. (At most twice max_message_bytes: the
  // socket refuses larger frames.)
  // It names the event too, when it can: an operator looks for who sends oversize events.
  auto stamped = [&](Rejection rejection) {
    rejection.event_type = printable_prefix(topic, kNamedMax);
    auto parsed = Event::parse(json);
    if (!parsed) return rejection;
    if (rejection.event_type.empty())
      rejection.event_type = printable_prefix(parsed->type(), kNamedMax);
    rejection.event_id = printable_prefix(parsed->id(), kNamedMax);
    return with_sequence(*parsed, std::move(rejection));
  };
  if (total > max_message_bytes)
    return stamped(Rejection{"message of " + std::to_string(total) +
                             " bytes exceeds max_message_bytes " +
                             std::to_string(max_message_bytes)});
  // The topic may become the event's type; a type must be text like the rest of the envelope.
  if (!valid_utf8(topic)) return stamped(Rejection{"topic frame is not valid UTF-8"});

  auto parsed = Event::parse(json);
  // Not a word of the payload itself: the event never reached the hooks that redact it, and
  // the reason goes to the log and, as hookgate.event.rejected, to webhooks.
  if (!parsed)
    return Rejection{"payload of " + std::to_string(json.size()) + " bytes is not a JSON object (" +
                         parsed.error().message + ")",
                     printable_prefix(topic, kNamedMax)};
  Event ev = std::move(parsed).value();
  auto type_it = ev.doc().FindMember("type");
  if (!topic.empty()) {
    if (type_it == ev.doc().MemberEnd()) {
      (void)ev.set_string("type", topic);  // a top-level member: cannot fail
    } else if (!type_it->value.IsString() ||
               std::string_view(type_it->value.GetString(), type_it->value.GetStringLength()) !=
                   topic) {
      return with_sequence(
          ev, Rejection{"topic frame '" + printable_prefix(topic) +
                            "' does not match the envelope's type",
                        printable_prefix(topic, kNamedMax), printable_prefix(ev.id(), kNamedMax)});
    }
  }
  if (auto st = ev.normalize(now_unix_ms); !st)
    return with_sequence(ev, Rejection{st.error().message, printable_prefix(ev.type(), kNamedMax),
                                       printable_prefix(ev.id(), kNamedMax)});
  if (is_diagnostic_type(ev.type()))
    return with_sequence(ev, Rejection{kReservedTypeReason, printable_prefix(ev.type(), kNamedMax),
                                       printable_prefix(ev.id(), kNamedMax)});
  return ev;
}

void encode_message(const Event& event, std::vector<zmq::message_t>& frames) {
  frames.clear();
  std::string_view type = event.type();
  frames.emplace_back(type.data(), type.size());
  std::string json = event.to_json();
  frames.emplace_back(json.data(), json.size());
}

}  // namespace hookgate::bus
