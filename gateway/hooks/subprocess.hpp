#pragma once
// Child processes for program and one-shot hooks: spawned in their own process group with pipes
// on stdin/stdout/stderr, ended as a group, always reaped. Linux only.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gateway/common/metrics.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::hooks {

struct SpawnRequest {
  std::vector<std::string> argv;                         // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;  // set on top of the gateway's own
  std::string cwd;                                       // empty: the gateway's
};

// One child process, leader of its own process group (pgid == pid), so a TERM/KILL to the group
// reaches whatever it forked (a shell's `sleep`, a Python subprocess). Not thread-safe: the owner
// serializes access.
class Subprocess {
 public:
  // posix_spawn with: a new process group, default signal dispositions and an empty signal mask
  // (the gateway ignores SIGPIPE and may block signals for sigwait; a hook must not inherit that),
  // the three pipes on fds 0/1/2 and every other fd closed. The parent's ends are O_CLOEXEC and
  // non-blocking, so other children never inherit them.
  static Result<std::unique_ptr<Subprocess>, std::string> spawn(const SpawnRequest& request);

  ~Subprocess();  // terminate(0, 0) unless already reaped; closes every fd
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  int stderr_fd() const { return err_; }
  // Readable (POLLIN) once the process has exited; -1 when pidfds are unavailable.
  int exit_fd() const { return pidfd_; }

  void close_stdin();
  void close_stdout();
  void close_stderr();
  // Hands the stderr pipe to someone else (a StderrForwarder); the caller then owns the fd.
  int release_stderr();

  // True once the process has exited (it stays a zombie until terminate() reaps it).
  bool exited();
  // Waits up to timeout_ms for the process to exit, without reaping it.
  bool wait_exited(int timeout_ms);

  // Ends the process group and reaps the leader. Waits up to natural_ms for the leader to exit on
  // its own, sends SIGTERM to the group, waits up to term_grace_ms more, then SIGKILLs the group
  // (stragglers included: a group never outlives its leader). The group is signalled before the
  // leader is reaped, so the pgid cannot have been recycled. Returns the wait status; idempotent.
  int terminate(int natural_ms, int term_grace_ms);
  bool reaped() const { return reaped_; }

 private:
  Subprocess() = default;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1, pidfd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// "exited with status 3", "killed by signal 9".
std::string describe_wait_status(int status);

// The gateway writes to hook pipes; a hook that died must give EPIPE, not kill the gateway.
// Sets SIGPIPE to SIG_IGN once per process unless someone installed a handler already.
void ignore_sigpipe_once();

// Writes `data` to a non-blocking fd until done or the steady-clock deadline passes. With
// drain_fd, whatever the child writes there meanwhile is appended to *drain (up to drain_max
// bytes): a child that writes before it has read all of a large request would otherwise block
// on a full pipe while we block on its full stdin.
// Bytes read from a child and not yet handed out as lines. Lines are taken from the front by an
// offset, so many short lines in one read cost one pass, not one copy of the rest each.
class LineBuffer {
 public:
  void append(const char* data, size_t size);
  // Also gives back the memory of one huge answer (up to 16 MiB), which would otherwise stay
  // reserved for the hook's lifetime.
  void clear() {
    if (data_.capacity() > (1u << 20)) {
      std::string().swap(data_);
    } else {
      data_.clear();
    }
    start_ = scanned_ = 0;
  }
  size_t size() const { return data_.size() - start_; }
  // The next complete line (without "\n" or "\r\n") searching from unscanned bytes on.
  bool take_line(std::string& line);

 private:
  std::string data_;
  size_t start_ = 0;    // bytes before it were handed out
  size_t scanned_ = 0;  // bytes before it hold no '\n' past start_
};

enum class WriteStatus { Done, Timeout, Closed /* EPIPE */, Error };
WriteStatus write_all(int fd, std::string_view data, int64_t deadline_ns, int drain_fd = -1,
                      LineBuffer* drain = nullptr, size_t drain_max = 0);

// Reads one '\n'-terminated line from a non-blocking fd, buffering the rest in `buf` for the next
// call. Lines longer than max_line are an error (the stream is out of sync).
enum class ReadStatus { Line, Eof, Timeout, TooLong, Error };
// With exit_fd (Subprocess::exit_fd()), the process's exit ends the wait like EOF once nothing
// is left to read: a child it forked may hold the pipe open, and no EOF would come.
ReadStatus read_line(int fd, LineBuffer& buf, std::string& line, int64_t deadline_ns,
                     size_t max_line, int exit_fd = -1);

// Milliseconds left until a steady-clock deadline (0 when passed, capped at INT32_MAX).
int remaining_ms(int64_t deadline_ns);

// Whether a child of this process has exited, without reaping it (it stays a zombie).
bool child_has_exited(int pid);

// One line a hook wrote to stderr: a warn record "hook <name> stderr: <line>", counted in
// hookgate_hook_stderr_lines_total. Both hook forms that have a stderr go through here.
void log_hook_stderr_line(std::string_view hook, std::string_view line);
// The counter it raises. Looked up as each program or one-shot hook is made, so /metrics shows
// it at 0 before the first line (an alert on increase() misses a series' first rise).
metrics::Counter& hook_stderr_lines();

// Forwards a hook's stderr to the log, one warn record per line ("hook <name> stderr: ..."),
// lines cut at kMaxLine bytes. Owns the fd. stop() logs what is still buffered and joins; call it
// after the process is reaped so nothing it wrote is lost.
class StderrForwarder {
 public:
  static constexpr size_t kMaxLine = 4096;
  StderrForwarder(std::string hook_name, int fd);
  ~StderrForwarder();
  StderrForwarder(const StderrForwarder&) = delete;
  StderrForwarder& operator=(const StderrForwarder&) = delete;
  void stop();

 private:
  void run();
  void emit(std::string_view line);
  std::string name_;
  int fd_;
  int wake_[2] = {-1, -1};
  // Also set by stop(): without a wake pipe (no descriptor left for one) the reader polls for it.
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace hookgate::hooks
