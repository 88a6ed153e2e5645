#include "gateway/hooks_watcher.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>

#include "tests/support/gateway_process.hpp"

namespace hookgate {
namespace {

using namespace std::chrono_literals;

// The reload count once it has stayed the same for `quiet` (later reloads a burst of changes
// caused have landed), or after 10 s.
int settled_count(const std::atomic<int>& reloads, std::chrono::milliseconds quiet) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  int last = reloads.load();
  auto since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - since < quiet &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(5ms);
    if (const int now = reloads.load(); now != last) {
      last = now;
      since = std::chrono::steady_clock::now();
    }
  }
  return last;
}

TEST(HooksWatcherTest, HookFilesReloadButLogsAndEditorFilesDoNot) {
  testing::TempDir dir;
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 150ms);

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
  // A script a descriptor runs through an interpreter is not a hook file by its name, but it is
  // part of the hook.
  dir.write("20_audit.yaml", "kind: observe\nrun: python3 helper.py\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 2; }, 3s));
  std::this_thread::sleep_for(200ms);
  dir.write("helper.py", "print()\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 3; }, 3s));
}

// Found in an exploratory run: docs/hooks.md says to keep scripts in sub-folders, but a program
// a descriptor runs from one (`run: lib/tracer.py`) was replaced and nothing reloaded; only a
// touch of the descriptor did. Its folder is watched, and an unrelated file there reloads nothing.
TEST(HooksWatcherTest, AProgramADescriptorRunsFromASubFolderReloads) {
  testing::TempDir dir;
  dir.write("lib/tracer.py", "#!/usr/bin/env python3\n# v1\n", true);
  dir.write("state/trace.json", "");
  // Its argument is a state file it appends to (found in review: with every argument counted,
  // each write reloaded the hook, which wrote again at its start: a loop).
  dir.write("_9_trace.yaml", "kind: observe\nrun: python3 lib/tracer.py state/trace.json\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 150ms);
  dir.write("lib/notes.txt", "not named by any descriptor\n");
  for (int i = 0; i < 5; ++i) {
    std::ofstream(dir / "state" / "trace.json", std::ios::app) << "{\"n\":" << i << "}\n";
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(reloads.load(), 0);
  dir.write("lib/tracer.py", "#!/usr/bin/env python3\n# v2, renamed into place\n", true);
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
  // A sub-folder named only later (the descriptor edited to run from it) is watched from then on.
  dir.write("tools/other.py", "#!/usr/bin/env python3\n", true);
  dir.write("_9_trace.yaml", "kind: observe\nrun: tools/other.py\n");
  // Settled: its watches were renewed before the callback counted the reload.
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 2; }, 3s));
  dir.write("tools/other.py", "#!/usr/bin/env python3\n# edited\n", true);
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 3; }, 3s));
}

// Found in review: a "#!" script without the executable bit was not a hook file, so the chmod +x
// that fixes it changed nothing hot reload looked at.
TEST(HooksWatcherTest, MakingAScriptExecutableReloads) {
  testing::TempDir dir;
  dir.write("10_redact.py", "#!/bin/sh\n");
  dir.write("_20_script.sh.bak", "#!/bin/sh\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 150ms);
  std::filesystem::permissions(dir / "_20_script.sh.bak", std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(reloads.load(), 0) << "a backup file is not a hook";
  std::filesystem::permissions(dir / "10_redact.py", std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
}

// Found in review: program hooks run in their directory, and one that kept its state there
// (state.json, seen.db) reloaded the chain, which restarted it, which wrote again: a reload every
// 300 ms, forever.
TEST(HooksWatcherTest, AHookWritingDataBesideItselfDoesNotReload) {
  testing::TempDir dir;
  dir.write("10_audit.yaml", "kind: observe\nrun: python3 audit.py\n");
  dir.write("audit.py", "print()\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 150ms);
  for (int i = 0; i < 5; ++i) {
    dir.write("state.json", "{\"n\": " + std::to_string(i) + "}");
    dir.write("seen.db", std::string(static_cast<size_t>(i + 1), 'x'));
    dir.write("seen.db-journal", "j");
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(reloads.load(), 0);
  dir.write("audit.py", "print('changed')\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
}

// Found in review: the watch was on the directory's inode, added once; a directory created after
// start, or a new one renamed into place, was never watched.
TEST(HooksWatcherTest, FollowsADirectoryCreatedOrSwappedInAfterStart) {
  namespace fs = std::filesystem;
  testing::TempDir root;
  const fs::path hooks = root / "hooks";
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {hooks.string()}, [&] { ++reloads; }, 150ms);

  fs::create_directory(hooks);
  root.write("hooks/10_x.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  ASSERT_TRUE(testing::wait_until([&] { return reloads.load() >= 1; }, 3s));
  const int after_create = settled_count(reloads, 300ms);  // twice the debounce

  // A deploy's atomic swap: build the new folder beside, rename it over the old one.
  root.write("hooks.new/10_x.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  fs::rename(hooks, root / "hooks.old");
  fs::rename(root / "hooks.new", hooks);
  ASSERT_TRUE(testing::wait_until([&] { return reloads.load() == after_create + 1; }, 3s));
  std::this_thread::sleep_for(200ms);

  // The swapped-in folder is the one watched now; the old one is not.
  root.write("hooks/20_y.yaml", "kind: transform\nactions: [ {remove: [data.z]} ]\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == after_create + 2; }, 3s));
  std::this_thread::sleep_for(200ms);
  root.write("hooks.old/30_z.yaml", "kind: transform\nactions: [ {remove: [data.z]} ]\n");
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(reloads.load(), after_create + 2);
}

// A directory removed and copied back (a non-atomic deploy) must not run events through a chain
// without its hooks in between: the running chain stays until the directory is back.
TEST(HooksWatcherTest, ADirectoryThatDisappearsKeepsTheRunningHooksUntilItIsBack) {
  namespace fs = std::filesystem;
  testing::TempDir root;
  root.write("hooks/10_redact.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {(root / "hooks").string()}, [&] { ++reloads; }, 150ms, 1500ms);

  fs::remove_all(root / "hooks");
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(reloads.load(), 0) << "a vanished directory reloaded the chain without its hooks";

  root.write("hooks/10_redact.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
  std::this_thread::sleep_for(1700ms);
  EXPECT_EQ(reloads.load(), 1) << "the grace of the first disappearance fired after all";
}

// Found in review: a directory removed for good (an operator dropping the user hooks) kept its
// hooks running, and held back every other directory's reloads, until SIGHUP.
TEST(HooksWatcherTest, ADirectoryGoneForLongerThanTheGraceIsReloadedWithout) {
  namespace fs = std::filesystem;
  testing::TempDir root;
  root.write("user/10_a.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  root.write("workspace/20_b.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {(root / "user").string(), (root / "workspace").string()}, [&] { ++reloads; }, 150ms, 2000ms);
  fs::remove_all(root / "user");
  // The reload is due ~2.15 s from here (the debounce, then the grace).
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(reloads.load(), 0);
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 5s));
  // The other directory reloads as usual from then on.
  std::this_thread::sleep_for(200ms);
  root.write("workspace/30_c.yaml", "kind: transform\nactions: [ {remove: [data.z]} ]\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 2; }, 3s));
}

// Found in review: one start time served every directory, so a second directory that vanished
// during the first one's grace lost its hooks when the first grace ended. Each has its own now,
// and while one is within it the chain keeps every directory's hooks.
TEST(HooksWatcherTest, EachVanishedDirectoryHasAGraceOfItsOwn) {
  namespace fs = std::filesystem;
  using Clock = std::chrono::steady_clock;
  testing::TempDir root;
  root.write("a/10_a.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  root.write("b/20_b.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  std::atomic<int> reloads{0};
  constexpr auto kGrace = 2000ms;
  HooksWatcher watcher(
      {(root / "a").string(), (root / "b").string()}, [&] { ++reloads; }, 150ms, kGrace);
  const auto a_gone = Clock::now();
  fs::remove_all(root / "a");
  std::this_thread::sleep_for(1000ms);
  const auto b_gone = Clock::now();
  fs::remove_all(root / "b");
  // Past a's grace (and its debounce), within b's.
  std::this_thread::sleep_until(a_gone + kGrace + 600ms);
  const int reloads_then = reloads.load();
  const auto looked = Clock::now();
  if (b_gone - a_gone < kGrace - 300ms &&
      looked - b_gone < kGrace) {  // a slow machine proves nothing
    EXPECT_EQ(reloads_then, 0) << "b's hooks were dropped before its own grace ended";
  }
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 5s));
}

// Found in review: only the parent was watched, so a hook directory whose parents were created
// after start (mkdir -p), or a release folder swapped in one level up, went unnoticed.
TEST(HooksWatcherTest, FollowsChangesFurtherUpThePath) {
  namespace fs = std::filesystem;
  testing::TempDir root;
  const fs::path hooks = root / "release" / "hooks";
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {hooks.string()}, [&] { ++reloads; }, 150ms);

  root.write("release/hooks/10_x.yaml", "kind: transform\nactions: [ {remove: [data.x]} ]\n");
  ASSERT_TRUE(testing::wait_until([&] { return reloads.load() >= 1; }, 3s));
  const int after_create = settled_count(reloads, 300ms);  // twice the debounce

  root.write("release.new/hooks/10_x.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  fs::rename(root / "release", root / "release.old");
  fs::rename(root / "release.new", root / "release");
  ASSERT_TRUE(testing::wait_until([&] { return reloads.load() == after_create + 1; }, 3s));
  std::this_thread::sleep_for(200ms);
  root.write("release/hooks/20_y.yaml", "kind: transform\nactions: [ {remove: [data.z]} ]\n");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == after_create + 2; }, 3s));
}

// Found in review: `cp -p` (or `tar x`) rewrites a hook in place, same size, and puts its old
// mtime back; only the ctime tells.
TEST(HooksWatcherTest, AnInPlaceRewriteThatKeepsSizeAndMtimeReloads) {
  testing::TempDir dir;
  const std::string path =
      dir.write("10_x.yaml", "kind: transform\nactions: [ {remove: [data.a]} ]\n");
  std::atomic<int> reloads{0};
  HooksWatcher watcher(
      {dir.path().string()}, [&] { ++reloads; }, 150ms);
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::this_thread::sleep_for(50ms);
  {
    std::ofstream out(path, std::ios::in | std::ios::out);
    out << "kind: transform\nactions: [ {remove: [data.b]} ]\n";
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
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
      {dir.path().string()}, [&] { ++reloads; }, 150ms);

  // What kubelet's atomic writer does: a new directory, a temporary link to it, renamed over.
  dir.write("..v2/_10_x.yaml", "kind: transform\nactions: [ {remove: [data.y]} ]\n");
  fs::create_directory_symlink("..v2", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");
  EXPECT_TRUE(testing::wait_until([&] { return reloads.load() == 1; }, 3s));
}

}  // namespace
}  // namespace hookgate
