#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bus/wire.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"
#include "gateway/hooks/chain.hpp"
#include "gateway/hooks/discovery.hpp"
#include "gateway/router.hpp"

namespace hookgate::cli {
namespace {
namespace fs = std::filesystem;

int hooks_list(const Args& args) {
  auto cfg = load_config_or_report(args);
  if (!cfg) return 1;
  setup_logging("off", "text");
  config::Diagnostics errors;
  config::Diagnostics warnings;
  auto chain = load_hooks_for_tools(cfg->hooks, errors, warnings);
  print_warnings(warnings);
  std::printf("%-5s %-24s %-9s %-11s %-20s %s\n", "ORDER", "NAME", "KIND", "FORM", "EVENTS",
              "SOURCE");
  int order = 0;
  for (const auto& e : chain->entries()) {
    ++order;
    if (e.hook) {
      const auto& s = e.hook->spec();
      std::printf("%-5d %-24s %-9s %-11s %-20s %s\n", order, s.name.c_str(),
                  hooks::to_string(s.kind), hooks::to_string(s.form), join(s.events).c_str(),
                  display_text(e.file.path).c_str());
    } else {
      std::printf("%-5d %-24s %-9s %-11s %-20s %s\n", order, e.file.name.c_str(), "-",
                  hooks::to_string(e.file.form), "-", display_text(e.file.path).c_str());
      std::printf("      load error: %s\n", e.error.c_str());
    }
    for (const auto& o : e.file.overrides) std::printf("      overrides: %s\n", o.c_str());
  }
  std::printf("%zu loaded, %zu failed; directories searched: %s\n", chain->loaded_count(),
              chain->failed_count(), join(cfg->hooks.directories, " → ").c_str());
  // Problems no listed file carries (a directory that is not one, or cannot be read), as
  // `hookgate check` reports them.
  size_t other_problems = 0;
  for (const auto& d : errors) {
    const bool listed = std::any_of(chain->entries().begin(), chain->entries().end(),
                                    [&](const auto& e) { return e.file.path == d.where.file; });
    if (listed) continue;
    std::fprintf(stderr, "%s\n", d.str().c_str());
    ++other_problems;
  }
  return chain->failed_count() + other_problems ? 1 : 0;
}

int hooks_test(const Args& args) {
  auto event_file = args.get("event");
  if (!event_file) return fail("--event EVENT.json is required", 2);
  auto cfg = load_config_or_report(args);
  if (!cfg) return 1;
  setup_logging("off", "text");
  const auto max_bytes = static_cast<size_t>(cfg->bus.max_message_bytes);
  auto read = read_input_file(*event_file, max_bytes);
  if (!read) return fail(read.error().message);
  if (read->size() > max_bytes)  // said before it was all read: the decoder would say it too
    return fail(*event_file + ": the gateway would reject it: more than bus.max_message_bytes " +
                std::to_string(max_bytes));
  // Through the bus's own decoder: what `run` would reject (over max_message_bytes, a reserved
  // hookgate.* type) is rejected here too, not shown as delivered.
  const std::string text = std::move(read).value();
  std::vector<zmq::message_t> frames;
  frames.emplace_back(text.data(), text.size());
  auto ev =
      bus::decode_message(frames, static_cast<size_t>(cfg->bus.max_message_bytes), now_unix_ms());
  if (!ev) return fail(*event_file + ": the gateway would reject it: " + ev.error().reason);
  config::Diagnostics errors;
  auto chain = hooks::HookChain::load(cfg->hooks, errors);
  // A hook that did not load is missing from the run below (a redaction hook with a typo would
  // show its secrets "delivered"), so the dry run says so and fails, like `hooks list`.
  for (const auto& e : errors) std::fprintf(stderr, "load error: %s\n", e.str().c_str());
  int exit_code = errors.empty() ? 0 : 1;
  if (const size_t failed = chain->failed_count(); failed > 0)
    std::fprintf(stderr,
                 "hooks test: %zu hook%s failed to load; below, each is left out, or vetoes the "
                 "events it would have seen (on_error: closed)\n",
                 failed, failed == 1 ? "" : "s");

  std::printf("event %s (id %s)\n", std::string(ev->type()).c_str(), std::string(ev->id()).c_str());
  // The gateway's socket subscribes to bus.topics (prefixes of the topic frame, which the
  // publishers send as the type): an event none takes never reaches the chain.
  const auto& topics = cfg->bus.topics;
  if (std::none_of(topics.begin(), topics.end(),
                   [&](const std::string& t) { return ev->type().starts_with(t); })) {
    std::printf(
        "result: not received: bus.topics [%s] take no prefix of '%s'\n"
        "webhooks: none (nothing delivered in a dry run)\n",
        join(topics, ", ").c_str(), std::string(ev->type()).c_str());
    return exit_code;
  }
  std::vector<hooks::ChainStep> steps;
  std::vector<DiagnosticEvent> diagnostics;
  auto outcome = chain->run(
      ev.value(), [&](DiagnosticEvent d) { diagnostics.push_back(std::move(d)); }, &steps);
  int n = 0;
  // A hook that failed or timed out on this event fails the dry run too, whatever its on_error
  // made of it (found in an exploratory run: a crashing redactor said "delivered", exit 0, with
  // the password in the final event).
  size_t failed_steps = 0;
  for (const auto& s : steps) {
    if (s.result == "failed" || s.result == "timeout") ++failed_steps;
    std::printf("  %2d. %-24s %-9s %-11s %8.3f ms%s%s\n", ++n, s.hook.c_str(), s.kind.c_str(),
                s.result.c_str(), static_cast<double>(s.duration_ns) / 1e6,
                s.detail.empty() ? "" : "  ", s.detail.c_str());
  }
  if (failed_steps > 0) {
    std::fprintf(stderr, "hooks test: %zu hook%s failed on this event (see the steps)\n",
                 failed_steps, failed_steps == 1 ? "" : "s");
    exit_code = 1;
  }
  // Observers see only events that survive the chain.
  for (const auto& e : chain->entries()) {
    if (outcome.vetoed) break;
    if (e.hook && e.hook->spec().kind == hooks::HookKind::Observe && e.hook->matches(ev->type()))
      std::printf(
          "      %-24s observe   (runs after the chain, in parallel; not run in a dry run)\n",
          e.hook->spec().name.c_str());
  }
  // Diagnostics are routed like events in `run` (a webhook on `*` gets them too).
  Router router(cfg->webhooks);
  for (const auto& d : diagnostics) {
    auto to = router.matching(d.type);
    std::printf("  diagnostic %s%s%s -> webhooks: %s\n", d.type.c_str(),
                d.reason.empty() ? "" : ": ", d.reason.c_str(),
                to.empty() ? "none match" : join(to, ", ").c_str());
  }
  if (outcome.vetoed) {
    std::printf("result: vetoed by %s: %s\nwebhooks: none (nothing delivered in a dry run)\n",
                outcome.vetoed_by.c_str(), outcome.reason.c_str());
    return exit_code;
  }
  auto targets = router.matching(ev->type());
  std::printf("result: delivered\nfinal event: %s\nwebhooks: %s (nothing delivered in a dry run)\n",
              ev->to_json().c_str(), targets.empty() ? "none match" : join(targets, ", ").c_str());
  return exit_code;
}

// Scaffolds match `example.*` rather than `*`: written into a watched hook directory they go live
// at once, and an unedited template must not rewrite or veto production events.
const char* kYamlTemplate = R"(# %s: a declarative %s hook (see docs/hooks.md)
kind: %s
# The event types this hook sees: edit before use ("*" is every event).
events: ["example.*"]
%s)";

int hooks_new(const Args& args) {
  if (args.positional().size() < 2)
    return fail("usage: hookgate hooks new NAME --form yaml|program|oneshot|native", 2);
  std::string name = args.positional()[1];
  // The name becomes a file name in --dir and an identifier in the template: nothing that
  // leaves the directory (../x, /etc/x), hides the file, or breaks the generated code.
  const bool name_ok = !name.empty() && name.front() != '.' && name.front() != '-' &&
                       std::all_of(name.begin(), name.end(), is_name_char);
  if (!name_ok)
    return fail("hook name '" + name +
                    "': use letters, digits, '_', '-' and '.' only, not starting with '.' or '-' "
                    "(for example _30_tag_region)",
                2);
  std::string form = args.get_or("form", "yaml");
  // `hooks new _16_x.yaml` means the hook _16_x, not a file _16_x.yaml.yaml.
  for (std::string_view ext : {".yaml", ".yml", ".py", ".so", ".cpp"})
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
  // Discovery's rule: a name after the numeric prefix (a file `_15.yaml` would not load).
  if (!hooks::parse_hook_file_name(name))
    return fail(
        "hook name '" + name + "' has no name after its numeric prefix (for example _15_redact)",
        2);
  std::string kind = args.get_or("kind", "transform");
  if (kind != "veto" && kind != "transform" && kind != "observe")
    return fail("--kind must be veto, transform or observe", 2);
  fs::path dir = args.get_or("dir", "hooks");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir.string() + ": " + ec.message());
  // Writes a whole file or says why not: a template that was not written must not print
  // "created".
  auto write_file = [](const fs::path& file, const std::string& text) -> std::optional<int> {
    std::ofstream out(file);
    out << text;
    out.close();
    if (!out) return fail("cannot write " + file.string());
    return std::nullopt;
  };
  fs::path path;
  fs::path companion;  // a second file the scaffold wrote first (a one-shot hook's script)
  std::string body;
  if (form == "yaml") {
    path = dir / (name + ".yaml");
    std::string rest =
        kind == "veto"
            ? "when: { field: data.user, matches: \"healthcheck*\" }\nreason: health-check noise\n"
        : kind == "transform"
            ? "actions:\n  - set: { data.env: prod }\n  - remove: [data.password]\n"
            : "# observe hooks in YAML can only log\nactions:\n  - log: \"saw an event\"\n";
    char buf[1024];
    std::snprintf(buf, sizeof buf, kYamlTemplate, name.c_str(), kind.c_str(), kind.c_str(),
                  rest.c_str());
    body = buf;
  } else if (form == "program") {
    path = dir / (name + ".py");
    body =
        "#!/usr/bin/env python3\n"
        "# " +
        name +
        ": a program hook. Protocol: docs/hooks.md (one JSON line in, one out).\n"
        "import json, sys\n\n"
        "# The event types this hook sees: edit before use (\"*\" is every event).\n"
        "print(json.dumps({\"hookgate\": 1, \"kind\": \"" +
        kind +
        "\", \"events\": [\"example.*\"]}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    event = req[\"event\"]\n"
        "    data = event.get(\"data\")  # any JSON value (a string, a list), or absent\n" +
        std::string(kind == "transform"
                        ? "    if isinstance(data, dict):\n"
                          "        data[\"checked_by\"] = \"" +
                              name +
                              "\"\n"
                              "        print(json.dumps({\"id\": req[\"id\"], \"action\": "
                              "\"replace\", \"event\": event}), flush=True)\n"
                              "    else:\n"
                              "        print(json.dumps({\"id\": req[\"id\"], \"action\": "
                              "\"continue\"}), flush=True)\n"
                    : kind == "veto"
                        ? "    if isinstance(data, dict) and data.get(\"user\") == \"mallory\":\n"
                          "        print(json.dumps({\"id\": req[\"id\"], \"action\": "
                          "\"veto\", \"reason\": \"banned user\"}), flush=True)\n"
                          "    else:\n"
                          "        print(json.dumps({\"id\": req[\"id\"], \"action\": "
                          "\"continue\"}), flush=True)\n"
                        : "    print(event[\"type\"], file=sys.stderr, flush=True)\n"
                          "    print(json.dumps({\"id\": req[\"id\"], \"action\": "
                          "\"continue\"}), flush=True)\n");
  } else if (form == "native") {
    fs::path folder = dir / (name + "-src");
    fs::create_directories(folder, ec);
    if (ec) return fail("cannot create " + folder.string() + ": " + ec.message());
    path = folder / (name + ".cpp");
    // Never overwrite: neither the source nor a CMakeLists.txt already in that folder.
    for (const fs::path& existing : {path, folder / "CMakeLists.txt"})
      if (fs::exists(existing)) return fail(existing.string() + " already exists");
    std::ostringstream cmake;
    cmake
        << "cmake_minimum_required(VERSION 3.22)\nproject(" << name << " CXX)\n"
        << "set(CMAKE_CXX_STANDARD 17)\n"
        << "set(HOOKGATE_SDK_DIR \"" HOOKGATE_SDK_DIR
           "\" CACHE PATH \"folder holding hookgate_hook.hpp\")\n"
        << "add_library(" << name << " MODULE " << name << ".cpp)\n"
        << "target_include_directories(" << name << " PRIVATE ${HOOKGATE_SDK_DIR})\n"
        << "# Hidden symbols: the hook's own code (and any header-only library it uses) must not\n"
        << "# bind to the copies the gateway has loaded (spdlog, fmt, yaml-cpp, ZeroMQ, ...).\n"
        << "set_target_properties(" << name
        << " PROPERTIES PREFIX \"\" CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)\n"
        << "# Build: cmake -S . -B build && cmake --build build\n"
        << "# Install beside this folder with a rename, never by overwriting a library a running "
           "gateway has\n"
        << "# loaded: cp build/" << name << ".so ../." << name << ".so.new && mv ../." << name
        << ".so.new ../" << name << ".so\n";
    if (auto code = write_file(folder / "CMakeLists.txt", cmake.str())) return *code;
    body = "// " + name + ": a native " + kind +
           " hook. Build with the CMakeLists.txt beside this file.\n"
           "#include \"hookgate_hook.hpp\"\n\n"
           "class " +
           std::string("Hook") +
           " : public hookgate::sdk::HookBase {\n"
           " public:\n"
           "  hookgate::sdk::Result handle(std::string_view event_json) override {\n"
           "    (void)event_json;  // inspect or rewrite the CloudEvent JSON here\n"
           "    return hookgate::sdk::Result::Continue();\n"
           "  }\n"
           "};\n\n"
           "// The event types this hook sees: edit before use (\"*\" is every event).\n"
           "HOOKGATE_DEFINE_HOOK(Hook, \"" +
           kind + "\", {\"example.*\"})\n";
  } else if (form == "oneshot") {
    // A descriptor and the script it runs, kept in scripts/: an executable file directly in the
    // hook directory would itself load as a program hook. Plain sh; jq only where it is there.
    path = dir / (name + ".yaml");
    const fs::path script = dir / "scripts" / (name + ".sh");
    companion = script;
    if (fs::exists(path)) return fail(path.string() + " already exists");
    if (fs::exists(script)) return fail(script.string() + " already exists");
    fs::create_directories(script.parent_path(), ec);
    if (ec) return fail("cannot create " + script.parent_path().string() + ": " + ec.message());
    const std::string what =
        kind == "veto"
            ? "# Exit 1 vetoes the event, with stderr as the reason; exit 0 lets it through (its\n"
              "# stdout is not read). Any other exit code is a failure (on_error decides).\n"
              "event=$(cat)\n"
              "case $event in\n"
              "  *'\"user\":\"mallory\"'*) echo \"banned user\" >&2; exit 1 ;;\n"
              "esac\n"
              "exit 0\n"
        : kind == "transform"
            ? "# Print a whole event on stdout to replace it, or nothing to leave it as it is.\n"
              "event=$(cat)\n"
              "if command -v jq >/dev/null 2>&1; then\n"
              "  printf '%s\\n' \"$event\" |\n"
              "    jq -c 'if (.data | type) == \"object\" then .data.checked_by = \"" +
                  name +
                  "\" else . end'\n"
                  "else\n"
                  "  echo \"jq is not installed: the event goes on unchanged\" >&2\n"
                  "fi\n"
            : "# An observer: what it prints on stderr goes to the gateway's log.\n"
              "cat >/dev/null\n"
              "echo \"saw $HOOKGATE_EVENT_TYPE $HOOKGATE_EVENT_ID\" >&2\n";
    if (auto code = write_file(script, "#!/bin/sh\n# " + name + ": the command of the one-shot " +
                                           kind + " hook " + name +
                                           ".yaml,\n# run once per event with the event JSON on "
                                           "stdin (docs/hooks.md \"One-shot\").\n" +
                                           what))
      return *code;
    body = "# " + name + ": a one-shot " + kind + " hook: runs scripts/" + name +
           ".sh once per event (docs/hooks.md)\n"
           "kind: " +
           kind +
           "\n# The event types this hook sees: edit before use (\"*\" is every event).\n"
           "events: [\"example.*\"]\n"
           "command: sh scripts/" +
           name + ".sh\ntimeout_ms: 2000\n";
  } else {
    return fail("--form must be yaml, program, oneshot or native", 2);
  }
  if (fs::exists(path)) return fail(path.string() + " already exists");
  if (auto code = write_file(path, body)) {
    if (!companion.empty()) fs::remove(companion, ec);  // no half a scaffold left to trip a rerun
    return *code;
  }
  if (form == "program") {
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add, ec);
    if (ec) return fail("cannot make " + path.string() + " executable: " + ec.message());
  }
  std::printf("created %s\n", path.string().c_str());
  if (!companion.empty()) std::printf("created %s\n", companion.string().c_str());
  // Found in a newcomer's run: `hooks new redact` made redact.yaml, which runs after every
  // numbered hook, where a redactor is least useful.
  if (auto parsed = hooks::parse_hook_file_name(path.filename().string());
      parsed && !parsed->order_number)
    std::printf(
        "note: %s has no order number, so it runs after every numbered hook; rename it "
        "_NN_%s to place it in the chain (docs/hooks.md \"File names and run order\")\n",
        path.filename().string().c_str(), path.filename().string().c_str());
  // Install by rename: overwriting a library a running gateway has loaded can crash it.
  if (form == "native")
    std::printf(
        "build and install it (by rename, never by overwriting a loaded library):\n"
        "  cd %s && cmake -S . -B build && cmake --build build\n"
        "  cp build/%s.so ../.%s.so.new && mv ../.%s.so.new ../%s.so\n",
        path.parent_path().string().c_str(), name.c_str(), name.c_str(), name.c_str(),
        name.c_str());
  return 0;
}

}  // namespace

int cmd_hooks(const std::vector<std::string>& argv) {
  Args args(argv, {});
  const char* usage =
      "Usage: hookgate hooks list --config FILE\n"
      "       hookgate hooks test --config FILE --event EVENT.json|- (- reads standard input)\n"
      "       hookgate hooks new NAME --form yaml|program|oneshot|native [--kind "
      "veto|transform|observe] "
      "[--dir DIR]\n";
  if (auto code = check_usage(args, {"config", "event", "form", "kind", "dir"}, usage,
                              /*takes_arguments=*/true))
    return *code;
  if (args.positional().empty()) return fail(std::string("missing sub-verb\n") + usage, 2);
  const std::string& sub = args.positional()[0];
  // Each sub-verb's own options and operands: `hooks list --dir x` or `hooks test ... stray`
  // must not run as if the extra word were not there.
  struct SubVerb {
    const char* name;
    std::vector<std::string> options;
    size_t operands;
    int (*run)(const Args&);
  };
  const SubVerb sub_verbs[] = {{"list", {"config"}, 0, hooks_list},
                               {"test", {"config", "event"}, 0, hooks_test},
                               {"new", {"form", "kind", "dir"}, 1, hooks_new}};
  for (const auto& verb : sub_verbs) {
    if (sub != verb.name) continue;
    if (auto other = args.unknown(verb.options); !other.empty())
      return fail("hooks " + sub + " does not take " + other.front() + "\n" + usage, 2);
    if (args.positional().size() - 1 > verb.operands)
      return fail("hooks " + sub + ": unexpected argument '" +
                      args.positional()[verb.operands + 1] + "'\n" + usage,
                  2);
    return verb.run(args);
  }
  return fail("unknown sub-verb '" + sub + "'\n" + usage, 2);
}

}  // namespace hookgate::cli
