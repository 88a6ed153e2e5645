#include "webhooks/plain_http.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"

namespace hookgate::webhooks {
namespace {

constexpr size_t kMaxLineBytes = 8 * 1024;  // a chunk-size or trailer line
// Idle connections older than this are closed rather than reused, as libcurl's
// CURLOPT_MAXAGE_CONN default does: a middlebox may have dropped them silently.
constexpr int64_t kMaxIdleNs = 118LL * 1000 * 1000 * 1000;
// Reusing an idle connection needs a look at its socket first (a close or a stray 408 may have
// arrived). One epoll pass this recent covers every idle connection of every pool at once...
constexpr int64_t kFreshLookNs = 1000LL * 1000;
// ...except one idle this long, whose server's keep-alive timer (5 s and up) may be firing: it
// gets a look of its own (MSG_PEEK) right before the send. Only quiet webhooks pay for it.
constexpr int64_t kLongIdleNs = 1000LL * 1000 * 1000;
constexpr uint64_t kResolverEvent = 0;  // epoll data of the resolver's eventfd
// Lookups are one per name at a time, so this many names must be slow to resolve at once before a
// healthy webhook's lookup waits in the queue behind them (4 let four broken DNS names, each
// retried, hold up every other http:// webhook's reconnects).
constexpr int kResolverThreads = 16;
// A successful lookup is reused this long: reconnects to a flapping endpoint do not each cost a
// DNS query. The SSRF policy still judges every address at connect time.
constexpr int64_t kResolvedTtlNs = 5LL * 1000 * 1000 * 1000;

// Whether a comma-separated header value lists `token` (case-insensitive).
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// An incremental HTTP/1.1 response parser: bytes go in as they arrive, and it keeps only what
// the retry policy needs. Bodies are skipped, never stored.
class ResponseParser {
 public:
  // For the next response on the connection; keeps the buffers' memory (no allocation per request).
  void reset() {
    state_ = State::Head;
    started_ = false;
    head_.clear();
    line_.clear();
    remaining_ = 0;
    status_ = 0;
    retry_after_.clear();
    keep_alive_ = false;
    error_.clear();
  }

  // Consumes bytes up to the end of the response; returns how many it took.
  size_t feed(const char* data, size_t size) {
    size_t used = 0;
    while (used < size && state_ != State::Done && state_ != State::Failed) {
      started_ = true;
      const char* at = data + used;
      const size_t left = size - used;
      switch (state_) {
        case State::Head:
          used += feed_head(at, left);
          break;
        case State::Body:
        case State::ChunkData: {
          const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, left));
          remaining_ -= take;
          used += take;
          if (remaining_ == 0) state_ = state_ == State::Body ? State::Done : State::ChunkEnd;
          break;
        }
        case State::UntilClose:
          used = size;
          break;
        case State::ChunkSize:
        case State::ChunkEnd:
        case State::Trailer:
          used += feed_line(at, left);
          break;
        case State::Done:
        case State::Failed:
          break;
      }
    }
    return used;
  }

  // The peer closed the connection: that ends a body delimited by the close.
  void on_eof() {
    if (state_ == State::UntilClose) state_ = State::Done;
  }

  bool started() const { return started_; }
  // The final response's status line and headers have been read (its body may not have been,
  // or may be malformed: a head that fails never sets the status).
  bool answered() const { return status_ != 0; }
  bool done() const { return state_ == State::Done; }
  bool failed() const { return state_ == State::Failed; }
  const std::string& error() const { return error_; }
  long status() const { return status_; }
  const std::string& retry_after() const { return retry_after_; }
  bool keep_alive() const { return keep_alive_; }

 private:
  enum class State {
    Head,
    Body,
    UntilClose,
    ChunkSize,
    ChunkData,
    ChunkEnd,
    Trailer,
    Done,
    Failed
  };

  size_t feed_head(const char* data, size_t size) {
    const size_t before = head_.size();
    head_.append(data, size);
    // The head ends at its first empty line, "\r\n" or a bare "\n" whatever the lines before
    // used, as libcurl reads it. (Looking for "\r\n\r\n" first found none in "...\n\r\n", so
    // every attempt timed out, and found one inside the body of an LF-only head.) The blank line
    // may straddle two reads: look from two bytes back.
    size_t end = std::string::npos;
    size_t terminator = 0;
    for (size_t eol = head_.find('\n', before >= 2 ? before - 2 : 0); eol != std::string::npos;
         eol = head_.find('\n', eol + 1)) {
      if (eol + 1 < head_.size() && head_[eol + 1] == '\n') {
        terminator = 2;
      } else if (eol + 2 < head_.size() && head_[eol + 1] == '\r' && head_[eol + 2] == '\n') {
        terminator = 3;
      } else {
        continue;
      }
      end = eol;
      break;
    }
    // Whether or not its end came in the same read (found in a test: one read of 80 KiB passed).
    if ((end == std::string::npos ? head_.size() : end) > kMaxResponseHeadBytes) {
      fail(kHeadTooLarge);
      return size;
    }
    if (end == std::string::npos) return size;
    const size_t head_end = end + terminator;
    const size_t used = head_end - before;
    parse_head(std::string_view(head_).substr(0, end));
    head_.clear();
    return used;
  }

  void parse_head(std::string_view head) {
    size_t eol = head.find('\n');
    std::string_view status_line = trim(head.substr(0, eol));
    // "HTTP/1.x NNN reason"
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." ||
        !std::isdigit(static_cast<unsigned char>(status_line[7])) || status_line[8] != ' ' ||
        !std::all_of(status_line.begin() + 9, status_line.begin() + 12,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        (status_line.size() > 12 && status_line[12] != ' ')) {
      fail("bad status line");
      return;
    }
    const bool http10 = status_line[7] == '0';
    const long status = std::stol(std::string(status_line.substr(9, 3)));
    if (status < 100) {
      fail("bad status code");
      return;
    }
    std::optional<uint64_t> content_length;
    bool chunked = false;
    bool has_transfer_encoding = false;
    bool connection_close = false, connection_keep_alive = false;  // over every Connection header
    std::string retry_after;
    std::string_view rest = eol == std::string_view::npos ? "" : head.substr(eol + 1);
    while (!rest.empty()) {
      size_t next = rest.find('\n');
      std::string_view line = rest.substr(0, next);
      rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      // obs-fold (RFC 9112 5.2): a continuation of the header above. Only the headers read here
      // matter to us, and none of them is folded in practice, so the continuation is dropped
      // rather than the answer refused (which would deliver the request again).
      if (line.front() == ' ' || line.front() == '\t') continue;
      size_t colon = line.find(':');
      if (colon == std::string_view::npos || colon == 0) {
        fail("bad header line");
        return;
      }
      std::string_view name = line.substr(0, colon);
      std::string_view value = trim(line.substr(colon + 1));
      if (iequals(name, "content-length")) {
        // RFC 9110 8.6: a list of equal values ("5, 5", from merged headers) is one length.
        while (!value.empty()) {
          const size_t comma = value.find(',');
          const std::string_view item = trim(value.substr(0, comma));
          value = comma == std::string_view::npos ? "" : value.substr(comma + 1);
          uint64_t length = 0;
          if (item.empty() || item.size() > 18 ||
              !std::all_of(item.begin(), item.end(),
                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
            fail("bad Content-Length");
            return;
          }
          for (char c : item) length = length * 10 + static_cast<uint64_t>(c - '0');
          if (content_length && *content_length != length) {
            fail("conflicting Content-Length headers");
            return;
          }
          content_length = length;
        }
      } else if (iequals(name, "transfer-encoding")) {
        has_transfer_encoding = true;
        // chunked must be the last coding; anything else is delimited by the close.
        size_t comma = value.rfind(',');
        chunked = iequals(trim(comma == std::string_view::npos ? value : value.substr(comma + 1)),
                          "chunked");
      } else if (iequals(name, "connection")) {
        connection_close = connection_close || lists_token(value, "close");
        connection_keep_alive = connection_keep_alive || lists_token(value, "keep-alive");
      } else if (iequals(name, "retry-after")) {
        retry_after = std::string(value);
      }
    }
    if (status < 200) {
      if (status == 101) {
        fail("unexpected 101 Switching Protocols");
        return;
      }
      return;  // an interim response (100 Continue, 103 Early Hints): the real one follows
    }
    status_ = status;
    retry_after_ = std::move(retry_after);
    keep_alive_ = !connection_close && (!http10 || connection_keep_alive);
    if (status == 204 || status == 304) {
      state_ = State::Done;
    } else if (has_transfer_encoding) {
      state_ = chunked ? State::ChunkSize : State::UntilClose;
    } else if (content_length) {
      remaining_ = *content_length;
      state_ = remaining_ == 0 ? State::Done : State::Body;
    } else {
      state_ = State::UntilClose;
    }
    // RFC 9112 6.3: a response framed both ways may have been read differently by something in
    // between, so its connection is not trusted with another request.
    if (state_ == State::UntilClose || (has_transfer_encoding && content_length))
      keep_alive_ = false;
  }

  size_t feed_line(const char* data, size_t size) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', size));
    const size_t take = newline ? static_cast<size_t>(newline - data) + 1 : size;
    line_.append(data, take);
    if (line_.size() > kMaxLineBytes) {
      fail("chunk line too long");
      return take;
    }
    if (!newline) return take;
    std::string_view line = trim(std::string_view(line_).substr(0, line_.size() - 1));
    switch (state_) {
      case State::ChunkSize: {
        line = line.substr(0, line.find(';'));  // chunk extensions
        line = trim(line);
        uint64_t chunk = 0;
        if (line.empty() || line.size() > 15) {
          fail("bad chunk size");
          break;
        }
        for (char c : line) {
          const int digit = hex_digit_value(c);
          if (digit < 0) {
            fail("bad chunk size");
            break;
          }
          chunk = chunk * 16 + static_cast<uint64_t>(digit);
        }
        if (state_ == State::Failed) break;
        remaining_ = chunk;
        state_ = chunk == 0 ? State::Trailer : State::ChunkData;
        break;
      }
      case State::ChunkEnd:
        if (!line.empty()) {
          fail("chunk not followed by CRLF");
          break;
        }
        state_ = State::ChunkSize;
        break;
      case State::Trailer:
        if (line.empty()) state_ = State::Done;
        break;
      default:
        break;
    }
    line_.clear();
    return take;
  }

  void fail(std::string why) {
    state_ = State::Failed;
    error_ = std::move(why);
  }

  State state_ = State::Head;
  bool started_ = false;
  std::string head_;
  std::string line_;
  uint64_t remaining_ = 0;
  long status_ = 0;
  std::string retry_after_;
  bool keep_alive_ = false;
  std::string error_;
};

// What the retry policy needs from a response whose status has arrived.
AttemptResult answer_of(const ResponseParser& parser) {
  AttemptResult result;
  result.http_status = parser.status();
  result.retry_after = parser.retry_after();
  return result;
}

using Address = PlainHttpClient::Address;

}  // namespace

// Resolves names with getaddrinfo on up to kResolverThreads threads, started as lookups queue up.
// One lookup per host and port at a time (connections that need the same name wait for the same
// answer), so a stuck DNS server holds at most that many threads and the queue cannot grow past
// the number of distinct names. The threads are detached and share this state, so destroying the
// client never waits for a DNS server.
struct PlainHttpClient::Resolver {
  struct Answer {
    std::string key;  // host '\n' port
    std::vector<Address> addresses;
    std::string error;
  };

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> jobs;  // keys
  std::vector<Answer> answers;
  bool stopping = false;
  int threads = 0;
  int idle = 0;
  int event_fd = -1;
  Lookup lookup = ::getaddrinfo;

  ~Resolver() {
    if (event_fd >= 0) ::close(event_fd);
  }

  // Queues a lookup; starts a thread when the queue holds more lookups than there are idle
  // threads to take them and the pool is not full. (Not "when none is idle": an idle thread
  // counts as idle until it wakes, so two names queued at once would both wait for it, a
  // healthy name behind one whose DNS server does not answer.)
  static void submit(const std::shared_ptr<Resolver>& self, std::string key) {
    bool start = false;
    {
      std::lock_guard lock(self->mu);
      self->jobs.push_back(std::move(key));
      start =
          self->jobs.size() > static_cast<size_t>(self->idle) && self->threads < kResolverThreads;
      if (start) ++self->threads;
    }
    self->cv.notify_one();
    if (start) std::thread(&Resolver::run, self).detach();
  }

  static void run(std::shared_ptr<Resolver> self) {
    name_this_thread("hg-resolver");
    for (;;) {
      std::string key;
      {
        std::unique_lock lock(self->mu);
        ++self->idle;
        self->cv.wait(lock, [&] { return self->stopping || !self->jobs.empty(); });
        --self->idle;
        if (self->stopping) return;
        key = std::move(self->jobs.front());
        self->jobs.pop_front();
      }
      const size_t newline = key.find('\n');
      const std::string host = key.substr(0, newline);
      const std::string port = key.substr(newline + 1);
      Answer answer{key, {}, {}};
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_NUMERICSERV;
      addrinfo* list = nullptr;
      int rc = self->lookup(host.c_str(), port.c_str(), &hints, &list);
      if (rc != 0) {
        answer.error = gai_strerror(rc);
      } else {
        for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
          if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
          Address address;
          std::memcpy(&address.storage, ai->ai_addr, ai->ai_addrlen);
          address.length = ai->ai_addrlen;
          answer.addresses.push_back(address);
        }
        freeaddrinfo(list);
        if (answer.addresses.empty()) answer.error = "no usable address";
      }
      {
        std::lock_guard lock(self->mu);
        if (self->stopping) return;
        self->answers.push_back(std::move(answer));
      }
      uint64_t one = 1;
      [[maybe_unused]] ssize_t written = ::write(self->event_fd, &one, sizeof one);
    }
  }
};

struct PlainHttpClient::Connection {
  enum class State { Resolving, Connecting, Sending, Receiving, Idle };

  uint64_t serial = 0;  // epoll data: events of a closed connection never reach a new one
  uint64_t pool = 0;
  std::shared_ptr<const Target> target;
  std::shared_ptr<const AddressPolicy> policy;
  State state = State::Resolving;
  int fd = -1;
  std::vector<Address> addresses;
  size_t next_address = 0;
  int64_t connect_deadline_ns = 0;  // when the address being tried is given up (0: none)
  std::string refused;              // the SSRF refusal of an address this connection skipped
  bool tried_allowed = false;       // an address the policy allows was tried
  std::string connect_error;        // why the last address failed
  bool reused = false;              // has carried a request before the current one
  int64_t idle_since_ns = 0;

  // The current request.
  std::optional<Request> request;
  std::string head;  // request line, headers, Content-Length, blank line
  size_t sent = 0;   // bytes of head + body sent
  bool resent = false;
  int64_t started_ns = 0;
  int64_t deadline_ns = 0;
  ResponseParser parser;
  uint64_t response_bytes = 0;  // read for this request
  // A whole 2xx arrived while the body was still going out: it counts once the body is sent.
  bool answered_early = false;

  std::string where() const { return target->host + " port " + target->port; }
};

std::optional<PlainHttpClient::Target> PlainHttpClient::target_for(const std::string& url) {
  CURLU* handle = curl_url();
  if (handle == nullptr) return std::nullopt;
  std::optional<Target> target;
  auto part = [&](CURLUPart which, unsigned flags, std::string& out) {
    char* value = nullptr;
    if (curl_url_get(handle, which, &value, flags) != CURLUE_OK) return false;
    out = value;
    curl_free(value);
    return true;
  };
  std::string scheme, user, password, host, port, path, query, explicit_port;
  if (curl_url_set(handle, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      part(CURLUPART_SCHEME, 0, scheme) && scheme == "http" && !part(CURLUPART_USER, 0, user) &&
      !part(CURLUPART_PASSWORD, 0, password) && part(CURLUPART_HOST, 0, host) && !host.empty() &&
      part(CURLUPART_PORT, CURLU_DEFAULT_PORT, port) && part(CURLUPART_PATH, 0, path)) {
    part(CURLUPART_QUERY, 0, query);
    const bool has_port = part(CURLUPART_PORT, 0, explicit_port) && explicit_port != "80";
    std::string request_target = path.empty() ? "/" : path;
    if (!query.empty()) request_target += "?" + query;
    const bool clean =
        std::none_of(request_target.begin(), request_target.end(),
                     [](unsigned char c) { return c <= ' ' || c == 0x7f; }) &&
        host.find_first_of("%\r\n ") == std::string::npos &&  // no IPv6 zone ids
        // An international name: libcurl converts it to punycode (IDN).
        std::all_of(host.begin(), host.end(), [](unsigned char c) { return c < 0x80; });
    if (clean) {
      Target t;
      t.host = host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
      t.port = port;
      t.prefix = "POST " + request_target + " HTTP/1.1\r\nHost: " + host +
                 (has_port ? ":" + explicit_port : "") + "\r\n";
      target = std::move(t);
    }
  }
  curl_url_cleanup(handle);
  return target;
}

PlainHttpClient::PlainHttpClient(Lookup lookup) : resolver_(std::make_shared<Resolver>()) {
  resolver_->lookup = lookup;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  resolver_->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kResolverEvent;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, resolver_->event_fd, &event);
}

PlainHttpClient::~PlainHttpClient() {
  {
    std::lock_guard lock(resolver_->mu);
    resolver_->stopping = true;
  }
  resolver_->cv.notify_all();
  for (auto& [serial, connection] : connections_)
    if (connection->fd >= 0) ::close(connection->fd);
  connections_.clear();
  ::close(epoll_fd_);
}

void PlainHttpClient::start(Request request) {
  attach(std::move(request), now_steady_ns(), /*resent=*/false);
}

void PlainHttpClient::attach(Request request, int64_t started_ns, bool resent) {
  Connection* connection = nullptr;
  // A resend needs a new connection: the reused one just failed, its siblings may too.
  if (auto idle = idle_.find(request.pool); idle != idle_.end() && !resent) {
    // Something may have arrived on an idle connection since it was last looked at (a close, a
    // stray 408): reused, it would waste a send or take that answer for this request's. One
    // epoll pass settles it for all idle connections; it replaced a MSG_PEEK per reuse, which
    // at full load was one syscall in three. Connections it closes leave the pool.
    const int64_t last_look_ns = std::max(last_poll_ns_, last_pass_ns_);
    if (!idle->second.empty() && (idle->second.back()->idle_since_ns >= last_look_ns ||
                                  started_ns - last_look_ns > kFreshLookNs)) {
      last_pass_ns_ = now_steady_ns();
      handle_events();
      idle = idle_.find(request.pool);
    }
    if (idle != idle_.end()) {
      std::vector<Connection*> stale;
      auto& pool = idle->second;
      while (!pool.empty() && connection == nullptr) {
        Connection* candidate = pool.back();
        pool.pop_back();
        const int64_t idle_ns = started_ns - candidate->idle_since_ns;
        char byte;
        if (idle_ns > kMaxIdleNs ||
            (idle_ns >= kLongIdleNs &&
             (::recv(candidate->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 ||
              (errno != EAGAIN && errno != EWOULDBLOCK)))) {
          stale.push_back(candidate);
        } else {
          connection = candidate;
        }
      }
      if (pool.empty()) idle_.erase(idle);
      for (Connection* old : stale) close(*old);  // no longer listed: close() leaves idle_ alone
    }
  }
  if (connection == nullptr) {
    auto fresh = std::make_unique<Connection>();
    fresh->serial = next_serial_++;
    fresh->pool = request.pool;
    fresh->target = request.target;
    fresh->policy = request.policy;
    connection = fresh.get();
    connections_.emplace(fresh->serial, std::move(fresh));
  }
  Connection& c = *connection;
  const std::string* body = request.body.get();
  c.head.clear();
  c.head.reserve(c.target->prefix.size() + request.headers.size() + 40);
  c.head.append(c.target->prefix)
      .append(request.headers)
      .append("Content-Length: ")
      .append(std::to_string(body ? body->size() : 0))
      .append("\r\n\r\n");
  c.sent = 0;
  c.resent = resent;
  c.started_ns = started_ns;
  c.parser.reset();
  c.response_bytes = 0;
  c.answered_early = false;
  by_user_[request.user] = &c;
  watch_deadline(c, request.deadline_ns);
  c.request = std::move(request);
  if (c.reused) {
    send_request(c);
  } else {
    begin(c);
  }
}

void PlainHttpClient::watch_deadline(Connection& connection, int64_t deadline_ns) {
  connection.deadline_ns = deadline_ns;
  deadlines_.emplace(deadline_ns, &connection);
}

void PlainHttpClient::begin(Connection& connection) {
  const Target& target = *connection.target;
  // A numeric host needs no resolver.
  if (auto address =
          numeric_socket_address(target.host, static_cast<uint16_t>(std::stoi(target.port)))) {
    connection.addresses = {*address};
    connect_next(connection);
    return;
  }
  std::string key = target.host + '\n' + target.port;
  if (auto cached = resolved_.find(key); cached != resolved_.end()) {
    if (now_steady_ns() < cached->second.expires_ns) {
      connection.addresses = cached->second.addresses;
      connect_next(connection);
      return;
    }
    resolved_.erase(cached);
  }
  connection.state = Connection::State::Resolving;
  resolving_[connection.serial] = &connection;
  auto& waiting = lookups_[key];
  waiting.push_back(connection.serial);
  if (waiting.size() == 1) Resolver::submit(resolver_, std::move(key));
}

void PlainHttpClient::take_resolved() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t got = ::read(resolver_->event_fd, &count, sizeof count);
  std::vector<Resolver::Answer> answers;
  {
    std::lock_guard lock(resolver_->mu);
    answers.swap(resolver_->answers);
  }
  for (auto& answer : answers) {
    std::vector<uint64_t> waiting;
    if (auto it = lookups_.find(answer.key); it != lookups_.end()) {
      waiting = std::move(it->second);
      lookups_.erase(it);
    }
    if (answer.error.empty())
      resolved_[answer.key] = {answer.addresses, now_steady_ns() + kResolvedTtlNs};
    for (uint64_t serial : waiting) {
      auto it = resolving_.find(serial);
      if (it == resolving_.end()) continue;  // cancelled or timed out meanwhile
      Connection& connection = *it->second;
      resolving_.erase(it);
      if (!answer.error.empty()) {
        fail(connection, CURLE_COULDNT_RESOLVE_HOST,
             "Could not resolve host: " + connection.target->host + " (" + answer.error + ")");
        continue;
      }
      connection.addresses = answer.addresses;
      connect_next(connection);
    }
  }
}

void PlainHttpClient::connect_next(Connection& connection) {
  while (connection.next_address < connection.addresses.size()) {
    const Address& address = connection.addresses[connection.next_address++];
    const sockaddr* sa = address.get();
    if (Status allowed = connection.policy->check(sa); !allowed.ok()) {
      if (connection.refused.empty()) connection.refused = allowed.error().message;
      continue;
    }
    connection.tried_allowed = true;
    int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      connection.connect_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    event.data.u64 = connection.serial;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    connection.fd = fd;
    if (::connect(fd, sa, address.length) == 0) {
      on_connected(connection);
      return;
    }
    if (errno == EINPROGRESS) {
      connection.state = Connection::State::Connecting;
      // Like libcurl: an address with others behind it gets half the time left, so one
      // blackholed address (an unreachable AAAA, say) cannot use up the whole attempt.
      if (connection.next_address < connection.addresses.size()) {
        const int64_t now = now_steady_ns();
        connection.connect_deadline_ns =
            now + std::max<int64_t>((connection.deadline_ns - now) / 2, 0);
        connect_deadlines_.emplace(connection.connect_deadline_ns, &connection);
      }
      return;
    }
    const int error = errno;  // before anything below can change it
    connection.connect_error =
        "Failed to connect to " + connection.where() + ": " + std::strerror(error);
    ::close(fd);
    connection.fd = -1;
  }
  AttemptResult result;
  result.curl_code = CURLE_COULDNT_CONNECT;
  result.transport_error =
      !connection.connect_error.empty()
          ? connection.connect_error
          : "Failed to connect to " + connection.where() + ": no address may be used";
  // Final only when the policy refused every address: a failure on an allowed one is retried.
  if (!connection.tried_allowed) result.final_error = connection.refused;
  complete(connection, std::move(result), false);
}

void PlainHttpClient::stop_connect_timer(Connection& connection) {
  if (connection.connect_deadline_ns == 0) return;
  connect_deadlines_.erase({connection.connect_deadline_ns, &connection});
  connection.connect_deadline_ns = 0;
}

void PlainHttpClient::on_connected(Connection& connection) {
  stop_connect_timer(connection);
  connection.refused.clear();
  send_request(connection);
}

void PlainHttpClient::send_request(Connection& connection) {
  connection.state = Connection::State::Sending;
  const std::string* body = connection.request->body.get();
  const size_t head_size = connection.head.size();
  const size_t total = head_size + (body ? body->size() : 0);
  while (connection.sent < total) {
    iovec parts[2];
    int count = 0;
    if (connection.sent < head_size) {
      parts[count++] = {connection.head.data() + connection.sent, head_size - connection.sent};
      if (body && !body->empty()) parts[count++] = {const_cast<char*>(body->data()), body->size()};
    } else {
      const size_t offset = connection.sent - head_size;
      parts[count++] = {const_cast<char*>(body->data()) + offset, body->size() - offset};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(connection.fd, &message, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // EPOLLOUT resumes
      const int error = errno;
      if (connection.answered_early) {  // its answer is read: the body did not get through
        fail(connection, CURLE_SEND_ERROR,
             "Send failure to " + connection.where() + " after an early HTTP " +
                 std::to_string(connection.parser.status()) + ": " + std::strerror(error));
        return;
      }
      // A reused connection: the keep-alive race, and what waits may be a stray 408 meant for
      // no request. Sent again on a new connection, as before.
      if (resend_on_new_connection(connection)) return;
      // A fresh one: the server may have answered (say, 413) and closed without reading the
      // whole body. The kernel still hands over what it sent, and that is the outcome.
      char byte;
      if (::recv(connection.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
        const uint64_t serial = connection.serial;
        read_response(connection, EPOLLHUP);  // completes or fails it, unless more is due
        if (connections_.count(serial) == 0 || !connection.request) return;
      }
      fail(connection, CURLE_SEND_ERROR,
           "Send failure to " + connection.where() + ": " + std::strerror(error));
      return;
    }
    connection.sent += static_cast<size_t>(n);
  }
  connection.state = Connection::State::Receiving;
  if (connection.answered_early) finish_answered(connection, false);  // may destroy it
}

// Whether a response whose body is still to come can end the attempt: its status has arrived,
// and either the whole request was sent or the status refuses it (a 2xx before the body was
// sent does not say the receiver has the event).
bool PlainHttpClient::answer_stands(const Connection& connection) {
  return connection.parser.answered() &&
         status_stands(connection.parser.status(),
                       connection.state == Connection::State::Receiving);
}

// A response whose status stands and whose body failed (cut short by a close or a reset,
// malformed, or late at the deadline): the receiver has answered, so that status is the outcome;
// the connection closes.
bool PlainHttpClient::complete_if_answered(Connection& connection) {
  if (!answer_stands(connection)) return false;
  complete(connection, answer_of(connection.parser), false);
  return true;
}

void PlainHttpClient::finish_answered(Connection& connection, bool reuse) {
  if (answer_stands(connection)) {
    complete(connection, answer_of(connection.parser), reuse);
    return;
  }
  fail(connection, CURLE_WEIRD_SERVER_REPLY,
       "HTTP " + std::to_string(connection.parser.status()) + " from " + connection.where() +
           " before the request body was sent");
}

void PlainHttpClient::on_event(Connection& connection, uint32_t events) {
  using State = Connection::State;
  switch (connection.state) {
    case State::Resolving:
      return;
    case State::Connecting: {
      if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == EINPROGRESS) return;
      if (error == 0) {
        const uint64_t serial = connection.serial;
        on_connected(connection);  // sends, and may fail and close it
        // A server may answer (and close) right after accepting, in the same event.
        if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) != 0 && connections_.count(serial) != 0 &&
            (connection.state == State::Sending || connection.state == State::Receiving))
          read_response(connection, events);
        return;
      }
      stop_connect_timer(connection);
      connection.connect_error =
          "Failed to connect to " + connection.where() + ": " + std::strerror(error);
      ::close(connection.fd);
      connection.fd = -1;
      connect_next(connection);
      return;
    }
    case State::Idle: {
      // An idle connection has nothing to say: data or a close means it cannot be reused. A
      // stale readiness event from the last response is told apart by peeking; writability
      // alone (the server acknowledging the last request) says nothing arrived.
      if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) return;
      char start[16];
      const ssize_t n = ::recv(connection.fd, start, sizeof start, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
          (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0)
        return;
      // Bytes nobody asked for. A 408 before an idle close is routine for some servers; anything
      // else is a receiver that answers twice, whose stray may also come after the next request
      // went out and be taken for its answer (docs/design.md): said, so the operator learns of
      // it (found in a receivers pass: closed without a word).
      if (n > 0) {
        // (A 408 whose first bytes alone have arrived counts as one.)
        const std::string_view head(start, static_cast<size_t>(n));
        auto begins = [&](std::string_view status) {
          return status.starts_with(head.substr(0, status.size()));
        };
        const bool routine = begins("HTTP/1.1 408") || begins("HTTP/1.0 408");
        if (!routine && log_limiter_for("plain http stray bytes", 1).allow())
          spdlog::warn(
              "webhook receiver {} sent bytes on an idle connection, answering no request (a "
              "second response to one request?); the connection is closed, not reused",
              connection.where());
      }
      close(connection);
      return;
    }
    case State::Sending:
      // An early 2xx is read already: sending goes on (and learns of a reset or close).
      if (connection.answered_early) {
        send_request(connection);
        return;
      }
      // The server may answer (say, 413) before it has read the whole body.
      if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        const uint64_t serial = connection.serial;
        read_response(connection, events);  // may close it
        if (connections_.count(serial) == 0 || connection.state != State::Sending) return;
      }
      if ((events & EPOLLOUT) != 0) send_request(connection);
      return;
    case State::Receiving:
      read_response(connection, events);
      return;
  }
}

void PlainHttpClient::read_response(Connection& connection, uint32_t events) {
  // Edge-triggered: a short read normally means the socket is drained, but a close that came
  // with the data raises no further event, so then read on until recv says so.
  const bool peer_closed = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::recv(connection.fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      const size_t used = connection.parser.feed(buffer, static_cast<size_t>(n));
      connection.response_bytes += static_cast<uint64_t>(n);
      if (connection.parser.failed()) {
        if (complete_if_answered(connection)) return;
        fail(connection, CURLE_WEIRD_SERVER_REPLY,
             "Malformed HTTP response from " + connection.where() + ": " +
                 connection.parser.error());
        return;
      }
      if (connection.parser.done()) {
        if (connection.state == Connection::State::Sending && !answer_stands(connection)) {
          // A whole 2xx before the whole body was sent, from a receiver that answers from the
          // head (nginx's `return 202`): the body still goes out, as libcurl sends it, and the
          // answer counts once it has (found in a receivers pass: the attempt failed, and a
          // delivery libcurl delivered was dead-lettered). The connection is not reused.
          connection.answered_early = true;
          return;
        }
        // Bytes past the response, or a body still unsent, leave the connection unusable. So
        // does a response that ended exactly at a full buffer: more bytes may be queued behind
        // it, and edge-triggered epoll would not report them again.
        const bool reuse = connection.parser.keep_alive() && !peer_closed &&
                           used == static_cast<size_t>(n) &&
                           static_cast<size_t>(n) < sizeof buffer &&
                           connection.state == Connection::State::Receiving;
        finish_answered(connection, reuse);
        return;
      }
      if (connection.response_bytes > kMaxResponseBytes) {
        if (connection.parser.answered()) {
          finish_answered(connection, false);  // not drained: closes
        } else {
          fail(connection, CURLE_WEIRD_SERVER_REPLY,
               "No final HTTP response from " + connection.where() + " in the first " +
                   std::to_string(kMaxResponseBytes / 1024) + " KiB");
        }
        return;
      }
      if (static_cast<size_t>(n) < sizeof buffer && !peer_closed) return;  // EPOLLIN brings more
      continue;
    }
    if (n == 0) {
      connection.parser.on_eof();
      if (connection.parser.done()) {
        finish_answered(connection, false);
        return;
      }
      if (!connection.parser.started()) {
        if (resend_on_new_connection(connection)) return;
        fail(connection, CURLE_GOT_NOTHING, "Empty reply from server " + connection.where());
        return;
      }
      if (complete_if_answered(connection)) return;
      fail(connection, CURLE_RECV_ERROR,
           "Connection to " + connection.where() + " closed before the response was complete");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    const int error = errno;
    if (!connection.parser.started() && resend_on_new_connection(connection)) return;
    if (complete_if_answered(connection)) return;
    fail(connection, CURLE_RECV_ERROR,
         "Recv failure from " + connection.where() + ": " + std::strerror(error));
    return;
  }
}

bool PlainHttpClient::resend_on_new_connection(Connection& connection) {
  if (!connection.reused || connection.resent) return false;
  Request request = std::move(*connection.request);
  const int64_t started_ns = connection.started_ns;
  connection.request.reset();
  by_user_.erase(request.user);
  deadlines_.erase({connection.deadline_ns, &connection});
  close(connection);
  // Even if close_pool() ran meanwhile: the resend still belongs to this attempt.
  attach(std::move(request), started_ns, /*resent=*/true);
  return true;
}

void PlainHttpClient::fail(Connection& connection, int curl_code, std::string message) {
  AttemptResult result;
  result.curl_code = curl_code;
  result.transport_error = std::move(message);
  complete(connection, std::move(result), false);
}

void PlainHttpClient::complete(Connection& connection, AttemptResult result, bool reuse) {
  Request& request = *connection.request;
  done_.push_back({request.user, std::move(result)});
  by_user_.erase(request.user);
  deadlines_.erase({connection.deadline_ns, &connection});
  const size_t max_idle = request.max_idle;
  connection.request.reset();
  // Every connection without a request is idle: this one is counted among them already.
  const size_t idle_total = connections_.size() - by_user_.size();
  if (reuse && closed_pools_.count(connection.pool) == 0 && idle_total <= max_idle_total_) {
    auto& idle = idle_[connection.pool];
    if (idle.size() < max_idle) {
      connection.state = Connection::State::Idle;
      connection.reused = true;
      connection.idle_since_ns = now_steady_ns();
      idle.push_back(&connection);
      return;
    }
  }
  close(connection);
}

void PlainHttpClient::close(Connection& connection) {
  if (connection.fd >= 0) ::close(connection.fd);  // also leaves the epoll set
  if (connection.state == Connection::State::Idle) {
    if (auto it = idle_.find(connection.pool); it != idle_.end()) {
      auto& pool = it->second;
      pool.erase(std::remove(pool.begin(), pool.end(), &connection), pool.end());
      if (pool.empty()) idle_.erase(it);
    }
  }
  resolving_.erase(connection.serial);
  stop_connect_timer(connection);
  if (connection.request) {
    by_user_.erase(connection.request->user);
    deadlines_.erase({connection.deadline_ns, &connection});
  }
  connections_.erase(connection.serial);  // destroys it
}

void PlainHttpClient::handle_events() {
  epoll_event events[64];
  for (;;) {
    int n = epoll_wait(epoll_fd_, events, 64, 0);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; ++i) {
      const uint64_t serial = events[i].data.u64;
      if (serial == kResolverEvent) {
        take_resolved();
        continue;
      }
      auto it = connections_.find(serial);
      if (it == connections_.end()) continue;  // closed while handling an earlier event
      on_event(*it->second, events[i].events);
    }
    if (n < 64) break;
  }
}

void PlainHttpClient::poll(int64_t now_ns, std::vector<Completion>& out) {
  // Anything that arrived on an idle connection before this is handled below. Never later than
  // the clock: a caller's future now_ns (forcing timeouts) must not vouch for later arrivals.
  last_poll_ns_ = std::min(now_ns, now_steady_ns());
  handle_events();
  while (!connect_deadlines_.empty() && connect_deadlines_.begin()->first <= now_ns) {
    Connection& connection = *connect_deadlines_.begin()->second;
    stop_connect_timer(connection);
    connection.connect_error = "Connection to " + connection.where() + " timed out";
    ::close(connection.fd);
    connection.fd = -1;
    connect_next(connection);
  }
  while (!deadlines_.empty() && deadlines_.begin()->first <= now_ns) {
    Connection& connection = *deadlines_.begin()->second;
    // The status arrived and only the body is late: the receiver has answered, so the attempt
    // ends with that answer (a 2xx is not delivered again), and the connection closes.
    if (complete_if_answered(connection)) continue;
    const char* stage = "waiting for the response";
    switch (connection.state) {
      case Connection::State::Resolving:
        stage = "resolving the host";
        break;
      case Connection::State::Connecting:
        stage = "connecting";
        break;
      case Connection::State::Sending:
        stage = "sending the request";
        break;
      default:
        break;
    }
    const int64_t elapsed_ms = (now_ns - connection.started_ns) / 1000000;
    fail(connection, CURLE_OPERATION_TIMEDOUT,
         "Operation timed out after " + std::to_string(elapsed_ms) + " milliseconds " + stage +
             " (" + connection.where() + ")");
  }
  if (!done_.empty()) {
    if (out.empty()) {
      out.swap(done_);
    } else {
      std::move(done_.begin(), done_.end(), std::back_inserter(out));
      done_.clear();
    }
  }
}

std::optional<int64_t> PlainHttpClient::next_deadline_ns() const {
  if (!done_.empty()) return 0;
  std::optional<int64_t> next;
  if (!deadlines_.empty()) next = deadlines_.begin()->first;
  if (!connect_deadlines_.empty())
    next = std::min(next.value_or(INT64_MAX), connect_deadlines_.begin()->first);
  return next;
}

void PlainHttpClient::cancel(void* user) {
  auto it = by_user_.find(user);
  if (it == by_user_.end()) return;
  close(*it->second);
}

void PlainHttpClient::close_pool(uint64_t pool) {
  closed_pools_.insert(pool);
  auto it = idle_.find(pool);
  if (it == idle_.end()) return;
  std::vector<Connection*> idle = it->second;
  for (Connection* connection : idle) close(*connection);
  idle_.erase(pool);
}

}  // namespace hookgate::webhooks
