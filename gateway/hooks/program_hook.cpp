#include "gateway/hooks/program_hook.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <system_error>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/hooks/program_protocol.hpp"
#include "gateway/hooks/subprocess.hpp"

namespace hookgate::hooks {
namespace {

// Protocol decisions (program form):
// - One request in flight per co-process. Callers take turns (ProgramHook::Turn); the
//   protocol has ids, but a hook written as "read a line, print a line" is the common case and
//   pipelining would make every hook author handle concurrency for little gain (observers already
//   run in parallel across hooks). A caller waits at most timeout_ms for its turn (then fails with
//   a timeout without touching the process), and then has timeout_ms of its own for the request.
// - Answers echo the request id. An answer with another id (a hook that answered twice, or late)
//   is logged and discarded until the right id arrives or the deadline passes.
// - A timeout kills the process group (TERM, 200 ms, KILL); a crash (EOF on stdout, EPIPE on
//   stdin) reaps it. Either way the next request restarts the process lazily, after an exponential
//   backoff (100 ms doubling to 30 s, reset by the first good answer); requests during the backoff
//   fail fast. A garbage answer is a failure but leaves the process running.
constexpr int kTermGraceMs = 200;
constexpr int kPoliteExitMs = 100;  // after closing stdin on unload / after EOF on stdout
constexpr int64_t kBackoffInitialMs = 100;
constexpr int64_t kBackoffMaxMs = 30'000;
constexpr size_t kMaxHandshakeBytes = 64 * 1024;
constexpr size_t kMaxAnswerBytes = 16 * 1024 * 1024;
// One-shot capture limits: stdout carries at most a replaced event, stderr at most a reason.
constexpr size_t kMaxOneShotStdout = 4 * 1024 * 1024;
constexpr size_t kMaxOneShotStderr = 64 * 1024;

bool is_directory(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Hooks run with their hook directory as working directory (so a descriptor's `command:` can
// name files beside it). A relative program path from discovery keeps meaning the same file.
SpawnRequest base_request(const HookSpec& spec, std::vector<std::string> argv) {
  SpawnRequest req;
  req.env = {{"HOOKGATE_HOOK_NAME", spec.name}, {"HOOKGATE_HOOK_CONFIG", spec.config_json}};
  if (is_directory(spec.directory)) {
    req.cwd = spec.directory;
    req.env.emplace_back("HOOKGATE_HOOK_DIR", spec.directory);
    if (!argv.empty() && argv[0].find('/') != std::string::npos && argv[0][0] != '/') {
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd) != nullptr) argv[0] = std::string(cwd) + "/" + argv[0];
    }
  }
  req.argv = std::move(argv);
  return req;
}

// ---------------------------------------------------------------------------------------------
// Program form: a long-running co-process.

class ProgramHook final : public Hook {
 public:
  ProgramHook(HookSpec spec, std::vector<std::string> argv, bool descriptor_sets_kind,
              bool descriptor_sets_events)
      : Hook(std::move(spec)),
        argv_(std::move(argv)),
        descriptor_sets_kind_(descriptor_sets_kind),
        descriptor_sets_events_(descriptor_sets_kind && descriptor_sets_events),
        restarts_counter_(&metrics::counter("hookgate_hook_restarts_total",
                                            "Program hook processes restarted after a crash or "
                                            "timeout",
                                            {{"hook", this->spec().name}})) {}

  // No caller can be inside handle() any more: the last HookPtr is gone.
  ~ProgramHook() override { stop_locked(kPoliteExitMs); }

  // Starts the first process and reads its handshake (kind and events come from it unless a
  // descriptor set them). Runs before the hook is shared, so neither a Turn nor
  // set_kind_and_events' lack of locking matter.
  std::optional<std::string> load() {
    Handshake hs;
    if (auto f = start_locked(deadline_from_now(), &hs)) return f->reason;
    if (!descriptor_sets_kind_) {
      set_kind_and_events(*hs.kind, hs.events);
    } else if (!descriptor_sets_events_) {  // kind: without events: the program's patterns
      set_kind_and_events(spec().kind, hs.events);
    }
    return std::nullopt;
  }

  HookResult handle(Event& event) override {
    const std::string event_json = event.to_json();  // before taking a turn: needs none
    Turn turn(*this);
    if (!turn.acquired()) {
      return HookFailure{HookFailure::Kind::Timeout,
                         "co-process busy: no turn within " + std::to_string(spec().timeout_ms) +
                             " ms (one request in flight per program hook)"};
    }
    int64_t deadline = deadline_from_now();
    if (proc_ && proc_->exited()) {
      // Died between requests (the OOM killer, an operator's kill): no request was lost with it,
      // so this event gets a new process instead of the failure (and, under on_error: closed,
      // a veto).
      const int status = stop_locked(kPoliteExitMs);
      spdlog::warn("hook {}: process {} while idle; starting a new one", spec().name,
                   describe_wait_status(status));
    }
    if (!proc_) {
      if (now_steady_ns() < retry_at_ns_) {
        return HookFailure{
            HookFailure::Kind::Error,
            "not run: its process is restarting (backoff) after: " + backoff_reason_};
      }
      if (auto f = start_locked(deadline, nullptr)) return backoff_locked(std::move(*f));
      restarts_.fetch_add(1, std::memory_order_relaxed);
      restarts_counter_->inc();
      // The request gets a timeout_ms of its own after the handshake's, as at load: sharing one
      // failed every request of a hook slower than half its timeout to start, restart after
      // restart. The event that meets a restart may so wait up to twice timeout_ms.
      deadline = deadline_from_now();
    }

    const uint64_t id = ++next_id_;
    std::string request = "{\"id\":" + std::to_string(id) + ",\"event\":" + event_json + "}\n";
    switch (write_all(proc_->stdin_fd(), request, deadline, proc_->stdout_fd(), &out_buf_,
                      kMaxAnswerBytes)) {
      case WriteStatus::Done:
        break;
      case WriteStatus::Timeout:
        return timed_out_locked("writing the request");
      case WriteStatus::Closed:
      case WriteStatus::Error:
        return crashed_locked("closed its stdin");
    }

    // Blank lines and stale answers go round again; read_line keeps to the deadline even for a
    // hook that prints them without end.
    for (;;) {
      std::string line;
      switch (read_line(proc_->stdout_fd(), out_buf_, line, deadline, kMaxAnswerBytes,
                        proc_->exit_fd())) {
        case ReadStatus::Line:
          break;
        case ReadStatus::Timeout:
          return timed_out_locked("waiting for the answer");
        case ReadStatus::TooLong:
          stop_locked(0);
          return backoff_locked(HookFailure{
              HookFailure::Kind::Error,
              "garbage answer: a line longer than " + std::to_string(kMaxAnswerBytes) + " bytes"});
        case ReadStatus::Eof:
        case ReadStatus::Error:
          return crashed_locked("closed its stdout");
      }
      if (trim(line).empty()) continue;
      std::optional<HookResult> answer = interpret(line, id);
      if (!answer) continue;              // stale id, already logged
      if (answer->ok()) backoff_ms_ = 0;  // a healthy answer ends the crash streak
      return std::move(*answer);
    }
  }

  // "exited": the process died between requests (an operator's kill, the OOM killer); the next
  // event starts a new one. Said as "running" before (found in a hook author's pass).
  std::string snapshot() const override {
    int pid = pid_.load(std::memory_order_relaxed);
    const char* state = pid <= 0 ? "backoff" : child_has_exited(pid) ? "exited" : "running";
    return "{\"pid\":" + std::to_string(pid) +
           ",\"restarts\":" + std::to_string(restarts_.load(std::memory_order_relaxed)) +
           ",\"state\":\"" + state + "\"}";
  }

 private:
  int64_t deadline_from_now() const {
    return now_steady_ns() + int64_t{spec().timeout_ms} * 1'000'000;
  }

  // Spawns the process and reads its handshake line. On failure nothing is left running.
  std::optional<HookFailure> start_locked(int64_t deadline, Handshake* out) {
    auto spawned = Subprocess::spawn(base_request(spec(), argv_));
    if (!spawned) return HookFailure{HookFailure::Kind::Error, std::move(spawned).error()};
    auto proc = std::move(spawned).value();
    try {
      stderr_ = std::make_unique<StderrForwarder>(spec().name, proc->release_stderr());
    } catch (const std::system_error& e) {  // no thread to read its stderr: not started
      proc->terminate(0, 0);
      return HookFailure{HookFailure::Kind::Error,
                         std::string("cannot start a reader for its stderr: ") + e.what()};
    }
    proc_ = std::move(proc);
    out_buf_.clear();

    std::string line;
    switch (read_line(proc_->stdout_fd(), out_buf_, line, deadline, kMaxHandshakeBytes,
                      proc_->exit_fd())) {
      case ReadStatus::Line:
        break;
      case ReadStatus::Timeout:
        stop_locked(0);
        return HookFailure{HookFailure::Kind::Timeout,
                           "no handshake line within " + std::to_string(spec().timeout_ms) + " ms"};
      case ReadStatus::TooLong:
        stop_locked(0);
        return HookFailure{HookFailure::Kind::Error, "handshake line too long"};
      case ReadStatus::Eof:
      case ReadStatus::Error: {
        int status = stop_locked(kPoliteExitMs);
        return HookFailure{
            HookFailure::Kind::Error,
            "hook process " + describe_wait_status(status) + " before its handshake"};
      }
    }
    auto hs = parse_handshake(line, !descriptor_sets_kind_, !descriptor_sets_events_);
    if (!hs) {
      stop_locked(0);
      return HookFailure{HookFailure::Kind::Error, std::move(hs).error()};
    }
    if (out != nullptr) {
      *out = std::move(hs).value();
    } else if (!descriptor_sets_kind_ && hs->kind != spec().kind) {
      // The chain was built for the first handshake's kind; it cannot change under it.
      spdlog::warn("hook {}: restarted process announces kind {}; keeping {}", spec().name,
                   to_string(*hs->kind), to_string(spec().kind));
    }
    pid_.store(proc_->pid(), std::memory_order_relaxed);
    return std::nullopt;
  }

  // Closes stdin (a polite hook exits on EOF), waits natural_ms, then TERM/KILL to the group,
  // reaps, and logs what the process still had on stderr. Returns the wait status.
  int stop_locked(int natural_ms) {
    if (!proc_) return 0;
    proc_->close_stdin();
    int status = proc_->terminate(natural_ms, kTermGraceMs);
    if (stderr_) stderr_->stop();
    stderr_.reset();
    proc_.reset();
    out_buf_.clear();
    pid_.store(0, std::memory_order_relaxed);
    return status;
  }

  HookResult backoff_locked(HookFailure f) {
    backoff_ms_ = backoff_ms_ == 0 ? kBackoffInitialMs : std::min(backoff_ms_ * 2, kBackoffMaxMs);
    retry_at_ns_ = now_steady_ns() + backoff_ms_ * 1'000'000;
    backoff_reason_ = f.reason;
    // The process starts again with the next event that needs it, no sooner than this (found in
    // an SRE pass: "restarting in 100 ms" read as a restart that then never showed in the metrics
    // while no event came).
    spdlog::warn("hook {}: {}; started again for the next event after {} ms", spec().name, f.reason,
                 backoff_ms_);
    return f;
  }

  // `what_it_did`: what the gateway saw of the process. One that then exits by itself is
  // described by its wait status; one still running is stopped here, and the SIGTERM in its
  // status is the gateway's (found in a hook author's test: "killed by signal 15" for a hook that
  // had closed its stdout).
  HookResult crashed_locked(std::string_view what_it_did) {
    const bool exited = proc_ && proc_->wait_exited(kPoliteExitMs);
    const int status = stop_locked(0);
    return backoff_locked(HookFailure{HookFailure::Kind::Error,
                                      exited ? "hook process " + describe_wait_status(status)
                                             : "hook process " + std::string(what_it_did) +
                                                   " while still running; process group stopped"});
  }

  HookResult timed_out_locked(const char* doing) {
    stop_locked(0);
    return backoff_locked(HookFailure{HookFailure::Kind::Timeout,
                                      "timed out after " + std::to_string(spec().timeout_ms) +
                                          " ms " + doing + "; process group killed"});
  }

  std::optional<HookResult> interpret(const std::string& line, uint64_t id) {
    return interpret_answer(line, id, spec().name, spec().kind);
  }

  // The right to talk to the co-process: one request in flight. A flag under a mutex rather than
  // a timed_mutex held across the request, so waiting for a turn is bounded and sanitizers
  // understand it.
  class Turn {
   public:
    explicit Turn(ProgramHook& hook) : hook_(hook) {
      std::unique_lock lock(hook_.turn_mu_);
      acquired_ = hook_.turn_cv_.wait_until(
          lock,
          std::chrono::steady_clock::now() + std::chrono::milliseconds(hook_.spec().timeout_ms),
          [&] { return !hook_.busy_; });
      if (acquired_) hook_.busy_ = true;
    }
    ~Turn() {
      if (!acquired_) return;
      {
        std::lock_guard lock(hook_.turn_mu_);
        hook_.busy_ = false;
      }
      hook_.turn_cv_.notify_one();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    bool acquired() const { return acquired_; }

   private:
    ProgramHook& hook_;
    bool acquired_ = false;
  };

  const std::vector<std::string> argv_;
  const bool descriptor_sets_kind_;
  const bool descriptor_sets_events_;
  metrics::Counter* restarts_counter_;

  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
  bool busy_ = false;  // a Turn is held; it guards everything below
  std::unique_ptr<Subprocess> proc_;
  std::unique_ptr<StderrForwarder> stderr_;
  LineBuffer out_buf_;  // stdout bytes after the last line read
  uint64_t next_id_ = 0;
  int64_t backoff_ms_ = 0;
  int64_t retry_at_ns_ = 0;
  std::string backoff_reason_;  // what started the backoff, for the requests it refuses

  // Read by snapshot() without the request lock, so a status page never waits on a slow hook.
  std::atomic<int> pid_{0};
  std::atomic<uint64_t> restarts_{0};
};

// ---------------------------------------------------------------------------------------------
// One-shot form: `/bin/sh -c command` per event.

// The most of an event attribute a one-shot hook's environment carries.
constexpr size_t kMaxEnvAttributeBytes = 4096;

class OneShotHook final : public Hook {
 public:
  OneShotHook(HookSpec spec, std::string command, std::vector<int> veto_exit_codes)
      : Hook(std::move(spec)),
        command_(std::move(command)),
        veto_codes_(std::move(veto_exit_codes)) {}

  // Concurrent calls are fine: each runs its own process.
  HookResult handle(Event& event) override {
    const int64_t deadline = deadline_from_now();
    SpawnRequest req = base_request(spec(), {"/bin/sh", "-c", command_});
    // Cut: Linux refuses to start a program with any environment string over 128 KiB, and a
    // publisher may send a source that long. The whole event is on stdin.
    const auto attribute = [](std::string_view value) {
      return std::string(value.substr(0, kMaxEnvAttributeBytes));
    };
    req.env.emplace_back("HOOKGATE_EVENT_TYPE", attribute(event.type()));
    req.env.emplace_back("HOOKGATE_EVENT_ID", attribute(event.id()));
    req.env.emplace_back("HOOKGATE_EVENT_SOURCE", attribute(event.source()));
    auto spawned = Subprocess::spawn(req);
    if (!spawned) return HookFailure{HookFailure::Kind::Error, std::move(spawned).error()};
    Subprocess& proc = *spawned.value();

    // A trailing newline so line-oriented tools (`read`) see a complete line.
    const std::string input = event.to_json() + "\n";
    Capture out{kMaxOneShotStdout}, err{kMaxOneShotStderr};
    if (!pump(proc, input, out, err, deadline)) {
      proc.terminate(0, kTermGraceMs);
      forward_stderr(err.data);
      return HookFailure{HookFailure::Kind::Timeout, "command did not finish within " +
                                                         std::to_string(spec().timeout_ms) +
                                                         " ms; process group killed"};
    }
    // The shell has exited: what it wrote is in the pipes. Its leftovers (background jobs) die
    // with it, since a one-shot command's group never outlives the command.
    out.drain(proc.stdout_fd());
    err.drain(proc.stderr_fd());
    const int status = proc.terminate(0, 0);

    if (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
        std::find(veto_codes_.begin(), veto_codes_.end(), WEXITSTATUS(status)) !=
            veto_codes_.end()) {
      HookVerdict v;
      v.action = Action::Veto;
      v.reason = excerpt(trim(err.data), kMaxVetoReason);
      if (v.reason.empty()) {
        v.reason =
            "vetoed by hook " + spec().name + " (exit " + std::to_string(WEXITSTATUS(status)) + ")";
      }
      return v;
    }
    forward_stderr(err.data);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      // stderr stays in the log: the reason travels in hookgate.hook.failed to webhooks, and a
      // failing tool may quote the event (jq does), even the value a redaction hook was to remove.
      std::string reason = "command " + describe_wait_status(status);
      const std::string_view said = trim(err.data);
      if (said.empty()) return HookFailure{HookFailure::Kind::Error, std::move(reason)};
      HookFailure f = HookFailure{HookFailure::Kind::Error, reason + " (its stderr is in the log)"};
      f.tool_detail = reason + ": " + excerpt(said);
      return f;
    }
    // A veto command's output (jq -e printing `true`, however long) is not an event to check.
    if (spec().kind == HookKind::Veto)
      return trim(out.data).empty() && !out.overflow ? HookVerdict{} : ignored_replacement();
    if (out.overflow) {
      return HookFailure{
          HookFailure::Kind::Error,
          "garbage output: stdout exceeds " + std::to_string(kMaxOneShotStdout) + " bytes"};
    }
    std::string_view text = trim(out.data);
    if (text.empty()) return HookVerdict{};  // continue
    auto replacement = replacement_event(text);
    if (!replacement) {
      return HookFailure{HookFailure::Kind::Error,
                         garbage_reason(spec().name, replacement.error(), text, "output")};
    }
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement = std::move(replacement).value();
    return v;
  }

 private:
  struct Capture {
    size_t limit;
    std::string data;
    bool overflow = false;
    bool open = true;
    // Reads what is available; false at EOF or error.
    bool read_some(int fd) {
      char chunk[65536];
      for (int rounds = 0; rounds < 64; ++rounds) {  // bounded: a chatty child cannot starve us
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n > 0) {
          size_t room = limit > data.size() ? limit - data.size() : 0;
          data.append(chunk, std::min(room, static_cast<size_t>(n)));
          overflow = overflow || static_cast<size_t>(n) > room;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n < 0 && errno == EAGAIN;
      }
      return true;
    }
    void drain(int fd) {
      if (open && fd >= 0) read_some(fd);
    }
  };

  int64_t deadline_from_now() const {
    return now_steady_ns() + int64_t{spec().timeout_ms} * 1'000'000;
  }

  // Feeds stdin and collects stdout/stderr until the shell exits. False on timeout.
  static bool pump(Subprocess& proc, std::string_view input, Capture& out, Capture& err,
                   int64_t deadline) {
    size_t written = 0;
    if (input.empty()) proc.close_stdin();
    for (;;) {
      if (proc.exited()) return true;
      int left = remaining_ms(deadline);
      if (left <= 0) return false;
      pollfd fds[4];
      nfds_t n = 0;
      int in_idx = -1, out_idx = -1, err_idx = -1;
      if (proc.stdin_fd() >= 0) {
        in_idx = static_cast<int>(n);
        fds[n++] = {proc.stdin_fd(), POLLOUT, 0};
      }
      if (out.open) {
        out_idx = static_cast<int>(n);
        fds[n++] = {proc.stdout_fd(), POLLIN, 0};
      }
      if (err.open) {
        err_idx = static_cast<int>(n);
        fds[n++] = {proc.stderr_fd(), POLLIN, 0};
      }
      // Without a pidfd, exit is noticed by polling every 10 ms.
      int wait_ms = left;
      if (proc.exit_fd() >= 0) {
        fds[n++] = {proc.exit_fd(), POLLIN, 0};
      } else {
        wait_ms = std::min(left, 10);
      }
      if (::poll(fds, n, wait_ms) < 0 && errno != EINTR) return false;
      if (in_idx >= 0 && fds[in_idx].revents != 0) {
        ssize_t w = ::write(proc.stdin_fd(), input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        // EPIPE: the command does not read its stdin; that is its right, not a failure.
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
          proc.close_stdin();
        }
      }
      if (out_idx >= 0 && fds[out_idx].revents != 0 && !out.read_some(proc.stdout_fd())) {
        out.open = false;
        proc.close_stdout();
      }
      if (err_idx >= 0 && fds[err_idx].revents != 0 && !err.read_some(proc.stderr_fd())) {
        err.open = false;
        proc.close_stderr();
      }
    }
  }

  void forward_stderr(std::string_view text) const {
    while (!text.empty()) {
      size_t nl = text.find('\n');
      std::string_view line = trim(text.substr(0, nl));
      if (!line.empty()) {
        log_hook_stderr_line(spec().name, excerpt(line, StderrForwarder::kMaxLine));
      }
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
  }

  const std::string command_;
  const std::vector<int> veto_codes_;
};

}  // namespace

LoadResult make_program_hook(HookSpec spec, std::vector<std::string> argv,
                             bool descriptor_sets_kind, bool descriptor_sets_events) {
  ignore_sigpipe_once();
  hook_stderr_lines();
  if (argv.empty()) return std::string("program hook has an empty command line");
  spec.form = HookForm::Program;
  auto hook = std::make_shared<ProgramHook>(std::move(spec), std::move(argv), descriptor_sets_kind,
                                            descriptor_sets_events);
  if (auto err = hook->load()) return *std::move(err);
  return HookPtr(std::move(hook));
}

LoadResult make_oneshot_hook(HookSpec spec, std::string command, std::vector<int> veto_exit_codes) {
  ignore_sigpipe_once();
  hook_stderr_lines();
  if (trim(command).empty()) return std::string("one-shot hook has an empty command");
  spec.form = HookForm::OneShot;
  return HookPtr(std::make_shared<OneShotHook>(std::move(spec), std::move(command),
                                               std::move(veto_exit_codes)));
}

}  // namespace hookgate::hooks
