// hookgate-bench-sink: a fast keep-alive HTTP/1.1 sink for the webhook benchmarks.
//
//   hookgate-bench-sink PORT        (0 = pick a free port; the port is the first stdout line)
//
// One thread, epoll, non-blocking sockets. Every request with a body (POST with Content-Length) is
// answered `HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n` and counted; if the body holds a
// `"sent_ns":<int>` field, receipt − sent (same clock as the load generator: CLOCK_MONOTONIC, or
// CLOCK_REALTIME with BENCH_CLOCK=realtime) goes into a log-linear histogram (<1% bucket error).
// Control requests: `GET /stats` answers the JSON summary, `GET /reset` zeroes everything.
// SIGTERM/SIGINT print the summary on stdout and exit 0.
//
// Summary: {"count":N,"bytes":B,"first_ns":…,"last_ns":…,"span_s":…,"rate_per_s":…,
//           "lat_count":…,"p50_us":…,"p99_us":…,"p999_us":…,"max_us":…,"connections":…}
// rate_per_s = (count − 1) / (last receipt − first receipt): the sink-side throughput.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bench/bench_payload.hpp"

namespace {

// Log-linear histogram over nanoseconds: 2^kSubBits sub-buckets per power of two.
class Histogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kSub = 1 << kSubBits;
  void record(int64_t ns) {
    if (ns < 0) {
      ++negative_;
      ns = 0;
    }
    auto v = static_cast<uint64_t>(ns);
    counts_[index(v)]++;
    ++count_;
    max_ = std::max(max_, v);
  }
  uint64_t count() const { return count_; }
  uint64_t negative() const { return negative_; }
  uint64_t max() const { return max_; }
  void reset() { *this = Histogram(); }
  // The value at quantile q (0..1): the midpoint of the bucket holding it.
  double quantile_ns(double q) const {
    if (count_ == 0) return 0;
    auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        auto [lo, hi] = bounds(i);
        return std::min(static_cast<double>(max_),
                        (static_cast<double>(lo) + static_cast<double>(hi)) / 2);
      }
    }
    return static_cast<double>(max_);
  }

 private:
  static size_t index(uint64_t v) {
    if (v < kSub) return static_cast<size_t>(v);
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - kSubBits;
    uint64_t sub = (v >> shift) - kSub;  // 0..kSub-1
    return static_cast<size_t>((shift + 1) * kSub + sub);
  }
  static std::pair<uint64_t, uint64_t> bounds(size_t i) {
    if (i < kSub) return {i, i};
    size_t shift = i / kSub - 1;
    uint64_t sub = i % kSub + kSub;
    return {sub << shift, ((sub + 1) << shift) - 1};
  }
  std::array<uint64_t, 64 * kSub> counts_{};
  uint64_t count_ = 0;
  uint64_t negative_ = 0;
  uint64_t max_ = 0;
};

struct Stats {
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  uint64_t connections = 0;
  uint64_t parse_errors = 0;
  Histogram latency;
};

struct Conn {
  int fd;
  std::string in;
  size_t consumed = 0;  // bytes of `in` already handled
  std::string out;      // unsent response bytes
};

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

Stats g_stats;
clockid_t g_clock = CLOCK_MONOTONIC;

std::string summary_json() {
  const Stats& s = g_stats;
  double span_s = s.count > 1 ? static_cast<double>(s.last_ns - s.first_ns) / 1e9 : 0;
  double rate = span_s > 0 ? static_cast<double>(s.count - 1) / span_s : 0;
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "{\"count\":%llu,\"bytes\":%llu,\"first_ns\":%lld,\"last_ns\":%lld,\"span_s\":%.6f,"
                "\"rate_per_s\":%.1f,\"lat_count\":%llu,\"lat_negative\":%llu,\"p50_us\":%.1f,"
                "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,\"connections\":%llu,"
                "\"parse_errors\":%llu}",
                static_cast<unsigned long long>(s.count), static_cast<unsigned long long>(s.bytes),
                static_cast<long long>(s.first_ns), static_cast<long long>(s.last_ns), span_s, rate,
                static_cast<unsigned long long>(s.latency.count()),
                static_cast<unsigned long long>(s.latency.negative()),
                s.latency.quantile_ns(0.50) / 1e3, s.latency.quantile_ns(0.99) / 1e3,
                s.latency.quantile_ns(0.999) / 1e3, static_cast<double>(s.latency.max()) / 1e3,
                static_cast<unsigned long long>(s.connections),
                static_cast<unsigned long long>(s.parse_errors));
  return buf;
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  return true;
}

// Finds `"sent_ns":<digits>` in the body; -1 when absent.
int64_t find_sent_ns(std::string_view body) {
  static constexpr std::string_view kKey = "\"sent_ns\":";
  size_t p = body.find(kKey);
  if (p == std::string_view::npos) return -1;
  p += kKey.size();
  while (p < body.size() && body[p] == ' ') ++p;
  int64_t v = 0;
  bool any = false;
  while (p < body.size() && body[p] >= '0' && body[p] <= '9') {
    v = v * 10 + (body[p] - '0');
    ++p;
    any = true;
  }
  return any ? v : -1;
}

enum class Parse { Incomplete, Done, Bad };

// Handles one complete request at the front of c.in[c.consumed..]; appends the response.
Parse handle_one(Conn& c) {
  std::string_view buf(c.in);
  buf.remove_prefix(c.consumed);
  size_t hdr_end = buf.find("\r\n\r\n");
  if (hdr_end == std::string_view::npos) return buf.size() > 65536 ? Parse::Bad : Parse::Incomplete;
  std::string_view head = buf.substr(0, hdr_end);
  size_t line_end = head.find("\r\n");
  std::string_view request_line = head.substr(0, line_end);
  size_t content_length = 0;
  size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos) e = head.size();
    std::string_view line = head.substr(pos, e - pos);
    if (iequals_prefix(line, "content-length:")) {
      std::string_view v = line.substr(15);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      content_length = std::strtoull(std::string(v).c_str(), nullptr, 10);
    }
    pos = e + 2;
  }
  size_t total = hdr_end + 4 + content_length;
  if (buf.size() < total) return Parse::Incomplete;
  std::string_view body = buf.substr(hdr_end + 4, content_length);
  c.consumed += total;

  if (request_line.rfind("GET ", 0) == 0) {
    std::string_view path = request_line.substr(4);
    path = path.substr(0, path.find(' '));
    std::string payload;
    if (path == "/reset") {
      g_stats = Stats();  // connections then counts those accepted since the reset
      payload = "{\"reset\":true}";
    } else {
      payload = summary_json();
    }
    c.out += "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ";
    c.out += std::to_string(payload.size());
    c.out += "\r\n\r\n";
    c.out += payload;
    return Parse::Done;
  }

  int64_t now = hookgate::bench::now_ns(g_clock);
  if (g_stats.count == 0) g_stats.first_ns = now;
  g_stats.last_ns = now;
  ++g_stats.count;
  g_stats.bytes += content_length;
  int64_t sent = find_sent_ns(body);
  if (sent >= 0) g_stats.latency.record(now - sent);
  c.out.append(kOk);
  return Parse::Done;
}

// Writes as much of c.out as the socket takes; false on a fatal error.
bool flush_out(Conn& c) {
  size_t off = 0;
  while (off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + off, c.out.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  c.out.erase(0, off);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hookgate-bench-sink PORT   (0 = pick a free port)\n");
    return 2;
  }
  int port = std::atoi(argv[1]);
  g_clock = hookgate::bench::bench_clock();

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 1024) != 0) {
    std::perror("hookgate-bench-sink: bind/listen");
    return 1;
  }
  socklen_t len = sizeof addr;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);

  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.fd = sfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);

  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  auto close_conn = [&](int fd) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
  };

  std::vector<epoll_event> events(256);
  char rbuf[64 * 1024];
  bool stop = false;
  while (!stop) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("epoll_wait");
      break;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == sfd) {
        stop = true;
        continue;
      }
      if (fd == lfd) {
        while (true) {
          int cfd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (cfd < 0) break;
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto c = std::make_unique<Conn>();
          c->fd = cfd;
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLRDHUP;
          cev.data.fd = cfd;
          epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev);
          conns.emplace(cfd, std::move(c));
          ++g_stats.connections;
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      bool dead = false;
      if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        while (true) {
          ssize_t r = ::recv(fd, rbuf, sizeof rbuf, 0);
          if (r > 0) {
            c.in.append(rbuf, static_cast<size_t>(r));
            if (static_cast<size_t>(r) < sizeof rbuf) break;
            continue;
          }
          if (r < 0 && errno == EINTR) continue;
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          dead = true;  // EOF or error: answer what is complete, then close
          break;
        }
        while (true) {
          Parse p = handle_one(c);
          if (p == Parse::Done) continue;
          if (p == Parse::Bad) {
            ++g_stats.parse_errors;
            dead = true;
          }
          break;
        }
        if (c.consumed > 0) {
          c.in.erase(0, c.consumed);
          c.consumed = 0;
        }
      }
      if (!c.out.empty() && !flush_out(c)) dead = true;
      if (dead) {
        close_conn(fd);
        continue;
      }
      epoll_event cev{};
      cev.events = EPOLLIN | EPOLLRDHUP | (c.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
      cev.data.fd = fd;
      if (!c.out.empty() || (events[i].events & EPOLLOUT)) epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
    }
  }
  std::printf("%s\n", summary_json().c_str());
  std::fflush(stdout);
  for (auto& [fd, c] : conns) ::close(fd);
  return 0;
}
