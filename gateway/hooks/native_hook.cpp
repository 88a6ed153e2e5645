#include "gateway/hooks/native_hook.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"
#include "gateway/hooks/program_protocol.hpp"
#include "gateway/hooks/sdk/hookgate_hook.h"
#include "gateway/hooks/subprocess.hpp"

namespace hookgate::hooks {
namespace {

// Timeout decision (native form): a native hook runs inside the gateway and cannot be killed or
// interrupted safely (no thread cancellation through foreign code, no longjmp out of it). So:
// - Every call into a loaded hook (init, handle, snapshot, destroy) runs on that hook's own worker
//   thread, one at a time; the caller waits up to timeout_ms for the result.
// - If a call is still running at its deadline, the caller abandons it (HookFailure Timeout) and
//   the hook is QUARANTINED: every later call fails fast with "quarantined after timeout" until
//   the hook is reloaded (a new instance). The stuck call may still finish; its result is dropped.
// - A quarantined hook's worker thread is detached and its library is never dlclose()d, since
//   code from it may still be running: the leak is deliberate and bounded by one thread and one
//   mapping per stuck hook. destroy() is not called either (its state may be in use).
// - A caller whose call is still queued behind a slow (not yet timed out) one times out without
//   quarantining: the hook itself has not outlived a timeout yet.
//
// Crash decision: a crash inside a hook (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT raised on the
// hook's worker thread while it is inside a call) is a hook failure, as PRODUCT.md asks of every
// form, not the end of the gateway. The signal handler jumps back (siglongjmp) to the worker loop,
// the call fails with "crashed (SIGSEGV)", and the hook is quarantined exactly like a stuck one:
// its state may be corrupt, so it is never called (nor destroy()ed, nor unloaded) again until a
// reload builds a new instance. The jump skips the destructors of the frames it unwinds (the
// hook's own, and one call's buffers): a bounded leak, once per crashed hook. What this cannot
// contain: a crash that corrupted the gateway's memory before it faulted, or one inside libc
// while it held a lock (a later malloc could then block). Hooks that may do that belong in a
// program hook. Signals raised on any other thread go to the previous handler (default: the
// process dies, as before; under ASan: its report).
constexpr const char* kQuarantinedAfterTimeout = "quarantined after timeout";
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kAltStackBytes = 64 * 1024;  // the handler must run even after a stack overflow

thread_local sigjmp_buf* tls_crash_jump = nullptr;
thread_local volatile std::sig_atomic_t tls_crash_signal = 0;
struct sigaction g_previous_action[NSIG];

extern "C" void on_crash_signal(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = tls_crash_jump) {
    tls_crash_jump = nullptr;
    tls_crash_signal = sig;
    siglongjmp(*jump, 1);
  }
  const struct sigaction& previous = g_previous_action[sig];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL &&
      previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  std::signal(sig, SIG_DFL);  // returning re-runs the faulting instruction, now fatal
  if (sig == SIGABRT || info == nullptr || info->si_code <= 0) std::raise(sig);
}

void install_crash_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCrashSignals) {
      struct sigaction action {};
      action.sa_sigaction = on_crash_signal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      ::sigaction(sig, &action, &g_previous_action[sig]);
    }
  });
}

// A quarantined hook's state is never destroyed (its destroy() may crash or hang too). It is
// kept here rather than dropped so that it stays reachable: a deliberate, bounded leak, not one
// LeakSanitizer should report.
void keep_forever(void* state) {
  static std::mutex mu;
  static auto* kept = new std::vector<void*>();
  if (state == nullptr) return;
  std::lock_guard lock(mu);
  kept->push_back(state);
}

// Runs fn; returns 0, or the signal that interrupted it inside a crashed hook.
int run_contained(const std::function<void()>& fn) {
  sigjmp_buf jump;
  // savemask 0: saving the mask would cost a sigprocmask() syscall on every call into the hook.
  // The kernel blocks the crash signal while its handler runs, so the crash path unblocks it.
  if (sigsetjmp(jump, 0) != 0) {
    const int sig = tls_crash_signal;
    sigset_t crashed;
    sigemptyset(&crashed);
    sigaddset(&crashed, sig);
    pthread_sigmask(SIG_UNBLOCK, &crashed, nullptr);
    return sig;
  }
  tls_crash_signal = 0;
  tls_crash_jump = &jump;
  try {
    fn();
  } catch (...) {
    // The calls catch the hook's exceptions; what is left (out of memory copying its answer)
    // must not leave the jump target pointing into this dead frame. The call's data is then
    // incomplete: a veto may lose its reason, a replacement read as garbage, and the strings not
    // yet copied leak.
  }
  tls_crash_jump = nullptr;
  return 0;
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Whether `p` lies within [begin, begin + size]; compared as addresses, since `<` on pointers into
// different objects is unspecified.
bool points_into(const char* p, const char* begin, size_t size) {
  const auto at = reinterpret_cast<uintptr_t>(p), from = reinterpret_cast<uintptr_t>(begin);
  return at >= from && at <= from + size;
}

// A hook hands over strings of its own allocator, each its own. One that points into the text it
// was given ("replace with the same event"), or into another returned string (the same pointer
// twice, or one inside the other's text), would have the gateway free its own buffer, or one
// twice, later and outside containment. (Two strings in one allocation, "a\0b", cannot be told
// from two allocations: the hook's allocator keeps its bounds.) Such pointers are set to NULL,
// never freed (the hook leaks them); returns whether there was one. Runs inside containment:
// strlen() may fault.
bool refuse_foreign_strings(std::initializer_list<char**> fields, const std::string& input) {
  bool refused = false;
  // At most three fields: kept strings and their lengths on the stack (this runs on every call).
  const char* kept[3];
  size_t kept_length[3];
  size_t kept_count = 0;
  for (char** field : fields) {
    char*& p = *field;
    if (p == nullptr) continue;
    const size_t length = std::strlen(p);
    bool foreign = points_into(p, input.data(), input.size());
    for (size_t i = 0; i < kept_count && !foreign; ++i)
      foreign = points_into(p, kept[i], kept_length[i]) || points_into(kept[i], p, length);
    if (foreign) {
      p = nullptr;
      refused = true;
    } else if (kept_count < 3) {
      kept[kept_count] = p;
      kept_length[kept_count++] = length;
    }
  }
  return refused;
}

// Copies a string the hook handed over and gives it back to the hook's allocator.
void take_string(const hookgate_hook_descriptor& d, char*& p, std::string& out) {
  if (p == nullptr) return;
  out.assign(p);
  d.free_string(p);
  p = nullptr;
}

// The hook's worker thread and its queue. Shared with the thread itself, so a detached worker of
// a quarantined hook keeps it alive after the NativeHook is gone.
class Worker {
 public:
  enum class Outcome { Done, QueuedTimeout, Stuck, Crashed, Quarantined };

  Worker() : s_(std::make_shared<Shared>()) {
    install_crash_handlers();
    thread_ = std::thread([s = s_] {
      name_this_thread("hg-hook-native");
      loop(*s);
    });
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    {
      std::lock_guard lock(s_->mu);
      s_->stop = true;
      s_->cv.notify_all();
    }
    if (quarantined()) {
      thread_.detach();  // may be inside the hook forever
    } else {
      thread_.join();
    }
  }

  // Runs fn on the worker and waits for it up to timeout_ms. fn must own its data (capture
  // shared_ptrs): an abandoned call outlives this frame.
  Outcome call(std::function<void()> fn, int timeout_ms) {
    auto job = std::make_shared<Job>();
    job->run = std::move(fn);
    std::unique_lock lock(s_->mu);
    if (s_->quarantined) return Outcome::Quarantined;
    s_->queue.push_back(job);
    s_->cv.notify_all();
    const auto limit = std::chrono::milliseconds(timeout_ms);
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      s_->cv.wait_until(lock, deadline, [&] {
        return job->state == State::Done || (s_->quarantined && job->state == State::Queued);
      });
      // Running: timeout_ms covers the call itself, not the time it waited behind another (a
      // healthy hook must not be quarantined because two calls met).
      if (job->state != State::Running || std::chrono::steady_clock::now() >= job->started + limit)
        break;
      deadline = job->started + limit;
    }
    if (job->state == State::Done) return job->crash_signal != 0 ? Outcome::Crashed : Outcome::Done;
    if (job->state == State::Queued) {
      s_->queue.erase(std::find(s_->queue.begin(), s_->queue.end(), job));
      return s_->quarantined ? Outcome::Quarantined : Outcome::QueuedTimeout;
    }
    s_->quarantined = true;
    s_->cv.notify_all();  // fail the callers queued behind the stuck call now
    return Outcome::Stuck;
  }

  bool quarantined() const {
    std::lock_guard lock(s_->mu);
    return s_->quarantined;
  }
  // Why the hook is quarantined ("quarantined after timeout", "quarantined after a crash
  // (SIGSEGV)"); empty while it is not.
  std::string quarantine_reason() const {
    std::lock_guard lock(s_->mu);
    if (!s_->quarantined) return {};
    if (s_->crash_signal != 0)
      return "quarantined after a crash (" + signal_name(s_->crash_signal) + ")";
    return kQuarantinedAfterTimeout;
  }

 private:
  enum class State { Queued, Running, Done };
  struct Job {
    std::function<void()> run;
    State state = State::Queued;
    std::chrono::steady_clock::time_point started;  // when it became Running
    int crash_signal = 0;
  };
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Job>> queue;
    bool stop = false;
    bool quarantined = false;
    int crash_signal = 0;  // why it is quarantined: a crash, or (0) a timeout
  };

  static void loop(Shared& s) {
    // The crash handler runs on this stack, so a hook that overflows its own stack is contained.
    std::vector<char> alt_stack(kAltStackBytes);
    stack_t ss{};
    ss.ss_sp = alt_stack.data();
    ss.ss_size = alt_stack.size();
    ::sigaltstack(&ss, nullptr);
    std::unique_lock lock(s.mu);
    for (;;) {
      // A quarantined hook runs nothing more: after a crash its state (and the library's
      // globals) may be corrupt. Its queued callers see the quarantine and withdraw.
      s.cv.wait(lock, [&] { return s.stop || (!s.quarantined && !s.queue.empty()); });
      if (s.quarantined || s.queue.empty()) break;  // stopping, or nothing may run any more
      auto job = std::move(s.queue.front());
      s.queue.pop_front();
      job->state = State::Running;
      job->started = std::chrono::steady_clock::now();
      lock.unlock();
      const int sig = run_contained(job->run);
      lock.lock();
      if (sig != 0) {
        // Nothing that allocates from here on: the hook may have crashed inside malloc with its
        // arena locked (a corrupted heap aborts there), and this thread would wait on it forever
        // while holding `s.mu`. The reason text is built by the caller.
        job->crash_signal = sig;
        s.quarantined = true;
        s.crash_signal = sig;
        job->state = State::Done;
        s.cv.notify_all();
        lock.unlock();
        // Never return either: the thread's exit would run the library's thread_local
        // destructors and glibc's per-thread cleanup, outside any containment, over state the
        // crash may have broken. The worker is detached when its hook goes (see ~Worker).
        for (;;) ::pause();
      }
      job->state = State::Done;
      s.cv.notify_all();
    }
    lock.unlock();
    ss.ss_flags = SS_DISABLE;
    ::sigaltstack(&ss, nullptr);
  }

  std::shared_ptr<Shared> s_;
  std::thread thread_;
};

struct HandleCall {
  std::string input;
  bool bad_pointer = false;  // a returned string pointed into the input or another field
  int rc = 0;
  int32_t action = HOOKGATE_CONTINUE;
  bool has_event = false;
  std::string event_json, reason, error;
};

struct InitCall {
  std::string config;
  void* state = nullptr;
  bool failed = false;
  std::string error;
};

struct SnapshotCall {
  bool has_value = false;
  std::string json;
};

// Library files (device, inode) a hook crashed or hung in. Such a library stays mapped (a thread
// may still be inside it) and its globals may be broken (a lock held at the crash, a static
// initializer never finished), so a later load of the same file gets a fresh copy of it.
using LibraryFile = std::pair<dev_t, ino_t>;
std::mutex g_poisoned_mu;
std::set<LibraryFile> g_poisoned;

void poison_library(const LibraryFile& file) {
  std::lock_guard lock(g_poisoned_mu);
  g_poisoned.insert(file);
}

bool is_poisoned(const LibraryFile& file) {
  std::lock_guard lock(g_poisoned_mu);
  return g_poisoned.count(file) > 0;
}

class NativeHook final : public Hook {
 public:
  NativeHook(HookSpec spec, std::string path, void* lib, const hookgate_hook_descriptor* desc,
             std::optional<LibraryFile> file)
      : Hook(std::move(spec)), path_(std::move(path)), lib_(lib), desc_(desc), file_(file) {
    (void)
        quarantines();  // the series shows at 0 before the first quarantine, so increase() sees it
  }

  ~NativeHook() override {
    if (initialized_ && desc_->destroy != nullptr && !worker_.quarantined()) {
      const hookgate_hook_descriptor* d = desc_;
      void* state = state_;
      // destroy() gets the same deadline; a stuck one quarantines the hook like any call.
      worker_.call(
          [d, state] {
            try {
              d->destroy(state);
            } catch (...) {  // like init and handle: nothing may unwind through the C ABI
              spdlog::warn("native hook destroy() let an exception escape through the C ABI");
            }
          },
          spec().timeout_ms);
    }
    if (worker_.quarantined()) {
      spdlog::warn("hook {}: unloading a quarantined native hook; {} stays loaded", spec().name,
                   path_);
      keep_forever(state_);
      if (file_) poison_library(*file_);
      return;  // ~Worker detaches; lib_ is leaked on purpose
    }
    // ~Worker joins first (members are destroyed after this body), so close the library after
    // it by handing the handle to a guard declared before the worker.
    unload_.lib = lib_;
  }

  bool init_parked() const { return init_parked_; }

  // Calls init(config_json) on the worker thread. Returns the load error, if any.
  std::optional<std::string> init() {
    if (desc_->init == nullptr) {
      initialized_ = true;
      return std::nullopt;
    }
    auto call = std::make_shared<InitCall>();
    call->config = spec().config_json.empty() ? "{}" : spec().config_json;
    const hookgate_hook_descriptor* d = desc_;
    auto outcome = worker_.call(
        [d, call] {
          char* err = nullptr;
          void* state = nullptr;
          try {
            state = d->init(call->config.c_str(), &err);
          } catch (...) {
            call->failed = true;
            call->error = "init() let an exception escape through the C ABI";
            return;
          }
          if (err != nullptr) {
            call->failed = true;
            if (refuse_foreign_strings({&err}, call->config))
              call->error = "init() returned an error string that points into its config";
            take_string(*d, err, call->error);
          } else {
            call->state = state;
          }
        },
        spec().timeout_ms);
    // Quarantined as a crash or hang in handle() is, so counted as one (found in review: only
    // those were). It parks a thread and leaves the library mapped: the caller remembers the
    // file, so that reloads do not park one more each.
    init_parked_ = outcome == Worker::Outcome::Crashed || outcome == Worker::Outcome::Stuck;
    if (init_parked_) quarantines().inc();
    if (outcome == Worker::Outcome::Crashed)
      return "init() crashed (" + worker_.quarantine_reason() + "; library left loaded)";
    if (outcome != Worker::Outcome::Done) {
      return "init() did not return within " + std::to_string(spec().timeout_ms) +
             " ms (library left loaded)";
    }
    if (call->failed) {
      return "init() failed: " +
             (call->error.empty() ? std::string("no reason given") : excerpt(call->error, 1024));
    }
    state_ = call->state;
    initialized_ = true;
    return std::nullopt;
  }

  HookResult handle(Event& event) override {
    auto call = std::make_shared<HandleCall>();
    call->input = event.to_json();
    const hookgate_hook_descriptor* d = desc_;
    void* state = state_;
    auto outcome = worker_.call(
        [d, state, call] {
          hookgate_hook_result r{HOOKGATE_CONTINUE, nullptr, nullptr, nullptr};
          try {
            call->rc = d->handle(state, call->input.c_str(), call->input.size(), &r);
          } catch (...) {  // only hooks not built with the SDK wrapper get here
            call->rc = -1;
            call->error = "handle() let an exception escape through the C ABI";
          }
          call->action = r.action;
          call->has_event = r.event_json != nullptr;
          call->bad_pointer =
              refuse_foreign_strings({&r.event_json, &r.reason, &r.error}, call->input);
          take_string(*d, r.event_json, call->event_json);
          take_string(*d, r.reason, call->reason);
          take_string(*d, r.error, call->error);
        },
        spec().timeout_ms);
    switch (outcome) {
      case Worker::Outcome::Done:
        break;
      case Worker::Outcome::Quarantined:
        return HookFailure{HookFailure::Kind::Error, worker_.quarantine_reason()};
      case Worker::Outcome::Crashed:
        return crashed("handle()");
      case Worker::Outcome::QueuedTimeout:
        return HookFailure{HookFailure::Kind::Timeout,
                           "no turn within " + std::to_string(spec().timeout_ms) +
                               " ms (an earlier call into the hook is still running)"};
      case Worker::Outcome::Stuck:
        return stuck("handle()");
    }
    return interpret(*call);
  }

  // Called at most once a second; a GET /status in between gets the last one. It runs on the
  // hook's worker, where the events wait behind it, and /status may be polled (or hammered: it
  // needs no token by default) however often.
  std::string snapshot() const override {
    if (worker_.quarantined()) return quarantined_snapshot();
    if (desc_->snapshot == nullptr) return "{}";
    std::lock_guard lock(snapshot_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (last_snapshot_ && now - last_snapshot_->first < kSnapshotInterval)
      return last_snapshot_->second;
    std::string fresh = call_snapshot();
    if (worker_.quarantined()) return fresh;  // the quarantine note, never cached
    // Timed from its end: a call that waited behind busy events would otherwise be stale at once.
    last_snapshot_.emplace(std::chrono::steady_clock::now(), fresh);
    return fresh;
  }

 private:
  static constexpr std::chrono::seconds kSnapshotInterval{1};

  std::string call_snapshot() const {
    auto call = std::make_shared<SnapshotCall>();
    const hookgate_hook_descriptor* d = desc_;
    void* state = state_;
    auto outcome = worker_.call(
        [d, state, call] {
          char* s = nullptr;
          try {
            s = d->snapshot(state);
          } catch (...) {  // like init and handle; an empty snapshot, not a quarantine
            return;
          }
          call->has_value = s != nullptr;
          take_string(*d, s, call->json);
        },
        spec().timeout_ms);
    if (outcome == Worker::Outcome::Stuck) (void)stuck("snapshot()");
    if (outcome == Worker::Outcome::Crashed) (void)crashed("snapshot()");
    if (worker_.quarantined()) return quarantined_snapshot();
    if (outcome != Worker::Outcome::Done || !call->has_value) return "{}";
    // Status pages embed it as JSON: only a well-formed object is passed on, checked by the bus's
    // parser (iterative, strict UTF-8, depth-limited) so a hostile one cannot overflow the admin
    // thread's stack or put invalid text into /status.
    auto parsed = Event::parse(call->json);
    if (!parsed || !parsed->doc().IsObject()) return "{}";
    return call->json;
  }

  static metrics::Counter& quarantines() {
    static auto& counter =
        metrics::counter("hookgate_hook_quarantined_total",
                         "Native hooks quarantined after a call crashed or outlived its timeout");
    return counter;
  }

  // The file is marked at once, not when this hook is unloaded: a reload builds its new chain
  // (and so loads the library again) while the old chain still holds this hook.
  HookResult stuck(const char* what) const {
    if (file_) poison_library(*file_);
    quarantines().inc();
    std::string reason = std::string(what) + " did not return within " +
                         std::to_string(spec().timeout_ms) + " ms; hook quarantined until reloaded";
    spdlog::error("hook {}: {}", spec().name, reason);
    return HookFailure{HookFailure::Kind::Timeout, std::move(reason)};
  }

  HookResult crashed(const char* what) const {
    if (file_) poison_library(*file_);
    quarantines().inc();
    std::string reason =
        std::string(what) + " crashed; hook " + worker_.quarantine_reason() + ", until reloaded";
    spdlog::error("hook {}: {}", spec().name, reason);
    return HookFailure{HookFailure::Kind::Error, std::move(reason)};
  }

  std::string quarantined_snapshot() const {
    return R"({"quarantined":true,"reason":")" + worker_.quarantine_reason() + R"("})";
  }

  HookResult interpret(const HandleCall& c) const {
    if (c.bad_pointer)
      return HookFailure{
          HookFailure::Kind::Error,
          "garbage answer: a returned string points into the event it was given, or "
          "repeats another field's pointer (return a fresh copy from your allocator)"};
    if (c.rc != 0) {
      return HookFailure{HookFailure::Kind::Error, c.error.empty()
                                                       ? "handle() returned " + std::to_string(c.rc)
                                                       : excerpt(c.error, 1024)};
    }
    HookVerdict v;
    switch (c.action) {
      case HOOKGATE_CONTINUE:
        return v;
      case HOOKGATE_SKIP:
        v.action = Action::Skip;
        return v;
      case HOOKGATE_VETO:
        v.action = Action::Veto;
        v.reason = c.reason.empty() ? "vetoed by hook " + spec().name : excerpt(c.reason, 1024);
        return v;
      case HOOKGATE_REPLACE: {
        if (spec().kind == HookKind::Veto) return ignored_replacement();
        if (!c.has_event) {
          return HookFailure{HookFailure::Kind::Error,
                             "garbage answer: replace without event_json"};
        }
        auto replacement = replacement_event(c.event_json);
        if (!replacement) {
          return HookFailure{HookFailure::Kind::Error,
                             garbage_reason(spec().name, replacement.error(), c.event_json)};
        }
        v.action = Action::Replace;
        v.replacement = std::move(replacement).value();
        return v;
      }
      default:
        return HookFailure{HookFailure::Kind::Error,
                           "garbage answer: unknown action " + std::to_string(c.action)};
    }
  }

  // dlclose()s after the worker has been joined (declared before worker_, destroyed after it).
  struct Unloader {
    void* lib = nullptr;
    ~Unloader() {
      if (lib != nullptr) ::dlclose(lib);
    }
  };

  const std::string path_;
  void* const lib_;
  const hookgate_hook_descriptor* const desc_;
  const std::optional<LibraryFile> file_;  // the file it was loaded from, if it could be stat()ed
  Unloader unload_;
  mutable Worker worker_;
  mutable std::mutex snapshot_mu_;  // one snapshot() call at a time; guards last_snapshot_
  mutable std::optional<std::pair<std::chrono::steady_clock::time_point, std::string>>
      last_snapshot_;
  void* state_ = nullptr;
  bool initialized_ = false;
  bool init_parked_ = false;  // init() crashed or hung: its thread and the library stay
};

// Opens `path` under its own file name from a fresh temporary folder, removed again at once: as a
// symlink (the same file under a name glibc has not seen) or as a copy (a file of its own, so a
// fresh mapping). nullopt when the folder, link or copy cannot be made.
std::optional<void*> dlopen_via_temp_folder(const std::string& path, bool copy) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string folder = (fs::temp_directory_path(ec) / "hookgate-native-XXXXXX").string();
  if (ec || ::mkdtemp(folder.data()) == nullptr) return std::nullopt;
  const std::string entry = folder + "/" + fs::path(path).filename().string();
  const bool made = copy ? fs::copy_file(path, entry, ec)
                         : ::symlink(fs::absolute(path, ec).c_str(), entry.c_str()) == 0;
  std::optional<void*> lib;
  if (made) lib = ::dlopen(entry.c_str(), RTLD_NOW | RTLD_LOCAL);
  ::unlink(entry.c_str());
  ::rmdir(folder.c_str());
  return lib;
}

// dlopen() that follows the FILE rather than its name. glibc hands back an already-loaded library
// whose name matches without looking at the file, so a rebuilt hook installed under the same name
// (by rename, as docs/hooks.md says) would keep running its old code after a hot reload or SIGHUP:
// the old chain still holds the old library while the new chain loads. When the name belongs to a
// loaded library that is no longer the file at that path, the file is opened through a one-off
// alias (a symlink in a fresh temporary folder, removed at once), and glibc tells the two apart by
// device and inode. (Such a reloaded library resolves $ORIGIN against that folder.)
void* open_library(const std::string& path) {
  static std::mutex mu;
  // The file each name was last dlopen()ed as.
  static std::map<std::string, LibraryFile> loaded_as;
  std::lock_guard lock(mu);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const LibraryFile file{st.st_dev, st.st_ino};
  // Never the poisoned mapping: a copy, or nothing (load_native_hook reports it).
  if (is_poisoned(file)) return dlopen_via_temp_folder(path, /*copy=*/true).value_or(nullptr);
  bool stale = false;
  if (void* same_name = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    auto it = loaded_as.find(path);
    stale = it != loaded_as.end() && it->second != file;
    ::dlclose(same_name);
  }
  ::dlerror();
  if (stale) {
    if (auto lib = dlopen_via_temp_folder(path, /*copy=*/false)) return *lib;
  }
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr && !stale) loaded_as[path] = file;
  return lib;
}

// What reading a descriptor can run into. The gateway reads it in its own process (kind, events,
// name), so a bogus pointer or an events list without its NULL would fault or run off into
// memory there: at startup, on a hot reload, in `check` and `hooks list`.
enum class DescriptorProblem {
  None,
  Unreadable,  // the pointer hookgate_hook_v1() returned
  NameUnreadable,
  NameTooLong,
  KindUnreadable,
  KindTooLong,
  EventsUnreadable,
  EventsUnterminated,
  PatternUnreadable,
  PatternTooLong,
};
constexpr int kDescriptorProblemCount = static_cast<int>(DescriptorProblem::PatternTooLong) + 1;
// Bounds on what is read: a string or list that runs past them is treated as unterminated.
constexpr size_t kMaxDescriptorString = 1024;
constexpr size_t kMaxDescriptorEvents = 1024;  // entries, the NULL included

std::string describe(DescriptorProblem problem) {
  const std::string string_limit = std::to_string(kMaxDescriptorString);
  switch (problem) {
    case DescriptorProblem::None:
      break;
    case DescriptorProblem::Unreadable:
      return std::string(HOOKGATE_HOOK_ENTRY_NAME) +
             "() returned a pointer to memory that cannot be read";
    case DescriptorProblem::NameUnreadable:
      return "descriptor name points to memory that cannot be read";
    case DescriptorProblem::NameTooLong:
      return "descriptor name is not a string of at most " + string_limit + " bytes";
    case DescriptorProblem::KindUnreadable:
      return "descriptor kind points to memory that cannot be read";
    case DescriptorProblem::KindTooLong:
      return "descriptor kind is not a string of at most " + string_limit + " bytes";
    case DescriptorProblem::EventsUnreadable:
      return "descriptor events points to memory that cannot be read";
    case DescriptorProblem::EventsUnterminated:
      return "descriptor events has no NULL terminator within its first " +
             std::to_string(kMaxDescriptorEvents) + " entries";
    case DescriptorProblem::PatternUnreadable:
      return "descriptor events holds a pattern pointer to memory that cannot be read";
    case DescriptorProblem::PatternTooLong:
      return "descriptor events holds a pattern that is not a string of at most " + string_limit +
             " bytes";
  }
  return "descriptor cannot be read";
}

// Reads every pointer of `desc` that loading follows, within the bounds above, with faults
// contained (run_contained): a fault is an answer here, not the end of the process. Only data is
// read, no code of the library runs, so after a fault the library can still be unloaded. A
// descriptor of another ABI version is not looked into (its layout is unknown; the load says so).
DescriptorProblem check_descriptor_memory(const hookgate_hook_descriptor* desc) {
  install_crash_handlers();
  // What a fault at this point would mean; volatile, as it is read after the jump back.
  volatile DescriptorProblem reading = DescriptorProblem::Unreadable;
  volatile DescriptorProblem found = DescriptorProblem::None;
  const int sig = run_contained([&] {
    if (desc->abi_version != HOOKGATE_HOOK_ABI_VERSION) return;
    reading = DescriptorProblem::NameUnreadable;
    if (desc->name != nullptr &&
        ::strnlen(desc->name, kMaxDescriptorString + 1) > kMaxDescriptorString) {
      found = DescriptorProblem::NameTooLong;
      return;
    }
    reading = DescriptorProblem::KindUnreadable;
    if (desc->kind != nullptr &&
        ::strnlen(desc->kind, kMaxDescriptorString + 1) > kMaxDescriptorString) {
      found = DescriptorProblem::KindTooLong;
      return;
    }
    reading = DescriptorProblem::EventsUnreadable;
    if (desc->events == nullptr) return;
    for (size_t i = 0;; ++i) {
      if (i == kMaxDescriptorEvents) {
        found = DescriptorProblem::EventsUnterminated;
        return;
      }
      reading = DescriptorProblem::EventsUnreadable;
      const char* pattern = desc->events[i];
      if (pattern == nullptr) return;
      reading = DescriptorProblem::PatternUnreadable;
      if (::strnlen(pattern, kMaxDescriptorString + 1) > kMaxDescriptorString) {
        found = DescriptorProblem::PatternTooLong;
        return;
      }
    }
  });
  return sig != 0 ? reading : found;
}

}  // namespace

namespace {

// The probe's answers. Unusual numbers: a constructor that calls exit(0) must not read as a pass.
constexpr int kProbeLoaded = 86;
constexpr int kProbeNoHook = 87;  // not a hook library: the in-process load says exactly why
// kProbeBadDescriptor + a DescriptorProblem: the library loads, but its descriptor cannot be read
// safely (the probe exists so that the gateway never reads it).
constexpr int kProbeBadDescriptor = 88;

// A file as the probe saw it. ctime and size too: an inode number can be reused, and build tools
// pin mtimes (install -p, SOURCE_DATE_EPOCH).
using FileIdentity = std::tuple<dev_t, ino_t, int64_t, int64_t, off_t>;

std::optional<FileIdentity> identity_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino,
                      int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                      int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec, st.st_size};
}

struct ProbeState {
  std::mutex mu;
  std::string executable;
  std::set<FileIdentity> passed;  // loaded cleanly in a probe: a reload does not probe again
  // init() crashed or hung with this config, parking a thread and a mapping of the library: a
  // reload of the same file and config is refused with the same reason instead of parking more
  // (found in a hook author's test: one thread and five mappings more per reload).
  std::map<std::pair<FileIdentity, std::string>, std::string> parked_inits;
};

ProbeState& probe_state() {
  static ProbeState state;
  return state;
}

// Loads `path` in a probe process; the reason when loading it here would not be safe.
std::optional<std::string> probe_native_library(const std::string& path, int timeout_ms) {
  ProbeState& state = probe_state();
  std::string executable;
  auto identity = identity_of(path);
  if (!identity) return std::nullopt;  // dlopen() says what is wrong
  {
    std::lock_guard lock(state.mu);
    if (state.executable.empty() || state.passed.count(*identity) > 0) return std::nullopt;
    executable = state.executable;
  }
  auto child = Subprocess::spawn({.argv = {executable, "__probe-native", path}});
  if (!child) {
    // No probe (no /proc, a policy that forbids the exec): load as before, and say so.
    spdlog::warn("hooks: cannot start a load probe for {} ({}); loading it without one", path,
                 child.error());
    return std::nullopt;
  }
  child.value()->close_stdin();
  // Loading takes longer than a call: the probe is a fresh process that maps its libraries.
  const int wait_ms = std::max(timeout_ms, 10000);
  if (!child.value()->wait_exited(wait_ms)) {
    child.value()->terminate(0, 100);
    return "loading did not finish within " + std::to_string(wait_ms) +
           " ms in a probe process (a static constructor or " + HOOKGATE_HOOK_ENTRY_NAME +
           "() that blocks?); not loaded";
  }
  const int status = child.value()->terminate(0, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kProbeLoaded) {
    // The file may have been replaced meanwhile: only what was probed counts as passed.
    if (identity_of(path) != identity) return "changed while it was being probed; not loaded";
    std::lock_guard lock(state.mu);
    state.passed.insert(*identity);
    return std::nullopt;
  }
  return native_probe_refusal(status);
}

}  // namespace

std::optional<std::string> native_probe_refusal(int wait_status) {
  const int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  if (code == kProbeNoHook || code == kProbeLoaded) return std::nullopt;
  if (code > kProbeBadDescriptor && code < kProbeBadDescriptor + kDescriptorProblemCount)
    return describe(static_cast<DescriptorProblem>(code - kProbeBadDescriptor)) +
           " (found in a probe process); not loaded";
  if (WIFSIGNALED(wait_status))
    return "crashed while loading in a probe process (" + describe_wait_status(wait_status) +
           "): a static constructor or " + HOOKGATE_HOOK_ENTRY_NAME + "() faults; not loaded";
  // An exit, not a signal: exit() in a constructor, a sanitizer runtime that refused to start
  // (found in a hook author's pass: an ASan-built library in a gateway built without ASan was said
  // to have crashed), or a crash a sanitizer in the gateway's own build turned into exit status 1.
  return "failed while loading in a probe process (" + describe_wait_status(wait_status) +
         "): a static constructor or " + HOOKGATE_HOOK_ENTRY_NAME +
         "() crashed or called exit(), or the library needs a runtime the gateway does not have "
         "(one built with -fsanitize needs a gateway built with it); not loaded";
}

void set_native_load_probe(std::string executable) {
  std::lock_guard lock(probe_state().mu);
  probe_state().executable = std::move(executable);
}

void run_native_load_probe(const std::string& so_path) {
  // Whatever the library prints goes nowhere: a full pipe must not pass for a hang.
  if (int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  int code = kProbeNoHook;
  if (void* lib = ::dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (void* sym = ::dlsym(lib, HOOKGATE_HOOK_ENTRY_NAME)) {
      if (const auto* desc = reinterpret_cast<hookgate_hook_entry_fn>(sym)()) {
        // The descriptor too: the gateway reads it in-process right after this probe.
        const DescriptorProblem problem = check_descriptor_memory(desc);
        code = problem == DescriptorProblem::None ? kProbeLoaded
                                                  : kProbeBadDescriptor + static_cast<int>(problem);
      }
    }
  }
  // No exit handlers, static destructors or leak checks: only loading is being probed.
  std::_Exit(code);
}

LoadResult make_native_hook(HookSpec spec, std::string so_path, bool descriptor_sets_kind,
                            bool descriptor_sets_events) {
  spec.form = HookForm::Native;
  // Without a slash dlopen() would search the library path instead of opening this file.
  std::string path = so_path.find('/') == std::string::npos ? "./" + so_path : so_path;
  if (auto refused = probe_native_library(path, spec.timeout_ms))
    return "cannot load " + so_path + ": " + *refused;
  const auto identity = identity_of(path);
  if (identity) {
    std::lock_guard lock(probe_state().mu);
    if (auto it = probe_state().parked_inits.find({*identity, spec.config_json});
        it != probe_state().parked_inits.end())
      return it->second +
             " on an earlier load of this file with this config; not called again until one "
             "of them changes";
  }
  void* lib = open_library(path);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    std::string why = err != nullptr ? err : "dlopen failed";
    // dlerror() starts with the path, which the message already names.
    for (const std::string& named : {path, so_path})
      if (why.starts_with(named + ": ")) why.erase(0, named.size() + 2);
    return "cannot load " + so_path + ": " + why;
  }
  auto fail = [&](std::string reason) -> LoadResult {
    ::dlclose(lib);  // nothing from the library is running: safe to unload
    return reason;
  };
  ::dlerror();
  void* sym = ::dlsym(lib, HOOKGATE_HOOK_ENTRY_NAME);
  if (sym == nullptr) {
    return fail(std::string("no ") + HOOKGATE_HOOK_ENTRY_NAME +
                "() exported: not a hookgate native hook (see gateway/hooks/sdk/hookgate_hook.h)");
  }
  auto entry = reinterpret_cast<hookgate_hook_entry_fn>(sym);
  const hookgate_hook_descriptor* desc = entry();
  if (desc == nullptr) return fail(std::string(HOOKGATE_HOOK_ENTRY_NAME) + "() returned NULL");
  // Without a probe (or should the entry answer differently here) the same check, contained.
  if (auto problem = check_descriptor_memory(desc); problem != DescriptorProblem::None)
    return fail("cannot load " + so_path + ": " + describe(problem));
  if (desc->abi_version != HOOKGATE_HOOK_ABI_VERSION) {
    return fail("ABI version " + std::to_string(desc->abi_version) +
                " not supported (this gateway speaks " + std::to_string(HOOKGATE_HOOK_ABI_VERSION) +
                ")");
  }
  if (desc->handle == nullptr) return fail("descriptor has no handle function");
  if (desc->free_string == nullptr) return fail("descriptor has no free_string function");
  if (!descriptor_sets_kind) {
    if (desc->kind == nullptr) return fail("descriptor names no kind (veto, transform or observe)");
    auto kind = parse_hook_kind(desc->kind);
    if (!kind) {
      return fail("descriptor kind \"" + excerpt(desc->kind, 40) +
                  "\" is not veto, transform or observe");
    }
    spec.kind = *kind;
  }
  if (!descriptor_sets_kind || !descriptor_sets_events) {  // kind: alone: the library's patterns
    std::vector<std::string> events;
    // Bounded like check_descriptor_memory(), which has read this far already.
    for (size_t i = 0; desc->events != nullptr && i + 1 < kMaxDescriptorEvents; ++i) {
      const char* e = desc->events[i];
      if (e == nullptr) break;
      if (*e == '\0') return fail("descriptor lists an empty event pattern");
      // Patterns go into logs, /status and `hooks list`.
      if (!is_display_text(e))
        return fail(
            "descriptor lists an event pattern that is not UTF-8 text without control "
            "characters");
      events.emplace_back(e);
    }
    if (events.empty()) events.emplace_back("*");
    spec.events = std::move(events);
  }

  std::optional<LibraryFile> file;
  if (struct stat st; ::stat(path.c_str(), &st) == 0) file = LibraryFile{st.st_dev, st.st_ino};
  auto hook = std::make_shared<NativeHook>(std::move(spec), so_path, lib, desc, file);
  if (auto err = hook->init()) {  // ~NativeHook unloads (or leaks if stuck)
    if (hook->init_parked() && identity) {
      std::lock_guard lock(probe_state().mu);
      probe_state().parked_inits[{*identity, hook->spec().config_json}] = *err;
    }
    return *std::move(err);
  }
  spdlog::debug("hook {}: loaded native {} ({})", hook->spec().name, so_path,
                desc->name != nullptr ? display_text(desc->name) : "unnamed");
  return HookPtr(std::move(hook));
}

}  // namespace hookgate::hooks
