#pragma once
// Watches the hook directories with inotify and calls `on_change` once changes have settled
// (debounced), so an editor's write-rename-chmod burst causes one reload, not three; a stream of
// changes that never settles still reloads every 4 debounce periods. Changes to hidden, backup,
// temporary, log, pid and lock files (*.swp, *~, *.tmp, *.log, ...) are ignored outright, and
// once changes settle `on_change` runs only if the hook files changed
// (hooks::hook_files_fingerprint): a hook that writes its state or data beside itself must not
// reload the chain, and so restart itself, in a loop.
//
// Each ancestor of a directory is watched for the next name on the way down, and the watches are
// renewed after every change, so a directory created after start (with its parents), replaced by
// a rename at any level, or swapped as a symlink is followed. A directory that disappears keeps
// the running hooks for `vanished_grace` (a deploy removing and copying back a folder must not run
// events through a chain without its redaction hook meanwhile); still gone after that, it counts
// as removed and the chain reloads without it.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

struct inotify_event;

namespace hookgate {

// How long a hook directory that disappeared keeps the running hooks, on hot reload and on a
// SIGHUP reload alike.
inline constexpr std::chrono::seconds kVanishedDirectoryGrace{10};

[[nodiscard]] bool directory_exists(const std::filesystem::path& path);

class HooksWatcher {
 public:
  HooksWatcher(std::vector<std::string> directories, std::function<void()> on_change,
               std::chrono::milliseconds debounce = std::chrono::milliseconds(300),
               std::chrono::milliseconds vanished_grace = kVanishedDirectoryGrace);
  ~HooksWatcher();

 private:
  struct Watch {
    bool whole_directory = false;  // a hook directory: any name that is not ignorable counts
    std::set<std::string> names;   // a parent: only these entries (the hook directories) count
  };
  void run();
  void renew_watches();
  bool counts(const inotify_event& event) const;
  void settled();

  std::vector<std::string> directories_;
  std::map<int, Watch> watches_;  // by watch descriptor
  std::set<std::string> warned_unwatchable_;
  std::string fingerprint_;  // of the hook files the chain was last (re)loaded for
  // Sub-folders holding programs descriptors run (`run: lib/tracer.py`), as of the last
  // fingerprint: watched too.
  std::set<std::string> target_folders_;
  std::vector<bool> existed_;  // per directory, at that load
  // Per directory: since when one that existed at the last load has been missing (each has a
  // grace of its own); and when to look again.
  std::vector<std::optional<std::chrono::steady_clock::time_point>> missing_since_;
  std::optional<std::chrono::steady_clock::time_point> recheck_at_;
  std::function<void()> on_change_;
  std::chrono::milliseconds debounce_;
  std::chrono::milliseconds vanished_grace_;
  int fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace hookgate
