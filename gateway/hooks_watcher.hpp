#pragma once
// Watches the hook directories with inotify and calls `on_change` once changes have settled
// (debounced), so an editor's write-rename-chmod burst causes one reload, not three; a stream of
// changes that never settles still reloads every 4 debounce periods. Changes to hidden, backup,
// temporary, log, pid and lock files (*.swp, *~, *.tmp, *.log, ...) are ignored: they are not
// hooks, and a hook that writes its log beside itself must not reload the chain in a loop.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace hookgate {

class HooksWatcher {
 public:
  HooksWatcher(std::vector<std::string> directories, std::function<void()> on_change,
               std::chrono::milliseconds debounce = std::chrono::milliseconds(300));
  ~HooksWatcher();

 private:
  void run();
  std::vector<std::string> directories_;
  std::function<void()> on_change_;
  std::chrono::milliseconds debounce_;
  int fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace hookgate
