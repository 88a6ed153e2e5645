#include "gateway/hooks_watcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "tests/support/gateway_process.hpp"

namespace hookgate {
namespace {

using namespace std::chrono_literals;

TEST(HooksWatcherTest, HookFilesReloadButLogsAndEditorFilesDoNot) {
  testing::TempDir dir;
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 50ms);

  // What a program hook or an editor writes beside the hooks: no reload, however often.
  for (int i = 0; i < 5; ++i) {
    std::ofstream(dir / "audit.log", std::ios::app) << "line " << i << "\n";
    dir.write(".10_redact.yaml.swp", "swap");
    dir.write("10_redact.yaml~", "backup");
    dir.write("state.tmp", "x");
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(reloads.load(), 0);

  dir.write("10_redact.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
  // A helper script a descriptor runs is not a hook file by its name, but it is a change.
  dir.write("helper.py", "print()\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 2; }, 3s));
}

// Found in review: a ConfigMap volume's update touches only hidden names (`..2026_…/`, `..data`),
// so hooks mounted from one never hot-reloaded.
TEST(HooksWatcherTest, AConfigMapStyleSymlinkSwapReloads) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  dir.write("..v1/_10_x.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  fs::create_directory_symlink("..v1", dir / "..data");
  fs::create_symlink("..data/_10_x.yaml", dir / "_10_x.yaml");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 50ms);

  // What kubelet's atomic writer does: a new directory, a temporary link to it, renamed over.
  dir.write("..v2/_10_x.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  fs::create_directory_symlink("..v2", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
}

}  // namespace
}  // namespace hookgate
