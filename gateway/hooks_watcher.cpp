#include "gateway/hooks_watcher.hpp"
#include "gateway/common/thread_name.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

namespace hookgate {
namespace {

// Names whose changes never change the hooks: hidden files (editor swap files, VCS), backup and
// temporary files, and logs, pid and lock files a hook may keep beside itself (program hooks run
// in their directory). Reloading on them would restart every program hook, and a hook that
// appends to its own log would reload the chain in a loop.
bool ignorable(std::string_view name) {
  if (name.empty()) return false;  // the directory itself
  // A Kubernetes ConfigMap volume updates by renaming a new `..data` symlink into place; the
  // visible files are symlinks through it and never change themselves.
  if (name == "..data") return false;
  if (name.front() == '.' || name.back() == '~') return true;
  for (std::string_view suffix : {".swp", ".swx", ".swo", ".tmp", ".log", ".pid", ".lock"})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      return true;
  return false;
}

}  // namespace

HooksWatcher::HooksWatcher(std::vector<std::string> directories, std::function<void()> on_change,
                           std::chrono::milliseconds debounce)
    : directories_(std::move(directories)), on_change_(std::move(on_change)), debounce_(debounce) {
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0 || stop_fd_ < 0) {
    spdlog::warn("hooks: inotify unavailable, hot reload only on SIGHUP");
    return;
  }
  for (const auto& dir : directories_) {
    // Missing directories are not watched; creating one later needs a SIGHUP (which rebuilds the
    // watcher).
    inotify_add_watch(fd_, dir.c_str(),
                      IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
                          IN_CLOSE_WRITE);
  }
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
    if (pending) {
      auto now = Clock::now();
      auto due = std::min(last_change + debounce_, first_change + max_wait);
      timeout = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(due - now).count()));
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
          relevant |= (event->mask & IN_Q_OVERFLOW) != 0 ||
                      !ignorable(event->len > 0 ? std::string_view(event->name) : "");
          at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
        }
      }
      if (!relevant) continue;
      last_change = Clock::now();
      if (!pending) first_change = last_change;
      pending = true;
      continue;
    }
    if (n == 0 && pending) {
      pending = false;
      on_change_();
    }
  }
}

}  // namespace hookgate
