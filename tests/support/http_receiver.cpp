#include "tests/support/http_receiver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <utility>

#include "gateway/common/clock.hpp"
#include "tests/support/loopback.hpp"

namespace hookgate::testing {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return std::string(text);
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 410:
      return "Gone";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

// Appends whatever the peer sends next; false on EOF, error or shutdown.
bool read_more(int fd, std::string& buffer) {
  char chunk[16 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads until `buffer` holds at least `size` bytes.
bool fill_to(int fd, std::string& buffer, size_t size) {
  while (buffer.size() < size) {
    if (!read_more(fd, buffer)) return false;
  }
  return true;
}

// Finds "\r\n" at or after `from`, reading more as needed.
std::optional<size_t> find_line_end(int fd, std::string& buffer, size_t from) {
  for (;;) {
    size_t pos = buffer.find("\r\n", from);
    if (pos != std::string::npos) return pos;
    if (buffer.size() - from > kMaxHeaderBytes || !read_more(fd, buffer)) return std::nullopt;
  }
}

// Decodes a chunked body starting at buffer[pos]; returns the offset just past it.
std::optional<size_t> read_chunked(int fd, std::string& buffer, size_t pos, std::string& body) {
  for (;;) {
    auto line_end = find_line_end(fd, buffer, pos);
    if (!line_end) return std::nullopt;
    std::string size_text = buffer.substr(pos, *line_end - pos);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions are ignored
    size_t size = 0;
    try {
      size = std::stoul(trim(size_text), nullptr, 16);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    pos = *line_end + 2;
    if (size == 0) break;
    if (!fill_to(fd, buffer, pos + size + 2)) return std::nullopt;
    body.append(buffer, pos, size);
    pos += size + 2;
  }
  // Trailer fields, ended by an empty line.
  for (;;) {
    auto line_end = find_line_end(fd, buffer, pos);
    if (!line_end) return std::nullopt;
    bool empty = *line_end == pos;
    pos = *line_end + 2;
    if (empty) return pos;
  }
}

struct ParsedRequest {
  HttpReceiver::Request request;
  bool keep_alive = true;
};

// Reads one request (head and body) from the connection; nullopt on EOF or malformed input.
std::optional<ParsedRequest> read_request(int fd, std::string& buffer) {
  size_t header_end;
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > kMaxHeaderBytes || !read_more(fd, buffer)) return std::nullopt;
  }
  ParsedRequest parsed;
  auto& request = parsed.request;
  std::string_view head(buffer.data(), header_end);
  size_t line_end = head.find("\r\n");
  std::string_view request_line = head.substr(0, line_end);
  size_t sp1 = request_line.find(' ');
  size_t sp2 = request_line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return std::nullopt;
  request.method = std::string(request_line.substr(0, sp1));
  request.path = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string version(request_line.substr(sp2 + 1));
  while (line_end != std::string_view::npos) {
    size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    std::string_view line = head.substr(
        start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name = lower(trim(line.substr(0, colon)));
    std::string value = trim(line.substr(colon + 1));
    auto [it, inserted] = request.headers.emplace(name, value);
    if (!inserted) it->second += ", " + value;
  }

  const size_t body_start = header_end + 4;
  if (lower(request.header("expect")) == "100-continue" && buffer.size() == body_start &&
      !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n"))
    return std::nullopt;
  size_t consumed;
  if (lower(request.header("transfer-encoding")).find("chunked") != std::string::npos) {
    auto end = read_chunked(fd, buffer, body_start, request.body);
    if (!end) return std::nullopt;
    consumed = *end;
  } else {
    size_t length = 0;
    if (auto text = request.header("content-length"); !text.empty()) {
      try {
        length = std::stoul(text);
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
    if (!fill_to(fd, buffer, body_start + length)) return std::nullopt;
    request.body = buffer.substr(body_start, length);
    consumed = body_start + length;
  }
  buffer.erase(0, consumed);

  std::string connection = lower(request.header("connection"));
  parsed.keep_alive = version == "HTTP/1.1" ? connection.find("close") == std::string::npos
                                            : connection.find("keep-alive") != std::string::npos;
  return parsed;
}

}  // namespace

std::string HttpReceiver::Request::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

ClosedPort::ClosedPort() {
  const LoopbackSocket bound = bind_loopback(0, 0);  // bound, not listening: refuses
  if (bound.fd < 0) throw std::runtime_error("ClosedPort: cannot bind 127.0.0.1:0");
  fd_ = bound.fd;
  port_ = bound.port;
}

ClosedPort::~ClosedPort() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ClosedPort::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + (path.empty() ? "/" : path);
}

HttpReceiver::HttpReceiver(ClosedPort& down) {
  if (down.fd_ < 0 || ::listen(down.fd_, 128) != 0)
    throw std::runtime_error("HttpReceiver: cannot listen on 127.0.0.1:" +
                             std::to_string(down.port_));
  listen_fd_ = std::exchange(down.fd_, -1);
  port_ = down.port_;
  accept_thread_ = std::thread([this] { accept_loop(); });
}

HttpReceiver::HttpReceiver(int port) {
  const LoopbackSocket listener = bind_loopback(port, 128);
  if (listener.fd < 0)
    throw std::runtime_error("HttpReceiver: cannot listen on 127.0.0.1:" + std::to_string(port));
  listen_fd_ = listener.fd;
  port_ = listener.port;
  accept_thread_ = std::thread([this] { accept_loop(); });
}

HttpReceiver::~HttpReceiver() {
  stop();
}

std::string HttpReceiver::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + (path.empty() ? "/" : path);
}

std::vector<HttpReceiver::Request> HttpReceiver::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t HttpReceiver::count() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

bool HttpReceiver::wait_for(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

size_t HttpReceiver::connection_count() const {
  std::lock_guard lock(mu_);
  return connections_accepted_;
}

void HttpReceiver::set_handler(Handler handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

bool HttpReceiver::sleep_unless_stopping(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  return !changed_.wait_for(lock, delay, [&] { return stopping_; });
}

void HttpReceiver::reap_finished_connections() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->done) {
        finished.splice(finished.end(), connections_, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& connection : finished) {
    connection->thread.join();
    ::close(connection->fd);  // closed only after its thread ended, so the fd cannot be reused
  }
}

void HttpReceiver::accept_loop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shutdown() by stop(), or a fatal error
    }
    reap_finished_connections();
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->id = ++connections_accepted_;
    Connection* raw = connection.get();
    connections_.push_back(std::move(connection));
    raw->thread = std::thread([this, raw] { serve(raw); });
  }
}

void HttpReceiver::serve(Connection* connection) {
  const int fd = connection->fd;
  std::string buffer;  // bytes received but not yet consumed (pipelined requests stay here)
  for (;;) {
    std::optional<ParsedRequest> parsed = read_request(fd, buffer);
    if (!parsed) break;
    Request& request = parsed->request;
    request.connection_id = connection->id;
    request.received_ns = now_steady_ns();
    bool keep_alive = parsed->keep_alive;

    Handler handler;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
      handler = handler_;
    }
    changed_.notify_all();

    Response response = handler ? handler(request) : Response{};
    if (response.delay.count() > 0 && !sleep_unless_stopping(response.delay)) break;

    std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                      reason_phrase(response.status) + "\r\n";
    bool has_length = false;
    bool has_connection = false;
    for (const auto& [name, value] : response.headers) {
      std::string lower_name = lower(name);
      if (lower_name == "content-length") has_length = true;
      if (lower_name == "connection") {
        has_connection = true;
        if (lower(value).find("close") != std::string::npos) keep_alive = false;
      }
      out += name + ": " + value + "\r\n";
    }
    if (!has_length) out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
    if (!keep_alive && !has_connection) out += "Connection: close\r\n";
    out += "\r\n";
    if (request.method != "HEAD") out += response.body;
    if (!send_all(fd, out) || !keep_alive) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  std::lock_guard lock(mu_);
  connection->done = true;
}

void HttpReceiver::stop() {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);

  std::list<std::unique_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    connections.swap(connections_);
    // Wake every connection blocked in recv(); their fds stay open until joined.
    for (auto& connection : connections) ::shutdown(connection->fd, SHUT_RDWR);
  }
  for (auto& connection : connections) {
    connection->thread.join();
    ::close(connection->fd);
  }
}

}  // namespace hookgate::testing
