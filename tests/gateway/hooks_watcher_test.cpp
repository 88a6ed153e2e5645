#include "gateway/hooks_watcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace hookgate
