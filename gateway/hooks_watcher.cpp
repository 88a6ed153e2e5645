#include "gateway/hooks_watcher.hpp"
#include "gateway/common/thread_name.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "gateway/hooks/discovery.hpp"

namespace hookgate {
namespace {
constexpr uint32_t kDirectoryEvents = IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM |
                                      IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF |
                                      IN_MOVE_SELF;
// In a parent, only the hook directory's own name matters: created, removed, renamed over, or a
// symlink replaced.
constexpr uint32_t kParentEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO;
}  // namespace

bool directory_exists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

HooksWatcher::HooksWatcher(std::vector<std::string> directories, std::function<void()> on_change,
                           std::chrono::milliseconds debounce,
                           std::chrono::milliseconds vanished_grace)
    : directories_(std::move(directories)),
      on_change_(std::move(on_change)),
      debounce_(debounce),
      vanished_grace_(vanished_grace) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0 || stop_fd_ < 0) {
    spdlog::warn("hooks: inotify unavailable, hot reload only on SIGHUP");
    return;
  }
  fingerprint_ = hooks::hook_files_fingerprint(directories_, &target_folders_);
  for (const auto& dir : directories_)
    existed_.push_back(directory_exists(hooks::normalized_directory(dir)));
  renew_watches();
  thread_ = std::thread([this] {
    name_this_thread("hg-hook-watch");
    run();
  });
}

HooksWatcher::~HooksWatcher() {
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void HooksWatcher::renew_watches() {
  std::map<std::string, std::pair<uint32_t, Watch>> wanted;  // by path
  for (const auto& configured : directories_) {
    const auto dir = hooks::normalized_directory(configured);
    auto& own = wanted[dir.string()];
    own.first |= kDirectoryEvents;
    own.second.whole_directory = true;
    // Every ancestor, for the next name down: a parent created later (mkdir -p), or a release
    // folder higher up renamed into place, is seen too. Only those names count there.
    for (auto below = dir; below.has_parent_path() && below.parent_path() != below;
         below = below.parent_path()) {
      auto& ancestor = wanted[below.parent_path().string()];
      ancestor.first |= kParentEvents;
      ancestor.second.names.insert(below.filename().string());
    }
  }
  // Where descriptors keep their programs (`run: lib/tracer.py`): an edit there is a change of
  // the hook (found in an exploratory run: only a touch of the descriptor reloaded it).
  for (const auto& folder : target_folders_) {
    auto& sub = wanted[folder];
    sub.first |= kDirectoryEvents;
    sub.second.whole_directory = true;
  }
  std::map<int, Watch> next;
  for (auto& [path, want] : wanted) {
    // IN_MASK_ADD: two paths may reach one directory (a symlink) and share its descriptor.
    const int wd = inotify_add_watch(fd_, path.c_str(), want.first | IN_MASK_ADD);
    if (wd < 0) {
      // Missing is normal (optional directories, a parent that is not there either); anything
      // else means changes there go unnoticed until SIGHUP, which an operator must hear once.
      if (errno != ENOENT && errno != ENOTDIR && warned_unwatchable_.insert(path).second)
        spdlog::warn("hooks: cannot watch {} ({}); changes there need a SIGHUP", path,
                     std::strerror(errno));
      continue;
    }
    Watch& watch = next[wd];
    watch.whole_directory |= want.second.whole_directory;
    watch.names.insert(want.second.names.begin(), want.second.names.end());
  }
  for (const auto& [wd, watch] : watches_)
    if (!next.count(wd)) inotify_rm_watch(fd_, wd);  // a directory renamed away
  watches_ = std::move(next);
}

bool HooksWatcher::counts(const inotify_event& event) const {
  if (event.mask & IN_Q_OVERFLOW) return true;  // events were lost: look again
  auto it = watches_.find(event.wd);
  if (it == watches_.end()) return false;  // a watch renewed away
  const std::string_view name = event.len > 0 ? std::string_view(event.name) : "";
  return (it->second.whole_directory && !hooks::is_ignorable_file_name(name)) ||
         it->second.names.count(std::string(name));
}

void HooksWatcher::settled() {
  renew_watches();
  const auto now = std::chrono::steady_clock::now();
  // Any directory still within its grace holds the whole reload: a reload now would drop its
  // hooks too. Found in review: one shared start time let a second directory that vanished
  // during the first one's grace lose its hooks early.
  missing_since_.resize(directories_.size());
  std::optional<std::chrono::steady_clock::time_point> first_grace_end;
  std::vector<size_t> gone;
  for (size_t i = 0; i < directories_.size(); ++i) {
    auto& since = missing_since_[i];
    if (!existed_[i] || directory_exists(hooks::normalized_directory(directories_[i]))) {
      since.reset();
      continue;
    }
    if (!since) {
      since = now;
      spdlog::warn(
          "hooks: directory {} disappeared; the running hooks stay in place for {} s in case it "
          "comes back (a deploy copying it anew), then the chain reloads without it",
          directories_[i], vanished_grace_.count() / 1000.0);
    }
    if (now - *since < vanished_grace_)
      first_grace_end =
          std::min(first_grace_end.value_or(*since + vanished_grace_), *since + vanished_grace_);
    else
      gone.push_back(i);
  }
  recheck_at_ = first_grace_end;
  if (first_grace_end) return;
  for (size_t i : gone)
    spdlog::warn("hooks: directory {} is still missing; reloading without its hooks",
                 directories_[i]);
  std::fill(missing_since_.begin(), missing_since_.end(), std::nullopt);
  std::set<std::string> folders;
  std::string fingerprint = hooks::hook_files_fingerprint(directories_, &folders);
  if (folders != target_folders_) {
    // Watched from now on; read again, so a change made before the watch was added counts.
    target_folders_ = std::move(folders);
    renew_watches();
    fingerprint = hooks::hook_files_fingerprint(directories_, &folders);
  }
  if (fingerprint == fingerprint_) {
    spdlog::debug("hooks: changes in the hook directories, but no hook file changed");
    return;
  }
  fingerprint_ = std::move(fingerprint);
  for (size_t i = 0; i < directories_.size(); ++i)
    existed_[i] = directory_exists(hooks::normalized_directory(directories_[i]));
  on_change_();
}

void HooksWatcher::run() {
  using Clock = std::chrono::steady_clock;
  // Changes that keep coming (a deploy tool rewriting files in a loop) still reload at least
  // every 4 debounce periods.
  const auto max_wait = debounce_ * 4;
  bool pending = false;
  Clock::time_point first_change, last_change;
  alignas(inotify_event) char buf[8192];
  while (true) {
    int timeout = -1;
    std::optional<Clock::time_point> due;
    if (pending) due = std::min(last_change + debounce_, first_change + max_wait);
    if (recheck_at_) due = due ? std::min(*due, *recheck_at_) : *recheck_at_;
    if (due) {
      timeout = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()).count()));
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int n = poll(fds, 2, timeout);
    if (n < 0) continue;
    if (fds[1].revents) return;
    if (fds[0].revents & POLLIN) {
      bool relevant = false;
      ssize_t got;
      while ((got = read(fd_, buf, sizeof buf)) > 0) {
        for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= got;) {
          const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
          relevant |= counts(*event);
          at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
        }
      }
      if (!relevant) continue;
      // A directory created or swapped in is watched from now on, before it settles, so the
      // files copied into it are seen.
      renew_watches();
      last_change = Clock::now();
      if (!pending) first_change = last_change;
      pending = true;
      continue;
    }
    if (n == 0 && (pending || recheck_at_)) {
      // Woken for the recheck while changes are still settling: wait for them instead.
      if (pending && Clock::now() < std::min(last_change + debounce_, first_change + max_wait))
        continue;
      pending = false;
      recheck_at_.reset();
      settled();
    }
  }
}

}  // namespace hookgate
