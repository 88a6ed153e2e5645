#include "gateway/hooks/hook_loader.hpp"

#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/yaml_reader.hpp"
#include "gateway/hooks/declarative_hook.hpp"
#include "gateway/hooks/native_hook.hpp"
#include "gateway/hooks/program_hook.hpp"

namespace hookgate::hooks {
namespace {

namespace fs = std::filesystem;
using config::Diagnostics;
using config::MapReader;
using config::position_of;

constexpr const char* kTopKeys[] = {
    "kind", "events", "timeout_ms", "on_error", "config",          "actions",
    "when", "reason", "run",        "command",  "veto_exit_codes", "library"};

LoadResult summarize(Diagnostics& errors, size_t before, const std::string& fallback) {
  config::drop_repeated(errors, before);
  if (errors.size() <= before) return fallback;
  std::string msg = errors[before].str();
  size_t more = errors.size() - before - 1;
  if (more > 0) msg += " (and " + std::to_string(more) + " more)";
  return msg;
}

// A program named in a descriptor. Relative paths resolve against the descriptor's folder; a bare
// name ("python3") is looked up there first, then left for PATH. Later arguments are rewritten
// only when they name a file beside the descriptor (`run: [python3, filter.py]`): flags and
// values are passed as written.
std::vector<std::string> resolve_argv(std::vector<std::string> argv, const fs::path& folder) {
  std::error_code ec;
  for (size_t i = 0; i < argv.size(); ++i) {
    fs::path p(argv[i]);
    if (argv[i].empty() || p.is_absolute() || argv[i][0] == '-') continue;
    fs::path beside = (folder / p).lexically_normal();
    bool has_slash = argv[i].find('/') != std::string::npos;
    if ((i == 0 && has_slash) || fs::is_regular_file(beside, ec)) argv[i] = beside.string();
  }
  return argv;
}

// The default is [1] for a veto hook only: for a transform or an observer, exit 1 is what a
// crash looks like (an uncaught Python exception, `set -e`, grep finding nothing), and taking
// it for a veto would drop the event where on_error: open should let it through.
std::vector<int> read_exit_codes(MapReader& r, const std::string& file, HookKind kind,
                                 Diagnostics& errors) {
  std::vector<int> codes;
  if (kind == HookKind::Veto) codes.push_back(1);
  YAML::Node n = r.node("veto_exit_codes");
  if (!n.IsDefined() || n.IsNull()) return codes;
  if (!n.IsSequence() && !n.IsScalar()) {
    r.error(r.pos("veto_exit_codes"), "hook.veto_exit_codes: expected a list of exit codes");
    return codes;
  }
  std::vector<YAML::Node> items;
  if (n.IsScalar()) {
    items.push_back(n);
  } else {
    for (const auto& item : n) items.push_back(item);
  }
  codes.clear();
  for (const auto& item : items) {
    int code = 0;
    std::string s = item.IsScalar() ? item.Scalar() : "";
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), code);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || code < 1 || code > 255) {
      errors.push_back({position_of(item, file),
                        "hook.veto_exit_codes: expected exit codes from 1 to 255 (0 means "
                        "continue)"});
      continue;
    }
    codes.push_back(code);
  }
  return codes;
}

}  // namespace

HookSpec default_spec(const HookFile& file, const config::HooksConfig& defaults) {
  HookSpec spec;
  spec.name = file.name;
  spec.file = file.path;
  spec.directory = file.directory;
  spec.form = file.form;
  spec.timeout_ms = defaults.default_timeout_ms;
  spec.on_error = defaults.fail_open ? FailurePolicy::Open : FailurePolicy::Closed;
  return spec;
}

namespace {

LoadResult load_yaml_hook_unguarded(const HookFile& file, const config::HooksConfig& defaults,
                                    Diagnostics& errors, AttemptedHook* attempted) {
  const size_t before = errors.size();
  const std::string& path = file.path;
  auto parsed = config::parse_yaml_file(path);
  if (!parsed) {
    for (auto& d : parsed.error()) errors.push_back(d);
    return summarize(errors, before, "cannot parse " + path);
  }
  YAML::Node root = parsed.value();
  if (!root.IsMap()) {
    errors.push_back(
        {position_of(root, path), "a hook file is a YAML mapping (kind:, events:, ...)"});
    return summarize(errors, before, "");
  }
  HookSpec spec = default_spec(file, defaults);
  MapReader r(root, path, "hook", errors);
  for (const char* k : kTopKeys) (void)r.node(k);

  std::optional<HookKind> kind;
  if (r.has("kind")) {
    std::string text;
    r.get_keyword("kind", text);
    kind = parse_hook_kind(text);
    if (!kind)
      r.error(r.pos("kind"),
              "hook.kind: expected veto, transform or observe, got " + r.as_written("kind", text));
  }
  if (r.has("events")) {
    std::vector<std::string> events;
    size_t mark = errors.size();
    r.get("events", events);
    if (errors.size() == mark) {
      if (events.empty())
        r.error(r.pos("events"), "hook.events: list at least one pattern (omit events: for all)");
      for (const auto& e : events)
        if (e.empty()) r.error(r.pos("events"), "hook.events: a pattern must not be empty");
      spec.events = std::move(events);
    }
  }
  r.get("timeout_ms", spec.timeout_ms);
  if (spec.timeout_ms <= 0) r.error(r.pos("timeout_ms"), "hook.timeout_ms: must be positive");
  if (r.has("on_error")) {
    std::string text;
    r.get_keyword("on_error", text);
    if (text == "open") {
      spec.on_error = FailurePolicy::Open;
    } else if (text == "closed") {
      spec.on_error = FailurePolicy::Closed;
    } else {
      r.error(r.pos("on_error"),
              "hook.on_error: expected open or closed, got " + r.as_written("on_error", text));
    }
  }
  if (YAML::Node cfg = r.node("config"); cfg.IsDefined() && !cfg.IsNull()) {
    if (!cfg.IsMap()) {
      r.error(r.pos("config"), "hook.config: expected a mapping");
    } else {
      if (auto json = yaml_to_json_text(cfg, path, errors)) spec.config_json = std::move(*json);
    }
  }

  // The form is in the keys, so a descriptor that fails to load still lists as what it is.
  if (r.has("run"))
    spec.form = HookForm::Program;
  else if (r.has("command"))
    spec.form = HookForm::OneShot;
  else if (r.has("library"))
    spec.form = HookForm::Native;
  if (attempted) *attempted = {spec, kind};  // the common keys: what a stand-in needs

  int forms = r.has("run") + r.has("command") + r.has("library");
  if (forms > 1) r.error(r.pos(), "hook: use only one of run:, command:, library:");
  if (forms > 0) {
    for (const char* k : {"actions", "when", "reason"}) {
      if (r.has(k))
        r.error(r.pos(k), std::string("hook.") + k +
                              ": only declarative hooks have it (this file is a run:, command: "
                              "or library: descriptor)");
    }
  }
  if (r.has("veto_exit_codes") && !r.has("command"))
    r.error(r.pos("veto_exit_codes"), "hook.veto_exit_codes: only with command:");
  // Without kind:, a program or library says what it is in its handshake; events alone would
  // leave the kind to the handshake but the patterns to the descriptor, which the forms cannot do.
  if (forms > 0 && !kind && r.has("events") && !r.has("command"))
    r.error(r.pos("events"), "hook.events: a descriptor that sets events: must set kind: too");
  const fs::path folder = fs::path(path).parent_path();
  // A program that cannot start or a library dlopen() refuses is placed at the key that named
  // it, like every other error in the file (FILE:LINE:COL).
  auto placed = [&](const char* key, LoadResult loaded) -> LoadResult {
    if (loaded.ok()) return loaded;
    r.error(r.pos(key), loaded.error());
    return errors.back().str();
  };

  if (r.has("run")) {
    std::vector<std::string> argv;
    YAML::Node run = r.node("run");
    if (run.IsScalar()) {
      // A string is split on whitespace (no shell quoting); use the list form for spaces.
      argv = split_words(config::expand_env(run.Scalar(), position_of(run, path), errors));
    } else if (run.IsSequence()) {
      r.get("run", argv);
    }
    if (argv.empty()) r.error(r.pos("run"), "hook.run: expected a program (string or argv list)");
    r.finish();
    if (errors.size() != before) return summarize(errors, before, "");
    if (kind) spec.kind = *kind;
    return placed("run", make_program_hook(std::move(spec), resolve_argv(std::move(argv), folder),
                                           kind.has_value(), r.has("events")));
  }
  if (r.has("command")) {
    std::string command;
    r.get("command", command);
    if (command.empty()) r.error(r.pos("command"), "hook.command: expected a shell command");
    // A one-shot process has no handshake to say what it is.
    if (!kind) r.error(r.pos(), "hook.kind: a command: hook must say its kind");
    std::vector<int> codes = read_exit_codes(r, path, kind.value_or(HookKind::Veto), errors);
    r.finish();
    if (errors.size() != before) return summarize(errors, before, "");
    spec.kind = *kind;
    return make_oneshot_hook(std::move(spec), std::move(command), std::move(codes));
  }
  if (r.has("library")) {
    std::string library;
    r.get("library", library);
    if (library.empty()) r.error(r.pos("library"), "hook.library: expected a path to a .so");
    r.finish();
    if (errors.size() != before) return summarize(errors, before, "");
    fs::path lib(library);
    if (lib.is_relative()) lib = (folder / lib).lexically_normal();
    if (kind) spec.kind = *kind;
    LoadResult loaded =
        make_native_hook(std::move(spec), lib.string(), kind.has_value(), r.has("events"));
    // A path from a ${VAR} (with a default, as the examples' build folders) names the variable:
    // the operator sets it, or builds the library where the default points (found in review).
    const YAML::Node written = r.node("library");
    if (!loaded.ok() && written.IsScalar() && written.Scalar().find("${") != std::string::npos)
      loaded = LoadResult(loaded.error() + " (library: is written as " +
                          config::quoted_as_written(written, library) +
                          "; check that variable, or build the library where it points)");
    return placed("library", std::move(loaded));
  }

  LoadResult declarative = read_declarative_hook(std::move(spec), kind, r, path, errors);
  if (errors.size() != before || !declarative.ok())
    return summarize(errors, before, "invalid hook file");
  return declarative;
}

}  // namespace

LoadResult load_yaml_hook(const HookFile& file, const config::HooksConfig& defaults,
                          Diagnostics& errors, AttemptedHook* attempted) {
  if (attempted) *attempted = {default_spec(file, defaults), std::nullopt};
  // yaml-cpp reports some misuse by throwing; whatever slips through becomes a load error.
  try {
    return load_yaml_hook_unguarded(file, defaults, errors, attempted);
  } catch (const std::exception& e) {
    errors.push_back({{file.path, 0, 0}, std::string("cannot load hook: ") + e.what()});
    return errors.back().str();
  }
}

LoadResult load_hook(const HookFile& file, const config::HooksConfig& defaults, Diagnostics& errors,
                     AttemptedHook* attempted) {
  if (attempted) *attempted = {default_spec(file, defaults), std::nullopt};
  if (!file.error.empty()) return file.error;
  switch (file.form) {
    case HookForm::Declarative:
      return load_yaml_hook(file, defaults, errors, attempted);
    case HookForm::Native:
      return make_native_hook(default_spec(file, defaults), file.path, false);
    case HookForm::Program:
      return make_program_hook(default_spec(file, defaults), {file.path}, false);
    case HookForm::OneShot:
      break;  // only a YAML descriptor makes one-shot hooks
  }
  return std::string("cannot load " + file.path + ": unknown hook form");
}

}  // namespace hookgate::hooks
