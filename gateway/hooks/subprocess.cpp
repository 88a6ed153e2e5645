#include "gateway/hooks/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/thread_name.hpp"

extern char** environ;

namespace hookgate::hooks {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Keeps pipe ends off fds 0-2: dup2(fd, fd) in the child would be a no-op that leaves O_CLOEXEC
// set, and the child would start without that stream.
bool move_above_stdio(int& fd) {
  if (fd > 2) return true;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  ::close(fd);
  fd = moved;
  return true;
}

bool make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  if (move_above_stdio(fds[0]) && move_above_stdio(fds[1])) return true;
  close_fd(fds[0]);
  close_fd(fds[1]);
  return false;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  // pidfds are always close-on-exec.
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

std::vector<std::string> build_env(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t equals = entry.find('=');
    std::string_view key = entry.substr(0, equals);
    // A variable that holds a webhook secret, a secret header value or the admin token (the
    // config's ${VAR}s put them in the environment) stays with the gateway: a hook that dumps
    // its environment must not be able to leak it.
    if (equals != std::string_view::npos && holds_secret(entry.substr(equals + 1))) continue;
    bool overridden = false;
    for (const auto& [k, v] : extra) overridden = overridden || k == key;
    if (!overridden) env.emplace_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

int remaining_ms(int64_t deadline_ns) {
  int64_t left = deadline_ns - now_steady_ns();
  if (left <= 0) return 0;
  int64_t ms = (left + 999'999) / 1'000'000;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

Result<std::unique_ptr<Subprocess>, std::string> Subprocess::spawn(const SpawnRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) return std::string("empty command line");
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if (!make_pipe(in) || !make_pipe(out) || !make_pipe(err)) {
    std::string reason = std::string("cannot create pipes: ") + std::strerror(errno);
    close_all();
    return reason;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // Belt and braces for fds some library opened without O_CLOEXEC: the hook gets 0-2 only.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!request.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, request.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);  // own group: pgid == pid
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> env = build_env(request.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = request.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close_all();
    return "cannot start " + request.argv[0] + ": " + std::strerror(rc);
  }

  std::unique_ptr<Subprocess> p(new Subprocess());
  p->pid_ = pid;
  p->in_ = in[1];
  p->out_ = out[0];
  p->err_ = err[0];
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  set_nonblocking(p->in_);
  set_nonblocking(p->out_);
  set_nonblocking(p->err_);
  p->pidfd_ = open_pidfd(pid);
  return p;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) terminate(0, 0);
  close_fd(in_);
  close_fd(out_);
  close_fd(err_);
  close_fd(pidfd_);
}

void Subprocess::close_stdin() {
  close_fd(in_);
}
void Subprocess::close_stdout() {
  close_fd(out_);
}
void Subprocess::close_stderr() {
  close_fd(err_);
}

int Subprocess::release_stderr() {
  int fd = err_;
  err_ = -1;
  return fd;
}

bool child_has_exited(int pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  // WNOWAIT: look without reaping, so the pid (and pgid) stay reserved until terminate().
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD;  // someone else reaped it (SIGCHLD set to SIG_IGN)
  }
  return info.si_pid != 0;
}

bool Subprocess::exited() {
  return reaped_ || child_has_exited(pid_);
}

bool Subprocess::wait_exited(int timeout_ms) {
  int64_t deadline = now_steady_ns() + int64_t{timeout_ms} * 1'000'000;
  while (!exited()) {
    int left = remaining_ms(deadline);
    if (left <= 0) return false;
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      ::poll(&p, 1, left);
    } else {
      ::usleep(static_cast<useconds_t>(std::min(left, 2) * 1000));
    }
  }
  return true;
}

int Subprocess::terminate(int natural_ms, int term_grace_ms) {
  if (reaped_ || pid_ <= 0) return status_;
  bool gone = natural_ms > 0 && wait_exited(natural_ms);
  if (!gone) {
    ::kill(-pid_, SIGTERM);
    gone = term_grace_ms > 0 && wait_exited(term_grace_ms);
  }
  // Always: the leader may be gone but its children (same group) not. The unreaped leader keeps
  // the pgid reserved, so this cannot hit an unrelated group.
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  status_ = status;
  return status_;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old;
    std::memset(&old, 0, sizeof old);
    if (::sigaction(SIGPIPE, nullptr, &old) != 0) return;
    if ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

void LineBuffer::append(const char* data, size_t size) {
  if (start_ > 0) {  // what is left is at most a partial line: cheap to move
    data_.erase(0, start_);
    scanned_ -= start_;
    start_ = 0;
  }
  data_.append(data, size);
}

bool LineBuffer::take_line(std::string& line) {
  const size_t nl = data_.find('\n', std::max(scanned_, start_));
  if (nl == std::string::npos) {
    scanned_ = data_.size();
    return false;
  }
  const size_t end = nl > start_ && data_[nl - 1] == '\r' ? nl - 1 : nl;
  line.assign(data_, start_, end - start_);
  start_ = scanned_ = nl + 1;
  if (start_ == data_.size()) clear();
  return true;
}

WriteStatus write_all(int fd, std::string_view data, int64_t deadline_ns, int drain_fd,
                      LineBuffer* drain, size_t drain_max) {
  bool draining = drain_fd >= 0 && drain != nullptr;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) return WriteStatus::Closed;
    if (n < 0 && errno != EAGAIN) return WriteStatus::Error;
    int left = remaining_ms(deadline_ns);
    if (left <= 0) return WriteStatus::Timeout;
    draining = draining && drain->size() <= drain_max;  // beyond: read_line reports TooLong
    pollfd p[2] = {{fd, POLLOUT, 0}, {drain_fd, POLLIN, 0}};
    ::poll(p, draining ? 2 : 1, left);
    if (draining && p[1].revents != 0) {
      char chunk[65536];
      const ssize_t got = ::read(drain_fd, chunk, sizeof chunk);
      if (got > 0) drain->append(chunk, static_cast<size_t>(got));
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) draining = false;
    }
  }
  return WriteStatus::Done;
}

ReadStatus read_line(int fd, LineBuffer& buf, std::string& line, int64_t deadline_ns,
                     size_t max_line, int exit_fd) {
  bool exited = false;  // seen by the last poll; what it wrote before is in the pipe by now
  for (;;) {
    if (buf.take_line(line)) return ReadStatus::Line;
    if (buf.size() > max_line) return ReadStatus::TooLong;
    // A child that never stops writing never lets read() say EAGAIN: the deadline still holds.
    // One that has exited gets its last read first: that is an exit, not a timeout.
    const bool late = remaining_ms(deadline_ns) <= 0;
    if (late && !exited) return ReadStatus::Timeout;
    char chunk[65536];
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      if (late) return buf.take_line(line) ? ReadStatus::Line : ReadStatus::Eof;  // a grandchild's
      continue;
    }
    if (n == 0) return ReadStatus::Eof;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return ReadStatus::Error;
    if (exited) return ReadStatus::Eof;
    int left = remaining_ms(deadline_ns);
    if (left <= 0) return ReadStatus::Timeout;
    pollfd p[2] = {{fd, POLLIN, 0}, {exit_fd, POLLIN, 0}};
    if (::poll(p, exit_fd >= 0 ? 2 : 1, left) > 0 && exit_fd >= 0 && (p[1].revents & POLLIN) != 0)
      exited = true;
  }
}

StderrForwarder::StderrForwarder(std::string hook_name, int fd)
    : name_(std::move(hook_name)), fd_(fd) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    wake_[0] = wake_[1] = -1;
  }
  set_nonblocking(fd_);
  try {
    thread_ = std::thread([this] {
      name_this_thread("hg-hook-program");
      run();
    });
  } catch (...) {  // no destructor runs for a constructor that throws: close what it owns
    close_fd(fd_);
    close_fd(wake_[0]);
    close_fd(wake_[1]);
    throw;
  }
}

StderrForwarder::~StderrForwarder() {
  stop();
}

void StderrForwarder::stop() {
  if (thread_.joinable()) {
    stopping_.store(true, std::memory_order_relaxed);
    if (wake_[1] >= 0) {
      char c = 'x';
      [[maybe_unused]] ssize_t n = ::write(wake_[1], &c, 1);
    }
    thread_.join();
  }
  close_fd(fd_);
  close_fd(wake_[0]);
  close_fd(wake_[1]);
}

metrics::Counter& hook_stderr_lines() {
  static auto& counter = metrics::counter("hookgate_hook_stderr_lines_total",
                                          "Lines program and one-shot hooks wrote to stderr");
  return counter;
}

void log_hook_stderr_line(std::string_view hook, std::string_view line) {
  hook_stderr_lines().inc();
  // 20 lines a second per hook: a hook that prints garbage in a loop cannot flood the log.
  if (log_limiter_for("hook " + std::string(hook) + " stderr", 20).allow())
    spdlog::warn("hook {} stderr: {}", hook, line);
}

void StderrForwarder::emit(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return;
  log_hook_stderr_line(name_, line);
}

void StderrForwarder::run() {
  std::string buf;
  bool discarding = false;  // inside an over-long line whose head was already logged
  auto consume = [&](const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        if (!discarding) emit(buf);
        buf.clear();
        discarding = false;
      } else if (!discarding) {
        buf.push_back(data[i]);
        if (buf.size() >= kMaxLine) {
          emit(buf + " [truncated]");
          buf.clear();
          discarding = true;
        }
      }
    }
  };
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int nfds = wake_[0] >= 0 ? 2 : 1;
    // Without the wake pipe, stop() is seen within 200 ms instead (a descendant that left the
    // group may hold stderr open for good, so EOF cannot be waited for).
    if (::poll(p, static_cast<nfds_t>(nfds), nfds == 2 ? -1 : 200) < 0 && errno != EINTR) break;
    bool stopping =
        (nfds == 2 && (p[1].revents & POLLIN) != 0) || stopping_.load(std::memory_order_relaxed);
    bool eof = false;
    // Drain what is there (the fd is non-blocking), at most 1 MiB per pass: a process that
    // escaped the group (setsid) and keeps writing must not keep this loop from seeing stop().
    size_t budget = size_t{1} << 20;
    for (;;) {
      char chunk[8192];
      ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n > 0) {
        consume(chunk, static_cast<size_t>(n));
        if ((budget -= std::min(budget, static_cast<size_t>(n))) == 0) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      eof = n == 0 || errno != EAGAIN;
      break;
    }
    if (eof || stopping) break;
  }
  if (!buf.empty() && !discarding) emit(buf);
}

}  // namespace hookgate::hooks
