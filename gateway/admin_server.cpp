#include "gateway/admin_server.hpp"

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/socket_address.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"

namespace hookgate {

#if MHD_VERSION >= 0x00097002
using MhdResult = enum MHD_Result;
#else
using MhdResult = int;
#endif

namespace {

// "Bearer TOKEN" (the scheme is case-insensitive, RFC 9110 §11.1). The SHA-256 digests of the
// guess and the token are compared, in constant time, so the answer's timing says nothing about
// how much of a guess was right, nor how long the token is.
bool bearer_matches(std::string_view header, const std::string& token) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return false;
  bool scheme_ok = true;
  for (size_t i = 0; i < kScheme.size(); ++i)
    scheme_ok &= std::tolower(static_cast<unsigned char>(header[i])) == kScheme[i];
  // Spaces past the first and after the token are HTTP's whitespace, not part of it (RFC 9110
  // §11.4 allows 1*SP after the scheme; a header value's trailing whitespace is not its text).
  const std::string_view guess = trim(header.substr(kScheme.size()));
  unsigned char guess_digest[SHA256_DIGEST_LENGTH], token_digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(guess.data()), guess.size(), guess_digest);
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), token_digest);
  return CRYPTO_memcmp(guess_digest, token_digest, sizeof guess_digest) == 0 && scheme_ok;
}

// libmicrohttpd's own unescaper turns "%00" into a NUL, which ends the C string a handler is
// given: "/healthz%00junk" was answered as /healthz. This one decodes every other %HH and keeps
// "%00" as written, so such a target matches no path (404).
size_t unescape_keeping_nul(void*, MHD_Connection*, char* s) {
  char* out = s;
  for (const char* in = s; *in != '\0'; ++in) {
    const int hi = in[0] == '%' ? hex_digit_value(in[1]) : -1;
    const int lo = hi >= 0 ? hex_digit_value(in[2]) : -1;
    if (lo >= 0 && (hi | lo) != 0) {
      *out++ = static_cast<char>(hi * 16 + lo);
      in += 2;
    } else {
      *out++ = *in;
    }
  }
  *out = '\0';
  return static_cast<size_t>(out - s);
}

// Connections the admin listener holds at once: scrapers and probes need a handful; without a
// cap, slow clients could take the process's file descriptors.
constexpr unsigned kMaxAdminConnections = 64;
// Connections still sending their request's head, per client address and in all. Past either, a
// new connection closes the oldest such one instead of being refused: a refusal would go to the
// probe, while a slow client's oldest connection is the one doing the harm (found in an SRE pass:
// 16 trickling connections from 127.0.0.1, retaken as each was cut, kept /healthz and /metrics
// from the same address refused). The total stays below kMaxAdminConnections, so room is left
// for connections being answered.
constexpr size_t kMaxWaitingPerClient = 16;
constexpr size_t kMaxWaiting = 48;
// Connections of one address in any state: above the waiting cap (so a new connection still gets
// in to close the oldest waiting one), below the total, so no single address holds every one.
constexpr unsigned kMaxConnectionsPerClient = 32;

// The client's address without its port: connections from one host share it.
std::string client_address(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return {};
  const sockaddr* addr = info->client_addr;
  char text[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  else if (addr->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
                sizeof text);
  return text;
}

metrics::Counter& requests_cut() {
  static metrics::Counter& cut = metrics::counter(
      "hookgate_admin_requests_cut_total",
      "Admin connections closed before their request's head was in: past the deadline, or the "
      "oldest of too many waiting ones, to make room (slow or hostile clients)");
  return cut;
}
// Threads serving requests: a slow /status (native hooks' snapshots) must not hold /healthz.
constexpr unsigned kAdminThreads = 2;

}  // namespace

struct AdminDispatch {
  static MhdResult respond(MHD_Connection* c, unsigned status, const std::string& body,
                           const char* type, const char* header = nullptr,
                           const char* header_value = nullptr) {
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                      MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;  // out of memory: libmicrohttpd closes the connection
    MHD_add_response_header(r, "Content-Type", type);
    // One request per connection: a kept-alive scraper would sit idle into the head deadline
    // (and be counted as a slow client), and pipelined requests read slowly would hold a
    // connection past it. A new loopback connection per scrape costs next to nothing.
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (header != nullptr) MHD_add_response_header(r, header, header_value);
    MhdResult ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
  }

  // A connection opened, or closed (before libmicrohttpd closes its socket).
  static void connection_changed(void* cls, MHD_Connection* c, void**,
                                 MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<AdminServer*>(cls);
    if (code != MHD_CONNECTION_NOTIFY_STARTED) {
      std::lock_guard lock(self->reading_mu_);
      self->reading_.erase(c);
      return;
    }
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == nullptr) return;
    std::string client = client_address(c);
    std::lock_guard lock(self->reading_mu_);
    self->make_room_locked(client);
    self->reading_[c] = {info->connect_fd, std::chrono::steady_clock::now(), std::move(client)};
  }

  // A request answered: a kept-alive connection's next request has its own deadline.
  static void request_completed(void* cls, MHD_Connection* c, void**, MHD_RequestTerminationCode) {
    auto* self = static_cast<AdminServer*>(cls);
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == nullptr) return;
    std::string client = client_address(c);
    std::lock_guard lock(self->reading_mu_);
    self->reading_[c] = {info->connect_fd, std::chrono::steady_clock::now(), std::move(client)};
  }

  // A handler that throws (out of memory while rendering) answers 500; an exception must not
  // leave libmicrohttpd's thread and end the gateway.
  static MhdResult handle(void* cls, MHD_Connection* c, const char* url, const char* method,
                          const char*, const char*, size_t*, void**) {
    {
      auto* self = static_cast<AdminServer*>(cls);
      std::lock_guard lock(self->reading_mu_);
      self->reading_.erase(c);  // its head is in: the idle timeout covers the rest
    }
    try {
      return route(static_cast<AdminServer*>(cls), c, url, method);
    } catch (const std::exception& e) {
      spdlog::error("admin: {} {} failed: {}", method, url, e.what());
      return respond(c, 500, "internal error\n", "text/plain");
    }
  }

  static MhdResult route(AdminServer* self, MHD_Connection* c, const char* url,
                         const char* method) {
    if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0)
      return respond(c, 405, "method not allowed\n", "text/plain", "Allow", "GET, HEAD");
    std::string path(url);
    // An absolute-form target ("GET http://host:9464/healthz", RFC 9112 §3.2.2), which a server
    // must accept: the path is what follows the authority.
    // (The scheme is case-insensitive, RFC 3986 §3.1.)
    if (iequals(std::string_view(path).substr(0, 7), "http://") ||
        iequals(std::string_view(path).substr(0, 8), "https://")) {
      const size_t slash = path.find('/', path.find("//") + 2);
      path = slash == std::string::npos ? "/" : path.substr(slash);
    }
    if (path == "/healthz") return respond(c, 200, "ok\n", "text/plain");
    if (path == "/readyz") {
      bool ready = !self->handlers_.ready || self->handlers_.ready();
      return respond(c, ready ? 200 : 503, ready ? "ready\n" : "not ready\n", "text/plain");
    }
    if (!self->token_.empty()) {
      const char* auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
      if (!auth || !bearer_matches(auth, self->token_))
        return respond(c, 401, "unauthorized\n", "text/plain", "WWW-Authenticate", "Bearer");
    }
    if (path == "/metrics" && self->handlers_.metrics)
      return respond(c, 200, self->handlers_.metrics(), "text/plain; version=0.0.4; charset=utf-8");
    if (path == "/status" && self->handlers_.status_json) {
      // One render at a time: a render waits on native hooks' snapshots (up to their timeouts),
      // and two at once would hold both admin threads, leaving the probes unanswered.
      std::unique_lock rendering(self->status_mu_, std::try_to_lock);
      if (!rendering.owns_lock())
        return respond(c, 503, "{\"error\": \"another /status is being rendered; retry\"}\n",
                       "application/json", "Retry-After", "1");
      return respond(c, 200, self->handlers_.status_json(), "application/json");
    }
    return respond(c, 404, "not found\n", "text/plain");
  }
};

namespace {
// What admin.listen's host means: empty or * every IPv4 interface, localhost the loopback.
std::optional<SocketAddress> listen_address(const std::string& host, uint16_t port) {
  if (host.empty() || host == "*") return numeric_socket_address("0.0.0.0", port);
  if (host == "localhost") return numeric_socket_address("127.0.0.1", port);
  return numeric_socket_address(host, port);
}
}  // namespace

std::optional<std::string> admin_listen_problem(const std::string& listen) {
  auto host_port = split_host_port(listen);
  if (!host_port) return std::nullopt;  // the config loader reports the form
  auto addr = listen_address(host_port->host, 0);
  if (!addr) return std::nullopt;
  if (auto why = bind_problem(*addr))
    return "'" + host_port->host + "' is not an address this machine can listen on (" + *why + ")";
  return std::nullopt;
}

Result<std::unique_ptr<AdminServer>> AdminServer::start(
    const std::string& listen, std::string token, AdminHandlers handlers,
    std::chrono::milliseconds request_deadline) {
  auto host_port = split_host_port(listen);
  if (!host_port) return make_error("admin.listen: expected HOST:PORT, got " + listen);
  std::string host = std::move(host_port->host);
  const uint16_t port = host_port->port;

  std::unique_ptr<AdminServer> server(new AdminServer());
  server->request_deadline_ = request_deadline;
  server->token_ = std::move(token);
  server->handlers_ = std::move(handlers);

  auto addr = listen_address(host, port);
  if (!addr) return make_error("admin.listen: bad IP address " + host);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
  // `[::]` takes IPv4 too, as the bus's `tcp://[::]:port` does; other IPv6 addresses only v6.
  if (addr->family() == AF_INET6) flags |= host == "::" ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
  server->daemon_ = MHD_start_daemon(
      flags, port, nullptr, nullptr, &AdminDispatch::handle, server.get(), MHD_OPTION_SOCK_ADDR,
      addr->get(), MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_THREAD_POOL_SIZE, kAdminThreads,
      MHD_OPTION_CONNECTION_LIMIT, kMaxAdminConnections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      kMaxConnectionsPerClient, MHD_OPTION_NOTIFY_CONNECTION, &AdminDispatch::connection_changed,
      server.get(), MHD_OPTION_NOTIFY_COMPLETED, &AdminDispatch::request_completed, server.get(),
      MHD_OPTION_UNESCAPE_CALLBACK, &unescape_keeping_nul, nullptr, MHD_OPTION_END);
  if (!server->daemon_) {
    // libmicrohttpd does not say why; a throwaway socket on the same address does.
    const auto why = bind_problem(*addr);
    return make_error("cannot listen on " + listen +
                      " for the admin endpoint: " + why.value_or("libmicrohttpd could not start"));
  }
  server->deadline_thread_ = std::thread([raw = server.get()] {
    name_this_thread("hg-admin-dl");
    raw->cut_slow_requests();
  });
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info ? info->port : port;
  return server;
}

void AdminServer::make_room_locked(const std::string& client) {
  static LogLimiter limiter(1, "admin: waiting connections cut");
  // Waiting connections per client, and each client's oldest.
  std::unordered_map<std::string_view, std::pair<size_t, Readings::iterator>> clients;
  for (auto it = reading_.begin(); it != reading_.end(); ++it) {
    auto& [count, oldest] = clients.try_emplace(it->second.client, 0, it).first->second;
    ++count;
    if (it->second.since < oldest->second.since) oldest = it;
  }
  const auto own = clients.find(client);
  const size_t from_client = own == clients.end() ? 0 : own->second.first;
  auto victim = reading_.end();
  if (from_client >= kMaxWaitingPerClient) {
    victim = own->second.second;
  } else if (reading_.size() >= kMaxWaiting) {
    // Everyone's cap: the client with the most waiting connections gives one up, so a probe from
    // a quiet address is never the one closed for a busy one.
    size_t most = 0;
    for (const auto& [name, entry] : clients) {
      if (entry.first <= most) continue;
      most = entry.first;
      victim = entry.second;
    }
  }
  if (victim == reading_.end()) return;
  if (limiter.allow())
    spdlog::warn(
        "admin: closed the oldest connection from {} that had not sent its request yet, to make "
        "room for a new one ({} from that address and {} in all were waiting; a slow or hostile "
        "client?)",
        victim->second.client.empty() ? "?" : victim->second.client,
        clients.at(victim->second.client).first, reading_.size());
  // Not close(): the socket stays libmicrohttpd's, which sees the end and cleans up.
  ::shutdown(victim->second.fd, SHUT_RDWR);
  requests_cut().inc();
  reading_.erase(victim);
}

void AdminServer::cut_slow_requests() {
  metrics::Counter& cut = requests_cut();
  static LogLimiter limiter(1, "admin: slow requests cut");
  std::unique_lock lock(reading_mu_);
  while (!stopping_) {
    reading_cv_.wait_for(lock, std::min(request_deadline_ / 4, std::chrono::milliseconds(250)));
    const auto now = std::chrono::steady_clock::now();
    for (auto it = reading_.begin(); it != reading_.end();) {
      if (now - it->second.since < request_deadline_) {
        ++it;
        continue;
      }
      // Not close(): the socket stays libmicrohttpd's, which sees the end and cleans up.
      ::shutdown(it->second.fd, SHUT_RDWR);
      cut.inc();
      if (limiter.allow())
        spdlog::warn("admin: closed a connection that sent no complete request within {} ms",
                     request_deadline_.count());
      it = reading_.erase(it);
    }
  }
}

AdminServer::~AdminServer() {
  if (deadline_thread_.joinable()) {
    {
      std::lock_guard lock(reading_mu_);
      stopping_ = true;
    }
    reading_cv_.notify_all();
    deadline_thread_.join();
  }
  if (daemon_) MHD_stop_daemon(daemon_);
}

}  // namespace hookgate
