#pragma once
// Hook discovery (PRODUCT.md "Hooks"): which files of hooks.directories are hooks, what they are
// called, which file wins when several directories define the same name, and the run order.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

struct HookFile {
  std::string path;                     // absolute path of the file
  std::string directory;                // the hook directory it was found in (absolute)
  std::string name;                     // file name without numeric prefix and extension
  std::optional<int64_t> order_number;  // the leading number, if the name has one
  // Files of earlier directories this one shadows, earliest directory first (empty: none).
  std::vector<std::string> overrides;
  // A guess from the file alone: *.yaml/*.yml → Declarative (the YAML may still turn out to be a
  // run:/command:/library: descriptor), *.so → Native, any other executable → Program.
  HookForm form = HookForm::Declarative;
  // Set when the file cannot be loaded as it stands (a duplicate name, no name after the number);
  // such a file is listed so `hooks list` can show it, but never loaded.
  std::string error;
};

struct HookFileName {
  std::string name;
  std::optional<int64_t> order_number;
};

// "_10_redact.yaml" → {redact, 10}; "2-x.sh" → {x, 2}; "notify" → {notify, none}. The prefix is an
// optional `_`, digits, then an optional `_` or `-`. Returns nullopt when nothing is left after the
// prefix ("10.sh"). Numbers beyond int64 saturate.
std::optional<HookFileName> parse_hook_file_name(std::string_view file_name);

// Names that are never hooks and whose changes never change the hooks: hidden files (editor swap
// files, VCS), backup and temporary files (`x~`, `.bak`, `.orig`, `.dpkg-new`...), and logs, pid
// and lock files a hook may keep beside itself (program hooks run in their directory). Discovery
// skips them, and hot reload ignores them: reloading on them would restart every program hook,
// and a hook that appends to its own log would reload the chain in a loop.
bool is_ignorable_file_name(std::string_view name);

// The run order: numbered before un-numbered, numbers compared as numbers (`_9_a` before `_10_b`),
// then by name, then by path.
bool runs_before(const HookFile& a, const HookFile& b);

// A configured hook directory as discovery and hot reload both name it: absolute, normalized,
// without a trailing slash.
std::filesystem::path normalized_directory(const std::string& configured);

// Scans `directories` in order (built-in → user → workspace), non-recursively. Missing directories
// are skipped (the default user and workspace folders are optional); unreadable ones are reported
// in `errors`. Hidden files, subfolders, files
// that are not hooks, and programs/libraries a YAML descriptor of the same directory names (run:,
// command:, library:) are not listed. Returns the surviving files in run order. `warnings`, when
// given, also gets what is only logged otherwise (a #! script that is not executable), and
// `not_executable` those scripts themselves (a reload keeps the version of one that ran before).
std::vector<HookFile> discover_hooks(const std::vector<std::string>& directories,
                                     config::Diagnostics& errors,
                                     config::Diagnostics* warnings = nullptr,
                                     std::vector<HookFile>* not_executable = nullptr);

// Why a #! script that is not executable is not a hook.
inline constexpr const char* kNotExecutable =
    "starts with #! but is not executable, so it is not loaded as a hook: chmod +x it to load it";
// A warning for each directory the config lists (`hooks.directories`) that does not exist or
// cannot be looked at: a typo there leaves, say, a redaction hook out. The default user and
// workspace folders are optional and never reported. Said once per loaded config (`run` at start
// and on SIGHUP, `check`, `hooks list`), not on every hot reload.
config::Diagnostics missing_hook_directories(const config::HooksConfig& config);

// What hot reload compares to tell a change of the chain from other writes in a hook directory:
// the identity (device, inode, size, mtime, ctime, mode; links followed; ctime because `cp -p`
// or `tar x` rewrite a file in place and put its old mtime back) of each directory and of every
// file in it that is a hook or that a descriptor names (run:, command: and its arguments,
// library:), and of the program a descriptor runs from a sub-folder (not the arguments after it).
// Data, state and module files a hook keeps beside itself are not in it, so a hook that writes
// them does not reload the chain (and so restart itself) in a loop.
// `target_folders`, when given, receives the sub-folders holding such a program (`run:
// lib/tracer.py`), for the watcher to watch too: computed with the fingerprint, so the descriptors
// are read once per settled change, not at every inotify wake-up.
std::string hook_files_fingerprint(const std::vector<std::string>& directories,
                                   std::set<std::string>* target_folders = nullptr);

// The words of a descriptor's string-form `run:` / `command:` (split on whitespace; the list form
// is for arguments with spaces).
std::vector<std::string> split_words(const std::string& s);

}  // namespace hookgate::hooks
