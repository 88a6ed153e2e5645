#include "gateway/hooks/discovery.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config/yaml_reader.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::hooks {
namespace fs = std::filesystem;
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_executable(const fs::file_status& st) {
  constexpr auto kExec = fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  return (st.permissions() & kExec) != fs::perms::none;
}

// A script meant to run as a program: its first two bytes are "#!".
bool starts_with_shebang(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[2] = {};
  return in.read(head, 2) && head[0] == '#' && head[1] == '!';
}

// What kind of hook file `entry` is, or nullopt when it is not a hook at all (README.md, a data
// file, a subfolder, a socket...). A "#!" script without the executable bit counts as a program
// hook, so discovery can report it (a ConfigMap volume mounts files 0644) instead of dropping a
// redaction hook without a word, and hot reload sees the chmod +x that fixes it.
std::optional<HookForm> classify(const fs::directory_entry& entry) {
  std::error_code ec;
  // status() follows symlinks: a link to a hook file is a hook file.
  auto st = entry.status(ec);
  if (ec || !fs::is_regular_file(st)) return std::nullopt;
  std::string ext = entry.path().extension().string();
  if (ext == ".yaml" || ext == ".yml") return HookForm::Declarative;
  if (ext == ".so") return HookForm::Native;
  if (is_executable(st) || starts_with_shebang(entry.path())) return HookForm::Program;
  return std::nullopt;
}

// A symlink named like a hook file (*.yaml, *.yml, *.so, or a numbered name) whose target cannot
// be followed: dangling, a loop, behind a folder without search permission. Why, or nullopt.
// Such a link is reported as a broken hook rather than skipped like a non-hook: a redaction hook
// whose link broke in a deploy must not leave the chain without a word.
std::optional<std::string> unfollowable_hook_link(const fs::directory_entry& entry) {
  std::error_code ec;
  if (!entry.is_symlink(ec) || ec) return std::nullopt;
  (void)entry.status(ec);
  if (!ec) return std::nullopt;
  const fs::path& path = entry.path();
  const std::string ext = path.extension().string();
  const auto name = parse_hook_file_name(path.stem().string());
  if (ext != ".yaml" && ext != ".yml" && ext != ".so" && !(name && name->order_number))
    return std::nullopt;
  std::error_code link_ec;
  const fs::path target = fs::read_symlink(path, link_ec);
  return "cannot read hook file: it is a symlink to " + display_text(target.string()) +
         ", which cannot be followed: " + ec.message();
}

// Programs that run the file named after them (a script), so that file runs as this gateway too.
bool is_interpreter(const std::string& name) {
  static const std::set<std::string> kInterpreters = {
      "sh", "bash", "dash", "zsh", "ksh", "env", "node", "nodejs", "perl", "ruby", "php", "lua"};
  return kInterpreters.count(name) != 0 || name.starts_with("python");
}

// Files of `dir` that the YAML descriptor `yaml` names in run:, library: or as the first word of
// command:. They are part of that hook, not hooks of their own: without this, a script kept
// beside its descriptor would also load (and run) as a separate program hook. A descriptor that
// does not parse names nothing here; the loader reports it. With `every_word`, for hot reload's
// fingerprint: every word of command: too (its arguments: a script run by an interpreter), and the
// program itself where it sits in a sub-folder (`run: python3 lib/tracer.py`, where the docs say
// to keep scripts): the first word of run:/command: naming a file there, and library:. Not the
// words after it: those are arguments, such as a state file the hook writes (found in review: a
// hook appending to `state/trace.json`, passed as its argument, reloaded itself in a loop).
// ${VAR}s are expanded as the loader expands them (`run: ${DIR:-.}/enrich.py` names enrich.py);
// an expansion error is the loader's to report. `programs`, if given, gets what runs as this
// gateway from a sub-folder or from outside `dir`: the program (the first word of run: or
// command:), an interpreter's script (`python3 /opt/hooks/enrich.py`, after `env` too), and
// library:, where they name an existing file. Not other words, which may be data files.
void collect_descriptor_targets(const fs::path& yaml, const fs::path& dir,
                                std::set<std::string>& out, bool every_word = false,
                                std::set<std::string>* programs = nullptr) {
  auto parsed = config::parse_yaml_file(yaml.string());
  if (!parsed) return;
  const YAML::Node root = parsed.value();
  if (!root.IsMap()) return;
  // yaml-cpp's root["missing"] is an invalid node that throws when inspected; look keys up by
  // walking the mapping instead.
  auto member = [&](const char* key) {
    for (auto it : root)
      if (it.first.IsScalar() && it.first.Scalar() == key) return it.second;
    return YAML::Node(YAML::NodeType::Undefined);
  };
  auto expanded = [](const YAML::Node& scalar) {
    config::Diagnostics ignored;
    return config::expand_env(scalar.Scalar(), config::Position{}, ignored);
  };
  // One source's words: run:, command: or library:. With `programs_only`, only the program
  // (and an interpreter's script) of its folder is part of the hook, not the other words.
  auto take = [&](const std::vector<std::string>& words, bool programs_only = false) {
    bool program_found = false;  // a word naming an existing file of the folder or below
    bool first = true;
    bool script_next = false;  // an interpreter came before: the next existing file is its script
    for (const auto& w : words) {
      // Code given inline or a module (`python3 -m pkg`, `sh -c '...'`, `perl -e`): the words
      // after it are its arguments, not a script.
      if (script_next && (w == "-m" || w == "-c" || w == "-e" || w == "-E")) script_next = false;
      if (w.empty() || w.front() == '-') continue;
      if (script_next && w.find('=') != std::string::npos) continue;  // env NAME=value
      const bool program = std::exchange(first, false) || script_next;
      fs::path p = fs::path(w).is_absolute() ? fs::path(w) : dir / w;
      p = p.lexically_normal();
      std::error_code ec;
      const bool exists = fs::exists(p, ec);
      // An option's argument (`python3 -W ignore x.py`) names no file: look on for the script.
      if (program) script_next = is_interpreter(p.filename().string()) || (script_next && !exists);
      if (p.parent_path() == dir) {
        if (!programs_only || program) out.insert(p.string());
        program_found |= exists;
        continue;
      }
      const fs::path below = p.lexically_relative(dir);
      const bool in_sub_folder = !below.empty() && *below.begin() != ".." && *below.begin() != ".";
      if (programs != nullptr && program && exists) programs->insert(p.string());
      if (every_word && in_sub_folder && exists && !program_found) out.insert(p.string());
      program_found |= in_sub_folder && exists;
    }
  };
  if (const YAML::Node run = member("run"); run.IsScalar()) {
    take(split_words(expanded(run)));
  } else if (run.IsSequence()) {
    std::vector<std::string> words;
    for (const auto& item : run)
      if (item.IsScalar()) words.push_back(expanded(item));
    take(words);
  }
  if (const YAML::Node command = member("command"); command.IsScalar()) {
    take(split_words(expanded(command)), /*programs_only=*/!every_word);
  }
  if (const YAML::Node library = member("library"); library.IsScalar()) take({expanded(library)});
}

// On a read-only file system the mode says nothing: nobody can write there, whatever it says.
bool on_read_only_file_system(const fs::path& path) {
  struct statvfs fs_info {};
  return ::statvfs(path.c_str(), &fs_info) == 0 && (fs_info.f_flag & ST_RDONLY) != 0;
}

// Why a hook file (or its folder, or a file its descriptor runs) must not load: anyone may write
// it, and so put code of their own, or a veto that blinds the SIEM, into what runs as this
// gateway (found in a security pass: a hook written into a 1777 folder by `nobody` ran as root).
// sshd and cron refuse such files too. Group-writable ones are the operator's to decide.
// On a read-only file system the mode says nothing: Kubernetes mounts ConfigMap and Secret volumes
// read-only with the folder at 0777 (found in review).
std::optional<std::string> writable_by_anyone(const fs::path& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & S_IWOTH) == 0) return std::nullopt;
  if (on_read_only_file_system(path)) return std::nullopt;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string(what) + " " + display_text(path.string()) +
         " is writable by every user (mode " + mode +
         "): anyone could change what runs as this gateway; not loaded (chmod o-w it)";
}

// A program a descriptor runs from a sub-folder or from elsewhere: the file must not be writable
// by every user, nor the folders that lead to it from the hook directory (from elsewhere: its own
// folder, and the folder a symlink leads to). In a sticky folder every user may write (/tmp),
// anyone may have put what is in it first: the entry on the way to the program (the file, its
// link, or a folder holding it) must belong to root or to this user.
std::optional<std::string> program_open_to_anyone(const fs::path& program, const fs::path& dir) {
  if (auto open = writable_by_anyone(program, "the program")) return open;
  const fs::path below = program.lexically_relative(dir);
  const bool in_sub_folder = !below.empty() && *below.begin() != "..";
  std::vector<std::pair<fs::path, fs::path>> steps;  // (folder, its entry on the way)
  for (fs::path entry = program; entry.has_parent_path() && entry.parent_path() != dir;) {
    const fs::path folder = entry.parent_path();
    steps.emplace_back(folder, entry);
    if (!in_sub_folder || folder == folder.root_path()) break;
    entry = folder;
  }
  std::error_code ec;
  if (const fs::path real = fs::canonical(program, ec);
      !ec && real.parent_path() != program.parent_path())
    steps.emplace_back(real.parent_path(), real);
  for (const auto& [folder, entry] : steps) {
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0 || (st.st_mode & S_IWOTH) == 0) continue;
    if ((st.st_mode & S_ISVTX) == 0) {
      if (auto open = writable_by_anyone(folder, "the folder of the program")) return open;
      continue;
    }
    struct stat owner {};
    if (::lstat(entry.c_str(), &owner) != 0 || owner.st_uid == 0 || owner.st_uid == ::geteuid())
      continue;
    if (on_read_only_file_system(folder)) continue;
    return display_text(entry.string()) + " (on the way to the program " +
           display_text(program.string()) + ") belongs to uid " + std::to_string(owner.st_uid) +
           " in " + display_text(folder.string()) +
           ", a folder every user may write: anyone could have put it there; not loaded (chown "
           "it to root or to this gateway's user, or move it)";
  }
  return std::nullopt;
}

}  // namespace

fs::path normalized_directory(const std::string& configured) {
  std::error_code ec;
  fs::path dir = fs::absolute(configured, ec);
  if (ec) dir = configured;
  dir = dir.lexically_normal();
  if (!dir.has_filename() && dir.has_parent_path()) dir = dir.parent_path();  // "x/" → "x"
  return dir;
}

namespace {

struct Candidate {
  std::string file_name;
  HookFile file;
};

// Hook files of one directory, sorted by file name (the caller sorts them in run order; this
// breaks its ties the same way on every run).
std::vector<Candidate> scan_directory(const fs::path& dir, config::Diagnostics& errors,
                                      config::Diagnostics* warnings,
                                      std::vector<HookFile>* not_executable_out) {
  std::vector<Candidate> out;
  std::vector<HookFile> not_executable;
  const std::optional<std::string> open_folder = writable_by_anyone(dir, "hooks directory");
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    errors.push_back({{dir.string(), 0, 0}, "cannot read hooks directory: " + ec.message()});
    return out;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      errors.push_back({{dir.string(), 0, 0}, "cannot read hooks directory: " + ec.message()});
      break;
    }
    std::string file_name = it->path().filename().string();
    // Hidden, backup and temporary files, as hot reload ignores them: an editor's `_40_deny.py~`
    // must not load beside (or instead of) the real hook.
    if (file_name.empty() || is_ignorable_file_name(file_name)) continue;
    auto form = classify(*it);
    std::optional<std::string> broken_link;
    if (!form) {
      broken_link = unfollowable_hook_link(*it);
      if (!broken_link) continue;
      // The form its name suggests, for `hooks list`; it never loads.
      const std::string ext = it->path().extension().string();
      form = ext == ".so"                      ? HookForm::Native
             : ext == ".yaml" || ext == ".yml" ? HookForm::Declarative
                                               : HookForm::Program;
    }
    HookFile f;
    f.path = it->path().string();
    f.directory = dir.string();
    f.form = *form;
    // The extension never belongs to the name; executables may have none ("notify").
    std::string stem = it->path().stem().string();
    // The name labels metrics and fills /status and diagnostics: bytes that are not UTF-8 text
    // would make a Prometheus scrape fail and /status invalid JSON.
    if (!is_display_text(stem)) {
      f.name = display_text(stem);
      f.error = "hook file name '" + f.name +
                "' is not UTF-8 text without control characters (it names the hook in metrics, "
                "logs and /status); rename the file";
    } else if (auto parsed = parse_hook_file_name(stem)) {
      f.name = parsed->name;
      f.order_number = parsed->order_number;
    } else {
      f.name = stem;
      f.error = "hook file name '" + file_name + "' has no name after its numeric prefix";
    }
    if (f.error.empty()) {
      if (open_folder)
        f.error = *open_folder;
      else if (auto open_file = writable_by_anyone(f.path, "hook file"))
        f.error = std::move(*open_file);
    }
    if (broken_link) {
      if (f.error.empty()) f.error = std::move(*broken_link);
    } else if (f.form == HookForm::Program && !is_executable(it->status(ec))) {
      not_executable.push_back(std::move(f));  // warned about below, unless a helper
      continue;
    }
    out.push_back({std::move(file_name), std::move(f)});
  }
  std::set<std::string> targets;    // run:, library: and command:'s program: part of a descriptor
  std::set<std::string> mentioned;  // and every word of command: (a script an interpreter runs)
  for (auto& c : out) {
    if (c.file.form != HookForm::Declarative) continue;
    try {
      // The files of its folder this descriptor runs (its run: words, command:'s program, its
      // library), which must be as safe as it is; not command:'s other words, data it may write.
      std::set<std::string> own;
      std::set<std::string> programs;
      collect_descriptor_targets(c.file.path, dir, own, false, &programs);
      targets.insert(own.begin(), own.end());
      collect_descriptor_targets(c.file.path, dir, mentioned, true);
      for (const auto& target : own)
        if (auto open_file = writable_by_anyone(target, "the file");
            open_file && c.file.error.empty())
          c.file.error = *open_file + " (" + c.file.name + " runs it)";
      for (const auto& program : programs) {
        if (!c.file.error.empty()) break;
        if (fs::path(program).parent_path() == dir) continue;  // checked above
        if (auto open = program_open_to_anyone(program, dir))
          c.file.error = *open + " (" + c.file.name + " runs " + display_text(program) + ")";
      }
    } catch (const std::exception&) {
      // Not a readable descriptor: the loader reports the file itself.
    }
  }
  // Not a hook (it cannot run), but said out loud: a ConfigMap volume mounts files 0644, and a
  // redaction hook must not leave the chain without a word. A warning, not an error entry: a
  // helper module with a #! line may sit beside the hooks, and an entry would take a name.
  for (auto& file : not_executable) {
    if (mentioned.count(file.path)) continue;
    spdlog::warn("{} {}", display_text(file.path), kNotExecutable);
    if (warnings) warnings->push_back({{file.path, 0, 0}, kNotExecutable});
    if (not_executable_out) not_executable_out->push_back(std::move(file));
  }
  std::erase_if(out, [&](const Candidate& c) {
    bool part_of_descriptor = c.file.form != HookForm::Declarative && targets.count(c.file.path);
    if (part_of_descriptor)
      spdlog::debug("{} belongs to a descriptor; not a hook itself", c.file.path);
    return part_of_descriptor;
  });
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.file_name < b.file_name; });
  return out;
}

}  // namespace

bool is_ignorable_file_name(std::string_view name) {
  if (name.empty()) return false;  // the directory itself
  // A Kubernetes ConfigMap volume updates by renaming a new `..data` symlink into place; the
  // visible files are symlinks through it and never change themselves.
  if (name == "..data") return false;
  if (name.front() == '.' || name.back() == '~') return true;
  // Emacs' auto-save `#x#` keeps the original's mode, so an executable hook's copy would run
  // its unsaved edits on live events (found in review).
  if (name.size() >= 2 && name.front() == '#' && name.back() == '#') return true;
  for (std::string_view suffix :
       {".swp", ".swx", ".swo", ".tmp", ".log", ".pid", ".lock", ".bak", ".orig", ".rej",
        ".dpkg-new", ".dpkg-old", ".dpkg-dist", ".dpkg-tmp", ".rpmnew", ".rpmsave", "___jb_tmp___",
        "___jb_old___"})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      return true;
  return false;
}

std::optional<HookFileName> parse_hook_file_name(std::string_view s) {
  HookFileName out;
  size_t i = 0;
  if (i < s.size() && s[i] == '_') ++i;
  size_t digits_start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == digits_start) {
    // No number: a leading `_` is then part of the name ("_private" stays "_private").
    if (s.empty()) return std::nullopt;
    out.name = std::string(s);
    return out;
  }
  int64_t n = 0;
  for (size_t d = digits_start; d < i; ++d) {
    int digit = s[d] - '0';
    if (n > (std::numeric_limits<int64_t>::max() - digit) / 10) {
      n = std::numeric_limits<int64_t>::max();
      break;
    }
    n = n * 10 + digit;
  }
  if (i < s.size() && (s[i] == '_' || s[i] == '-')) ++i;
  if (i == s.size()) return std::nullopt;
  out.name = std::string(s.substr(i));
  out.order_number = n;
  return out;
}

bool runs_before(const HookFile& a, const HookFile& b) {
  if (a.order_number.has_value() != b.order_number.has_value()) return a.order_number.has_value();
  if (a.order_number && *a.order_number != *b.order_number)
    return *a.order_number < *b.order_number;
  if (a.name != b.name) return a.name < b.name;
  return a.path < b.path;
}

std::vector<HookFile> discover_hooks(const std::vector<std::string>& directories,
                                     config::Diagnostics& errors, config::Diagnostics* warnings,
                                     std::vector<HookFile>* not_executable) {
  // name → the files currently defining it: the first is the one that loads, any others are
  // same-directory duplicates carrying an error.
  std::map<std::string, std::vector<HookFile>> by_name;
  std::set<std::string> seen_dirs;
  for (const auto& configured : directories) {
    std::error_code ec;
    const fs::path dir = normalized_directory(configured);
    // The same directory listed twice would otherwise override itself.
    fs::path canonical = fs::weakly_canonical(dir, ec);
    if (!seen_dirs.insert(ec ? dir.string() : canonical.string()).second) continue;
    auto st = fs::status(dir, ec);
    if (ec || !fs::exists(st)) {
      // Missing is normal: the user and workspace directories are optional.
      spdlog::debug("hooks directory {} does not exist; skipped", dir.string());
      continue;
    }
    if (!fs::is_directory(st)) {
      errors.push_back({{dir.string(), 0, 0}, "hooks directory is not a directory"});
      continue;
    }

    std::map<std::string, std::vector<HookFile>> here;
    // In run order, so of two files of one name the one that would run first is the one that
    // loads (found in an exploratory run: `_15_tag.yml` won over `_5_tag.py`, by spelling).
    auto candidates = scan_directory(dir, errors, warnings, not_executable);
    std::stable_sort(
        candidates.begin(), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return runs_before(a.file, b.file); });
    for (auto& c : candidates) {
      auto& same = here[c.file.name];
      if (!same.empty() && c.file.error.empty()) {
        c.file.error = "duplicate hook name '" + c.file.name + "' in " + dir.string() +
                       ": also defined by " + fs::path(same.front().path).filename().string();
      }
      same.push_back(std::move(c.file));
    }
    // Decision: overriding goes by hook NAME, not by file name. A workspace `_15_redact.py`
    // replaces a built-in `_10_redact.yaml`: users think in hook names (logs, metrics, `hooks list`
    // all show the name), and two hooks of one name would be indistinguishable there. The
    // overriding file brings its own number, so an override may also move the hook in the order.
    for (auto& [name, files] : here) {
      auto prev = by_name.find(name);
      if (prev != by_name.end()) {
        std::vector<std::string> shadowed = prev->second.front().overrides;
        for (const auto& old : prev->second) shadowed.push_back(old.path);
        for (auto& f : files) f.overrides = shadowed;
        spdlog::debug("hook {}: {} overrides {}", name, files.front().path, shadowed.back());
      }
      by_name[name] = std::move(files);
    }
  }

  std::vector<HookFile> out;
  for (auto& [name, files] : by_name)
    for (auto& f : files) out.push_back(std::move(f));
  std::sort(out.begin(), out.end(), runs_before);
  return out;
}

config::Diagnostics missing_hook_directories(const config::HooksConfig& config) {
  config::Diagnostics out;
  if (!config.enabled || config.directories_where.line == 0) return out;
  for (const auto& dir : config.directories) {
    struct stat st {};
    if (::stat(normalized_directory(dir).c_str(), &st) == 0) continue;
    const int err = errno;
    out.push_back({config.directories_where,
                   "hooks.directories: " + display_text(dir) +
                       (err == ENOENT || err == ENOTDIR
                            ? std::string(" does not exist")
                            : std::string(" cannot be looked at (") + std::strerror(err) + ")") +
                       ", so no hooks load from it"});
  }
  return out;
}

std::string hook_files_fingerprint(const std::vector<std::string>& directories,
                                   std::set<std::string>* target_folders) {
  if (target_folders) target_folders->clear();
  std::string out;
  auto append_identity = [&out](const struct stat& st) {
    out += std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
           std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) + '.' +
           std::to_string(st.st_mtim.tv_nsec) + ':' + std::to_string(st.st_ctim.tv_sec) + '.' +
           std::to_string(st.st_ctim.tv_nsec) + ':' + std::to_string(st.st_mode) + '\n';
  };
  for (const auto& configured : directories) {
    const fs::path dir = normalized_directory(configured);
    out += dir.string() + '\n';
    struct stat dir_st {};
    if (::stat(dir.c_str(), &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) {
      out += "missing\n";
      continue;
    }
    // Which directory it is and its mode (a folder writable by every user loads nothing), not its
    // mtime: that moves with every file a hook writes into it.
    out += std::to_string(dir_st.st_dev) + ':' + std::to_string(dir_st.st_ino) + ':' +
           std::to_string(dir_st.st_mode) + '\n';
    std::set<std::string> files;  // sorted: the fingerprint must not depend on readdir order
    std::error_code ec;
    for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.empty() || is_ignorable_file_name(name)) continue;
      const auto form = classify(*it);
      if (!form) {
        // A broken link is a (failing) hook: fixing or breaking it is a change of the chain.
        if (unfollowable_hook_link(*it)) files.insert(it->path().string());
        continue;
      }
      files.insert(it->path().string());
      if (*form != HookForm::Declarative) continue;
      try {
        collect_descriptor_targets(it->path(), dir, files, true);
      } catch (const std::exception&) {
        // Not a readable descriptor: its own identity is in the fingerprint.
      }
    }
    for (const auto& path : files) {
      if (const fs::path parent = fs::path(path).parent_path(); target_folders && parent != dir)
        target_folders->insert(parent.string());
      out += path + '\n';
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) {
        append_identity(st);  // follows links (ConfigMaps)
      } else {
        // A broken link pointed elsewhere (`ln -sfn`) is still a change.
        std::error_code link_ec;
        out += "unreadable " + fs::read_symlink(path, link_ec).string() + '\n';
      }
    }
  }
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

}  // namespace hookgate::hooks
