#include "gateway/hooks/discovery.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "tests/gateway/hooks/hook_test_util.hpp"
#include "tests/support/log_capture.hpp"

namespace hookgate::hooks {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<std::string> names(const std::vector<HookFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(f.name);
  return out;
}

const HookFile* find(const std::vector<HookFile>& files, const std::string& name) {
  for (const auto& f : files)
    if (f.name == name) return &f;
  return nullptr;
}

TEST(DiscoverHookNames, StripsNumericPrefixAndSeparator) {
  auto a = parse_hook_file_name("_10_redact");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "redact");
  EXPECT_EQ(a->order_number, 10);
  auto b = parse_hook_file_name("2-x");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name, "x");
  EXPECT_EQ(b->order_number, 2);
  auto c = parse_hook_file_name("007notify");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "notify");
  EXPECT_EQ(c->order_number, 7);
  auto d = parse_hook_file_name("notify");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name, "notify");
  EXPECT_FALSE(d->order_number);
  auto e = parse_hook_file_name("_private");  // `_` without digits belongs to the name
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name, "_private");
  EXPECT_FALSE(e->order_number);
  EXPECT_FALSE(parse_hook_file_name("10"));
  EXPECT_FALSE(parse_hook_file_name("_10_"));
  auto huge = parse_hook_file_name("99999999999999999999999_x");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->order_number, std::numeric_limits<int64_t>::max());
}

TEST(DiscoverHookOrder, NumbersCompareNumericallyAndUnnumberedComeLast) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  for (const char* f : {"_10_b.yaml", "_9_a.yaml", "10-y.yaml", "2_x.yml", "zeta.yaml",
                        "alpha.yaml", "_100_c.yaml"})
    write_file(dir, f, "kind: observe\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  EXPECT_TRUE(errors.empty());
  // Plain alphabetical order would give _100_c, _10_b, _9_a, ...: numbers must win.
  EXPECT_EQ(names(files), (std::vector<std::string>{"x", "a", "b", "y", "c", "alpha", "zeta"}));
  EXPECT_EQ(files[0].order_number, 2);
  EXPECT_EQ(files[1].order_number, 9);
  EXPECT_EQ(files[2].order_number, 10);
  EXPECT_FALSE(files[5].order_number);
  EXPECT_EQ(files[1].path, dir + "/_9_a.yaml");
  EXPECT_EQ(files[1].directory, dir);
}

TEST(DiscoverHookFiles, RecognizesFormsAndIgnoresWhatIsNotAHook) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_decl.yaml", "kind: observe\n");
  write_file(dir, "_20_script.sh", "#!/bin/sh\n", /*executable=*/true);
  write_file(dir, "_30_native.so", "not really a library");
  write_file(dir, "README.md", "docs");
  write_file(dir, "state.json", "{}");  // data a hook keeps beside itself
  write_file(dir, ".hidden.yaml", "kind: observe\n");
  write_file(dir, ".hidden-exec", "#!/bin/sh\n", true);
  // Editors' and package managers' leftovers, executable as the original was.
  write_file(dir, "_15_script.sh~", "#!/bin/sh\n", true);
  write_file(dir, "_20_script.sh.bak", "#!/bin/sh\n", true);
  write_file(dir, "_25_old.sh.dpkg-old", "#!/bin/sh\n", true);
  write_file(dir, "_26_up.sh.dpkg-tmp", "#!/bin/sh\n", true);
  write_file(dir, "#_20_script.sh#", "#!/bin/sh\n", true);            // Emacs' auto-save
  write_file(dir, "_20_script.sh___jb_tmp___", "#!/bin/sh\n", true);  // JetBrains' safe write
  write_file(dir, "_20_script.sh___jb_old___", "#!/bin/sh\n", true);
  std::string sub = tmp.dir("hooks/_5_subfolder.yaml");  // a directory, even with a hook's name
  write_file(sub, "_1_inner.yaml", "kind: observe\n");   // not recursive
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(names(files), (std::vector<std::string>{"decl", "script", "native"}));
  EXPECT_EQ(files[0].form, HookForm::Declarative);
  EXPECT_EQ(files[1].form, HookForm::Program);
  EXPECT_EQ(files[2].form, HookForm::Native);
}

// Found in review: a Latin-1 file name became a hook name that broke every /metrics scrape and
// made /status invalid JSON. Such a file is reported (a load error), under a printable name.
// Found in review: a "#!" script without the executable bit (a ConfigMap volume mounts files
// 0644) was skipped without a word, so a redaction hook could vanish from the chain unnoticed. It
// is still not a hook (it cannot run), but discovery says so; a script a descriptor's command:
// runs through an interpreter is not warned about.
TEST(DiscoverHookFiles, AScriptThatIsNotExecutableIsNamedInAWarning) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_redact.py", "#!/usr/bin/env python3\n", /*executable=*/false);
  write_file(dir, "_20_plain.txt", "not a script", /*executable=*/false);
  write_file(dir, "_30_gate.yaml", "kind: veto\ncommand: python3 gate.py --strict\n");
  write_file(dir, "gate.py", "#!/usr/bin/env python3\n", /*executable=*/false);
  hookgate::testing::LogCapture log;
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(names(files), (std::vector<std::string>{"gate"}));
  EXPECT_EQ(log.lines_containing("_10_redact.py starts with #! but is not executable").size(), 1u);
  EXPECT_FALSE(log.contains("gate.py starts with")) << "a helper a descriptor runs";
}

TEST(DiscoverHookFiles, ANameThatIsNotUtf8TextIsAnError) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_caf\xe9.yaml", "kind: observe\n");
  write_file(dir, "_20_tab\there.yaml", "kind: observe\n");
  write_file(dir, "_30_caf\xc3\xa9.yaml", "kind: observe\n");  // UTF-8: fine
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 3u);
  auto named = [&](const std::string& name) -> const HookFile* {
    for (const auto& f : files)
      if (f.name == name) return &f;
    return nullptr;
  };
  ASSERT_TRUE(named("_10_caf?")) << names(files).size();
  EXPECT_NE(named("_10_caf?")->error.find("is not UTF-8 text"), std::string::npos);
  ASSERT_TRUE(named("_20_tab?here"));
  EXPECT_NE(named("_20_tab?here")->error.find("is not UTF-8 text"), std::string::npos);
  ASSERT_TRUE(named("caf\xc3\xa9"));
  EXPECT_TRUE(named("caf\xc3\xa9")->error.empty());
}

TEST(DiscoverHookFiles, ProgramsNamedByADescriptorAreNotHooksThemselves) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_gate.yaml", "kind: veto\nrun: [./gate.py, --strict]\n");
  write_file(dir, "gate.py", "#!/usr/bin/env python3\n", true);
  write_file(dir, "_20_shell.yaml", "kind: veto\ncommand: ./notify.sh --quiet\n");
  write_file(dir, "notify.sh", "#!/bin/sh\n", true);
  write_file(dir, "_30_native.yaml", "kind: observe\nlibrary: lib/../impl.so\n");
  write_file(dir, "impl.so", "not really a library");
  write_file(dir, "standalone.sh", "#!/bin/sh\n", true);
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(names(files), (std::vector<std::string>{"gate", "shell", "native", "standalone"}));
  EXPECT_EQ(files[0].path, dir + "/_10_gate.yaml");
}

// Found in a security pass: a hook that `nobody` wrote into a 1777 folder ran as root. A hook
// file, its folder or a file its descriptor runs that every user may write does not load (an
// error entry, so a closed hook stands in), and the chmod that fixes it is a change hot reload
// sees.
TEST(DiscoverHookErrors, AHookEveryUserMayWriteDoesNotLoad) {
  namespace fs = std::filesystem;
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_ok.yaml", "kind: observe\n");
  write_file(dir, "_20_open.yaml", "kind: veto\n");
  fs::permissions(fs::path(dir) / "_20_open.yaml", fs::perms::others_write, fs::perm_options::add);
  write_file(dir, "_30_runs.yaml", "kind: veto\nrun: ./gate.sh\n");
  write_file(dir, "gate.sh", "#!/bin/sh\n", true);
  fs::permissions(fs::path(dir) / "gate.sh", fs::perms::others_write, fs::perm_options::add);
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(names(files), (std::vector<std::string>{"ok", "open", "runs"}));
  EXPECT_TRUE(files[0].error.empty()) << files[0].error;
  EXPECT_EQ(files[1].error,
            "hook file " + dir +
                "/_20_open.yaml is writable by every user (mode 0642): anyone "
                "could change what runs as this gateway; not loaded (chmod o-w it)");
  EXPECT_NE(files[2].error.find("gate.sh is writable by every user (mode 0753)"), std::string::npos)
      << files[2].error;
  EXPECT_NE(files[2].error.find("(runs runs it)"), std::string::npos) << files[2].error;

  const std::string closed = hook_files_fingerprint({dir});
  fs::permissions(dir, fs::perms::others_write | fs::perms::others_exec | fs::perms::sticky_bit,
                  fs::perm_options::add);
  EXPECT_NE(hook_files_fingerprint({dir}), closed);
  files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_NE(files[0].error.find("hooks directory " + dir + " is writable by every user"),
            std::string::npos)
      << files[0].error;
}

// A descriptor may run a program kept elsewhere (`run: /opt/tools/enrich`), an interpreter's
// script (`python3 /opt/hooks/enrich.py`) or a program in a sub-folder (`bin/tool`). Every user
// may write the program, or a folder on the way to it that is not sticky: it does not load
// either. In a sticky folder such as /tmp, a program must belong to root or to this user. A data
// file passed as an argument loads whatever its mode.
TEST(DiscoverHookErrors, AProgramOutsideTheFolderThatEveryUserMayWriteDoesNotLoad) {
  namespace fs = std::filesystem;
  TempDir tmp;
  const std::string dir = tmp.dir("hooks");
  const std::string tools = tmp.dir("tools");
  const std::string open_tools = tmp.dir("open-tools");
  const std::string sticky_tools = tmp.dir("sticky-tools");
  const auto add_write = [](const std::string& path, fs::perms extra = fs::perms::none) {
    fs::permissions(path, fs::perms::others_write | extra, fs::perm_options::add);
  };
  write_file(tools, "open.sh", "#!/bin/sh\n", true);
  add_write(tools + "/open.sh");
  write_file(tools, "safe.sh", "#!/bin/sh\n", true);
  write_file(tools, "state.json", "{}");
  add_write(tools + "/state.json");
  write_file(tools, "open.py", "print(1)\n");
  add_write(tools + "/open.py");
  write_file(open_tools, "in-open-folder.sh", "#!/bin/sh\n", true);
  add_write(open_tools);
  write_file(sticky_tools, "in-sticky-folder.sh", "#!/bin/sh\n", true);
  write_file(sticky_tools, "someone-elses.sh", "#!/bin/sh\n", true);
  add_write(sticky_tools, fs::perms::sticky_bit);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown((sticky_tools + "/someone-elses.sh").c_str(), 65534, 65534), 0);
  }
  fs::create_directories(dir + "/bin");
  write_file(dir + "/bin", "tool", "#!/bin/sh\n", true);
  add_write(dir + "/bin");
  write_file(dir, "_10_open.yaml", "kind: veto\nrun: " + tools + "/open.sh\n");
  write_file(dir, "_20_folder.yaml", "kind: veto\ncommand: " + open_tools + "/in-open-folder.sh\n");
  write_file(dir, "_30_safe.yaml",
             "kind: veto\nrun: [" + tools + "/safe.sh, " + tools + "/state.json]\n");
  write_file(dir, "_40_sticky.yaml", "kind: veto\nrun: " + sticky_tools + "/in-sticky-folder.sh\n");
  write_file(
      dir, "_50_script.yaml",
      "kind: veto\nrun: /usr/bin/env PYTHONUNBUFFERED=1 python3 -W ignore " + tools + "/open.py\n");
  write_file(dir, "_60_sub.yaml", "kind: veto\nrun: bin/tool\n");
  write_file(dir, "_70_owner.yaml", "kind: veto\nrun: " + sticky_tools + "/someone-elses.sh\n");
  // A root-owned link whose target another user put in a sticky folder first.
  fs::create_symlink(sticky_tools + "/someone-elses.sh", tools + "/linked.sh");
  write_file(dir, "_80_link.yaml", "kind: veto\nrun: " + tools + "/linked.sh\n");
  // command:'s interpreter script counts; after -m or -c the words are arguments (data files).
  write_file(dir, "_90_command.yaml", "kind: veto\ncommand: python3 " + tools + "/open.py\n");
  write_file(dir, "_95_module.yaml",
             "kind: veto\nrun: python3 -m json.tool " + tools + "/state.json\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(names(files), (std::vector<std::string>{"open", "folder", "safe", "sticky", "script",
                                                    "sub", "owner", "link", "command", "module"}));
  EXPECT_NE(files[0].error.find("the program " + tools + "/open.sh is writable by every user"),
            std::string::npos)
      << files[0].error;
  EXPECT_NE(files[0].error.find("(open runs " + tools + "/open.sh)"), std::string::npos)
      << files[0].error;
  EXPECT_NE(
      files[1].error.find("the folder of the program " + open_tools + " is writable by every user"),
      std::string::npos)
      << files[1].error;
  EXPECT_TRUE(files[2].error.empty()) << files[2].error;
  EXPECT_TRUE(files[3].error.empty()) << files[3].error;
  EXPECT_NE(files[4].error.find("the program " + tools + "/open.py is writable by every user"),
            std::string::npos)
      << files[4].error;
  EXPECT_NE(files[5].error.find("the folder of the program " + dir + "/bin is writable"),
            std::string::npos)
      << files[5].error;
  if (root) {
    EXPECT_NE(files[6].error.find("someone-elses.sh) belongs to uid 65534 in " + sticky_tools),
              std::string::npos)
        << files[6].error;
    EXPECT_NE(files[7].error.find("belongs to uid 65534 in " + sticky_tools), std::string::npos)
        << files[7].error;
  }
  EXPECT_NE(files[8].error.find("the program " + tools + "/open.py is writable by every user"),
            std::string::npos)
      << files[8].error;
  EXPECT_TRUE(files[9].error.empty()) << files[9].error;
}

// Found in review: the loader expands ${VAR} in run:, but discovery matched the raw text, so
// `run: ${ENRICH_DIR:-.}/enricher.py` left enricher.py a hook of its own as well: it ran twice.
TEST(DiscoverHookFiles, ProgramsADescriptorNamesThroughAVariableAreNotHooksThemselves) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  ::setenv("HG_DIR", dir.c_str(), 1);
  ::unsetenv("HG_UNSET_DIR");
  write_file(dir, "_10_enrich.yaml", "kind: transform\nrun: ${HG_DIR}/enricher.py\n");
  write_file(dir, "enricher.py", "#!/usr/bin/env python3\n", true);
  write_file(dir, "_20_gate.yaml", "kind: veto\nrun: [\"${HG_UNSET_DIR:-.}/gate.py\"]\n");
  write_file(dir, "gate.py", "#!/usr/bin/env python3\n", true);
  write_file(dir, "_30_shell.yaml", "kind: veto\ncommand: ${HG_UNSET_DIR:-.}/notify.sh -q\n");
  write_file(dir, "notify.sh", "#!/bin/sh\n", true);
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ::unsetenv("HG_DIR");
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(names(files), (std::vector<std::string>{"enrich", "gate", "shell"}));
}

// Found in review: a dangling symlink (or a loop, or one into a folder the gateway cannot search)
// named like a hook was skipped as "not a hook": `hooks list` said 0 loaded 0 failed, `check`
// passed, nothing was logged. It is a hook that cannot load.
TEST(DiscoverHookErrors, ABrokenSymlinkNamedLikeAHookIsAnErrorEntry) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  namespace fs = std::filesystem;
  write_file(dir, "_20_ok.yaml", "kind: observe\n");
  const std::string before = hook_files_fingerprint({dir});
  fs::create_symlink(tmp.path() / "gone" / "redact-v1.yaml", fs::path(dir) / "_10_redact.yaml");
  fs::create_symlink("_30_loop.so", fs::path(dir) / "_30_loop.so");
  fs::create_symlink(tmp.path() / "gone.py", fs::path(dir) / "_40_gate.py");
  fs::create_symlink(tmp.path() / "gone.txt", fs::path(dir) / "notes");  // not named like a hook
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  EXPECT_TRUE(errors.empty());  // the entries carry them, as for other load errors
  ASSERT_EQ(names(files), (std::vector<std::string>{"redact", "ok", "loop", "gate"}));
  EXPECT_EQ(files[0].form, HookForm::Declarative);
  EXPECT_EQ(files[0].order_number, 10);
  EXPECT_EQ(files[0].error, "cannot read hook file: it is a symlink to " + tmp.str() +
                                "/gone/redact-v1.yaml, which cannot be followed: No such file or "
                                "directory");
  EXPECT_TRUE(files[1].error.empty());
  EXPECT_EQ(files[2].form, HookForm::Native);
  EXPECT_NE(files[2].error.find("Too many levels of symbolic links"), std::string::npos)
      << files[2].error;
  EXPECT_EQ(files[3].form, HookForm::Program);
  EXPECT_NE(files[3].error.find("cannot be followed"), std::string::npos) << files[3].error;

  // Hot reload sees it come, and go elsewhere.
  const std::string broken = hook_files_fingerprint({dir});
  EXPECT_NE(broken, before);
  fs::remove(fs::path(dir) / "_10_redact.yaml");
  fs::create_symlink(tmp.path() / "gone" / "redact-v2.yaml", fs::path(dir) / "_10_redact.yaml");
  EXPECT_NE(hook_files_fingerprint({dir}), broken);
}

TEST(DiscoverHookOverrides, LaterDirectoryWinsAcrossThreeDirectories) {
  TempDir tmp;
  std::string builtin = tmp.dir("builtin");
  std::string user = tmp.dir("user");
  std::string workspace = tmp.dir("workspace");
  write_file(builtin, "_10_redact.yaml", "kind: observe\n");
  write_file(builtin, "_20_keep.yaml", "kind: observe\n");
  write_file(builtin, "_40_tag.yaml", "kind: observe\n");
  write_file(user, "_10_redact.yaml", "kind: observe\n");
  write_file(user, "_30_user_only.yaml", "kind: observe\n");
  write_file(user, "tag.sh", "#!/bin/sh\n", true);  // same name, other prefix and extension
  write_file(workspace, "_15_redact.yml", "kind: observe\n");
  config::Diagnostics errors;
  auto files =
      discover_hooks({builtin, user, (tmp.path() / "missing").string(), workspace}, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(names(files), (std::vector<std::string>{"redact", "keep", "user_only", "tag"}));

  const HookFile* redact = find(files, "redact");
  EXPECT_EQ(redact->path, workspace + "/_15_redact.yml");
  EXPECT_EQ(redact->directory, workspace);
  EXPECT_EQ(redact->order_number, 15);  // the overriding file brings its own number
  EXPECT_EQ(redact->overrides,
            (std::vector<std::string>{builtin + "/_10_redact.yaml", user + "/_10_redact.yaml"}));
  EXPECT_TRUE(find(files, "keep")->overrides.empty());
  const HookFile* tag = find(files, "tag");
  EXPECT_EQ(tag->path, user + "/tag.sh");
  EXPECT_EQ(tag->form, HookForm::Program);
  EXPECT_FALSE(tag->order_number);
  EXPECT_EQ(tag->overrides, (std::vector<std::string>{builtin + "/_40_tag.yaml"}));
}

TEST(DiscoverHookOverrides, SameDirectoryTwiceDoesNotOverrideItself) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_a.yaml", "kind: observe\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir, dir + "/"}, errors);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].overrides.empty());
  EXPECT_TRUE(files[0].error.empty());
}

TEST(DiscoverHookErrors, DuplicateNameInOneDirectoryIsALoadError) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_dup.yaml", "kind: observe\n");
  write_file(dir, "_20_dup.sh", "#!/bin/sh\n", true);
  write_file(dir, "_30_other.yaml", "kind: observe\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, dir + "/_10_dup.yaml");
  EXPECT_EQ(files[0].error, "");
  EXPECT_EQ(files[1].path, dir + "/_20_dup.sh");
  EXPECT_NE(files[1].error.find("duplicate hook name 'dup'"), std::string::npos) << files[1].error;
  EXPECT_NE(files[1].error.find("_10_dup.yaml"), std::string::npos) << files[1].error;
  EXPECT_EQ(files[2].error, "");
}

// Found in an exploratory run: of `_5_tag.py` and `_15_tag.yml` the second loaded, because it
// sorts first by spelling; the one that would run first is the one that loads.
TEST(DiscoverHookErrors, OfTwoFilesOfOneNameTheFirstInRunOrderLoads) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_5_tag.sh", "#!/bin/sh\n", true);
  write_file(dir, "_15_tag.yml", "kind: observe\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, dir + "/_5_tag.sh");
  EXPECT_EQ(files[0].error, "");
  EXPECT_NE(files[1].error.find("duplicate hook name 'tag'"), std::string::npos) << files[1].error;
  EXPECT_NE(files[1].error.find("_5_tag.sh"), std::string::npos) << files[1].error;
}

TEST(DiscoverHookErrors, NameWithoutNameIsAnErrorEntry) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_.yaml", "kind: observe\n");
  config::Diagnostics errors;
  auto files = discover_hooks({dir}, errors);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].error.find("no name after its numeric prefix"), std::string::npos);
}

TEST(DiscoverHookErrors, MissingDirectoriesAreFineAFileIsNot) {
  TempDir tmp;
  std::string file = write_file(tmp.str(), "not-a-dir", "x");
  config::Diagnostics errors;
  auto files = discover_hooks({(tmp.path() / "nope").string(), file}, errors);
  EXPECT_TRUE(files.empty());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.file, file);
  EXPECT_NE(errors[0].message.find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace hookgate::hooks
