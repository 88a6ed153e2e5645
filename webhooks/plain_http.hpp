#pragma once
// The built-in HTTP/1.1 client for plain http:// webhooks. libcurl costs about 30 µs of CPU per
// request on the 2-CPU reference machine, the largest single cost of a delivery
// (docs/performance.md); this client composes the request head once, sends head and shared body
// with one sendmsg, and parses only what the retry policy needs (status, Retry-After, framing).
// https:// URLs, URLs with credentials and `http_client: libcurl` webhooks stay on libcurl.
//
// The same contract as the libcurl path (webhooks/dispatcher.hpp): the webhook's timeout bounds
// the whole attempt (resolve, connect, send, receive); the SSRF AddressPolicy judges every
// address before connect(), so DNS answers cannot slip past it; no redirects, no proxies;
// connections are kept alive and reused only within their pool (one per webhook settings
// generation, so a connection opened under a laxer policy is never reused under a stricter one).
// A request whose reused connection turns out closed before any response byte (the keep-alive
// race) is resent once on a new connection, as libcurl does. Failures carry libcurl's error codes
// (CURLE_*), so retry classification and metric labels do not depend on the client. Bodies are
// skipped, never stored: once a response's status has arrived, a body past 256 KiB or past the
// deadline is not waited for (the attempt ends with that status and the connection closes).
//
// Host names resolve on up to 16 resolver threads (getaddrinfo), one lookup per name at a time and
// answers reused for 5 s, so a slow DNS server never blocks the caller; IP literals skip it.
// Addresses are tried in getaddrinfo's order; one with others behind it gets half the time left,
// as libcurl does (no happy eyeballs). An idle connection the server closed or spoke on (a stray
// 408) is dropped rather than sent on: one epoll pass before a batch of reuses finds those, and a
// connection idle for a second or more is also peeked at right before the send.
//
// Not thread-safe: every call comes from one thread (the dispatcher's). fd() becomes readable
// when poll() has something to do; the dispatcher waits on it beside libcurl's sockets.
#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gateway/common/socket_address.hpp"
#include "webhooks/retry_policy.hpp"
#include "webhooks/ssrf_guard.hpp"

namespace hookgate::webhooks {

// Response bytes read for one attempt before either HTTP client stops reading: past it, a response
// whose status has arrived (and whose request was sent, or which refuses it) completes with that
// status and its connection closes instead of being drained; one without a final status fails. A
// receiver streaming a body at line rate would otherwise hold the thread every webhook shares.
inline constexpr uint64_t kMaxResponseBytes = 256 * 1024;
// A response head beyond this fails the attempt, in either client, with kHeadTooLarge: no receiver
// needs one. (libcurl's own limit, about 100 KiB, said "Out of memory", which sent operators
// looking at the gateway's memory.)
inline constexpr size_t kMaxResponseHeadBytes = 64 * 1024;
inline constexpr const char* kHeadTooLarge = "response head larger than 64 KiB";

// Whether a final status whose body is still to come ends the attempt (both clients): once the
// whole request was sent, or when it refuses the request. A 2xx before the body went out does
// not say the receiver has the event.
inline bool status_stands(long status, bool request_sent) {
  return request_sent || status >= 300;
}

class PlainHttpClient {
 public:
  // Where a webhook's requests go, parsed once per configuration.
  struct Target {
    std::string host;    // for getaddrinfo: an IPv6 literal without brackets
    std::string port;    // numeric
    std::string prefix;  // "POST <path?query> HTTP/1.1\r\nHost: <host[:port]>\r\n"
  };
  // The target for a URL this client can serve (http://, no credentials), else nullopt.
  static std::optional<Target> target_for(const std::string& url);

  struct Request {
    void* user = nullptr;  // identifies the request in its Completion and in cancel()
    uint64_t pool = 0;     // connections are reused only within a pool
    size_t max_idle = 1;   // idle connections the pool keeps
    std::shared_ptr<const Target> target;
    std::shared_ptr<const AddressPolicy> policy;
    // The header lines after Target::prefix, each "Name: value\r\n". The client appends
    // Content-Length and the blank line.
    std::string headers;
    std::shared_ptr<const std::string> body;
    int64_t deadline_ns = 0;  // steady clock; the attempt fails with a timeout at this instant
  };

  struct Completion {
    void* user = nullptr;
    AttemptResult result;
  };

  using Address = SocketAddress;  // one resolved address
  // getaddrinfo's signature: tests put a slow DNS server in its place.
  using Lookup = int (*)(const char* host, const char* port, const addrinfo* hints, addrinfo** out);

  explicit PlainHttpClient(Lookup lookup = ::getaddrinfo);
  ~PlainHttpClient();
  PlainHttpClient(const PlainHttpClient&) = delete;
  PlainHttpClient& operator=(const PlainHttpClient&) = delete;

  // Readable when poll() has work (socket activity, a resolved name, a finished request).
  int fd() const { return epoll_fd_; }

  // Starts a request; its Completion always comes from poll(), even when it fails at once.
  void start(Request request);
  // Non-blocking: advances every connection that has activity, times out what is due, and
  // appends finished requests to `out`.
  void poll(int64_t now_ns, std::vector<Completion>& out);
  // The earliest instant poll() must run even without activity; nullopt when nothing waits.
  std::optional<int64_t> next_deadline_ns() const;
  // Drops a request without a Completion and closes its connection (shutdown). Unknown: no-op.
  void cancel(void* user);
  // Closes the pool's idle connections now and its busy ones when their requests end.
  void close_pool(uint64_t pool);

  size_t open_connections() const { return connections_.size(); }
  // Idle keep-alive connections kept across all pools at most (each pool keeps its max_idle
  // too): past it a finished connection closes, so the open-file limit is not spent on idle ones.
  void set_max_idle(size_t max_idle) { max_idle_total_ = max_idle; }

 private:
  struct Connection;
  struct Resolver;

  void attach(Request request, int64_t started_ns, bool resent);
  void begin(Connection& connection);
  void connect_next(Connection& connection);
  void on_connected(Connection& connection);
  void stop_connect_timer(Connection& connection);
  void send_request(Connection& connection);
  // One epoll pass: advances every connection with activity; what finishes goes to done_.
  void handle_events();
  void on_event(Connection& connection, uint32_t events);
  static bool answer_stands(const Connection& connection);
  // Ends an attempt whose response status has arrived: with that status when it stands, else as
  // a malformed reply (retried).
  void finish_answered(Connection& connection, bool reuse);
  // For a response whose body failed: completes it with its status if that stands (true).
  bool complete_if_answered(Connection& connection);
  void read_response(Connection& connection, uint32_t events);
  void take_resolved();
  // Ends the connection's request with `result`; reuse says whether the connection stays open.
  void complete(Connection& connection, AttemptResult result, bool reuse);
  // A reused connection died before answering: the same request again on a new connection.
  bool resend_on_new_connection(Connection& connection);
  void fail(Connection& connection, int curl_code, std::string message);
  void close(Connection& connection);
  void watch_deadline(Connection& connection, int64_t deadline_ns);

  int epoll_fd_ = -1;
  // When the latest poll(), and the latest pass attach() ran itself, began (steady clock).
  int64_t last_poll_ns_ = 0;
  int64_t last_pass_ns_ = 0;
  std::shared_ptr<Resolver> resolver_;
  uint64_t next_serial_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;  // by serial
  std::unordered_map<uint64_t, std::vector<Connection*>> idle_;            // by pool; newest last
  size_t max_idle_total_ = SIZE_MAX;
  std::unordered_map<void*, Connection*> by_user_;
  std::unordered_map<uint64_t, Connection*> resolving_;  // by connection serial
  // Lookups under way, by "host\nport": the connections waiting for each.
  std::unordered_map<std::string, std::vector<uint64_t>> lookups_;
  struct Resolved {
    std::vector<Address> addresses;
    int64_t expires_ns = 0;
  };
  std::unordered_map<std::string, Resolved> resolved_;
  std::set<std::pair<int64_t, Connection*>> deadlines_;          // of requests
  std::set<std::pair<int64_t, Connection*>> connect_deadlines_;  // of one address's connect
  std::set<uint64_t> closed_pools_;
  std::vector<Completion> done_;  // finished outside poll(), handed out by the next poll()
};

}  // namespace hookgate::webhooks
