// The hook author's tools through the real binary (`hookgate hooks test|list|new`), and the
// quickstart gateway running every example hook of examples/quickstart/more-hooks.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/publisher.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/http_receiver.hpp"

namespace hookgate::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kSource = HOOKGATE_SOURCE_DIR;
const std::string kFixtures = kSource + "/tests/integration/fixtures";
const std::string kNativeFixture =
    std::string(HOOKGATE_INTEGRATION_NATIVE_DIR) + "/matrix_native.so";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The first line matching `pattern` (ECMAScript, whole line), or "".
std::string line_matching(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  for (const auto& line : lines_of(text))
    if (std::regex_match(line, re)) return line;
  return "";
}

// Index of the first line that starts with `prefix` (after leading blanks), or -1.
int line_index(const std::vector<std::string>& lines, const std::string& prefix) {
  for (size_t i = 0; i < lines.size(); ++i) {
    auto start = lines[i].find_first_not_of(' ');
    if (start != std::string::npos && lines[i].compare(start, prefix.size(), prefix) == 0)
      return static_cast<int>(i);
  }
  return -1;
}

std::string str(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

// Sets an environment variable for one scope (the gateway and the verbs inherit it).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Python hooks start through `#!/usr/bin/env python3`. A version manager's shim early on PATH
// (pyenv) can cost a second or more per start on a loaded machine, and every start must print its
// handshake within the hook's timeout; the hooks need only the standard library, so prefer the
// system interpreter when there is one.
class PreferSystemPython {
 public:
  PreferSystemPython() {
    if (::access("/usr/bin/python3", X_OK) != 0) return;
    const char* path = std::getenv("PATH");
    env_.emplace("PATH", "/usr/bin:" + std::string(path ? path : ""));
  }

 private:
  std::optional<ScopedEnv> env_;
};

std::string config(const std::string& dirs, const std::string& webhooks,
                   const std::string& hooks_extra = "") {
  // The verbs under test never open the bus or the spool.
  return "spool: { mode: memory }\n"
         "hooks: { directories: " +
         dirs + ", hot_reload: false" + hooks_extra + " }\nwebhooks:\n" + webhooks;
}

std::string webhook(const std::string& name, const std::string& url, const std::string& events) {
  return "  - name: " + name + "\n    url: " + url + "\n    events: " + events + "\n";
}

// ---------------------------------------------------------------------------------------------
// hookgate hooks test

TEST(HookToolsTest, HooksTestDryRunPrintsEachStepTheFinalEventAndTheWebhooks) {
  TempDir dir;
  HttpReceiver rx;
  dir.write("hooks/_10_redact.yaml",
            "kind: transform\nevents: [\"auth.*\"]\n"
            "actions:\n  - remove: [data.password]\n  - set: { data.env: prod }\n");
  dir.write("hooks/_20_drop.yaml",
            "kind: veto\nevents: [\"auth.*\"]\n"
            "when: { field: data.user, matches: \"healthcheck*\" }\nreason: health-check noise\n");
  dir.write("hooks/_30_mark.yaml", "kind: transform\nevents: [\"auth.*\"]\ncommand: sh '" +
                                       kFixtures + "/matrix_oneshot.sh' ok transform oneshot\n");
  dir.write("hooks/_40_flaky.yaml", "kind: transform\nevents: [\"user.*\"]\ncommand: sh '" +
                                        kFixtures + "/matrix_oneshot.sh' error transform x\n");
  dir.write("hooks/_90_audit.yaml", "kind: observe\nactions:\n  - log: seen\n");
  std::string cfg = dir.write(
      "hookgate.yaml", config("[./hooks]", webhook("siem", rx.url(), "[\"auth.*\"]") +
                                               webhook("crm", rx.url(), "[\"user.*\"]") +
                                               webhook("alerts", rx.url(), "[\"hookgate.*\"]")));
  std::string ann = dir.write(
      "ann.json", R"({"type":"auth.failure","data":{"user":"ann","password":"hunter2"}})");
  std::string probe = dir.write(
      "probe.json", R"({"type":"auth.failure","id":"probe-1","data":{"user":"healthcheck-7"}})");
  std::string signup = dir.write("signup.json", R"({"type":"user.created","data":{"user":"bo"}})");
  const std::string ms = R"(\s+\d+\.\d{3} ms)";  // every step says how long it took

  // Delivered: every step, in order, with its result and time; the final event; the webhooks.
  auto r = run_hookgate({"hooks", "test", "--config", cfg, "--event", ann});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, R"(event auth\.failure \(id [0-9a-f-]{36}\))"), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+1\. redact\s+transform\s+replace)" + ms), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+2\. drop\s+veto\s+continue)" + ms), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+3\. mark\s+transform\s+replace)" + ms), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+4\. flaky\s+transform\s+not-matched)" + ms), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+audit\s+observe\s+\(runs after the chain.*)"), "") << r.out;
  EXPECT_NE(line_matching(r.out, "result: delivered"), "") << r.out;
  std::string final_line = line_matching(r.out, "final event: .*");
  ASSERT_NE(final_line, "") << r.out;
  auto final_event = parse_json(final_line.substr(std::string("final event: ").size()));
  ASSERT_TRUE(final_event.IsObject()) << final_line;
  EXPECT_FALSE(final_event["data"].HasMember("password")) << final_line;
  EXPECT_EQ(str(final_event["data"], "env"), "prod");
  EXPECT_EQ(str(final_event["data"], "transformed_by"), "oneshot");
  EXPECT_NE(line_matching(r.out, R"(webhooks: siem \(nothing delivered in a dry run\))"), "")
      << r.out;

  // Vetoed: the chain stops at the veto; no webhook; observers would not run either.
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", probe});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, R"(event auth\.failure \(id probe-1\))"), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+2\. drop\s+veto\s+veto)" + ms + R"(\s+health-check noise)"),
            "")
      << r.out;
  EXPECT_EQ(line_matching(r.out, R"(\s+3\. .*)"), "") << "the chain must stop at the veto\n"
                                                      << r.out;
  EXPECT_EQ(line_matching(r.out, R"(.*observe.*)"), "") << "vetoed events reach no observer\n"
                                                        << r.out;
  // Diagnostics are routed as in `run`: the webhook on hookgate.* would get this one.
  EXPECT_NE(line_matching(r.out,
                          "  diagnostic hookgate.event.vetoed: health-check noise -> webhooks: "
                          "alerts"),
            "")
      << r.out;
  EXPECT_NE(line_matching(r.out, "result: vetoed by drop: health-check noise"), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(webhooks: none \(nothing delivered in a dry run\))"), "")
      << r.out;

  // `--event -` reads the event from a pipe (found in an exploratory run: "cannot read -").
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", "-"},
                   R"({"type":"auth.failure","id":"piped-1","data":{"user":"healthcheck-8"}})");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, R"(event auth\.failure \(id piped-1\))"), "") << r.out;
  EXPECT_NE(line_matching(r.out, "result: vetoed by drop: health-check noise"), "") << r.out;

  // A failing hook (on_error: open by default): the step, the diagnostic it would raise, and the
  // event goes on unchanged.
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", signup});
  // It goes on, as `run` would, but the dry run fails (found in an exploratory run: exit 0).
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("hooks test: 1 hook failed on this event"), std::string::npos) << r.err;
  EXPECT_NE(line_matching(r.out, R"(\s+4\. flaky\s+transform\s+failed)" + ms +
                                     R"(\s+command exited with status 3: fixture error.*)"),
            "")
      << r.out;
  // The author's dry run shows the hook's stderr; the diagnostic it would raise does not.
  EXPECT_NE(line_matching(r.out, R"(  diagnostic hookgate\.hook\.failed: command exited with )"
                                 R"(status 3 \(its stderr is in the log\).*)"),
            "")
      << r.out;
  EXPECT_NE(line_matching(r.out, R"(webhooks: crm \(nothing delivered in a dry run\))"), "")
      << r.out;

  // What the bus would reject is rejected here too (found in review: shown as delivered).
  std::string forged =
      dir.write("forged.json", R"({"type":"hookgate.delivery.dead","data":{"webhook":"siem"}})");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", forged});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the gateway would reject it: "), std::string::npos) << r.err;
  // A hand-written event file's mistake is placed by line and column, a missing file says why
  // (found in review: "at offset 24", and a bare "cannot read").
  std::string typo = dir.write("typo.json", "{\n  \"type\": \"auth.failure\",\n  data: {}\n}\n");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", typo});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("invalid JSON at line 3, column 3: "), std::string::npos) << r.err;
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", typo + ".missing"});
  EXPECT_NE(r.err.find("cannot read " + typo + ".missing: No such file or directory"),
            std::string::npos)
      << r.err;

  // A dry run: the webhook endpoints (live all along) got nothing. The verb has exited, so
  // nothing can still be on its way.
  EXPECT_EQ(rx.count(), 0u);
}

// ---------------------------------------------------------------------------------------------
// hookgate hooks list

TEST(HookToolsTest, HooksListShowsOrderKindFormSourceOverridesAndLoadErrors) {
  TempDir dir;
  dir.write("builtin/_10_tag.yaml", "kind: transform\nactions:\n  - set: { data.tag: builtin }\n");
  dir.write("user/_10_tag.yaml", "kind: transform\nactions:\n  - set: { data.tag: user }\n");
  dir.write("hooks/_15_tag.yaml", "kind: transform\nactions:\n  - set: { data.tag: ws }\n");
  fs::copy_file(kNativeFixture, dir / "hooks/_5_enrich.so");
  fs::copy_file(kFixtures + "/matrix_program.sh", dir / "hooks/_9_gate.sh");
  fs::permissions(dir / "hooks/_9_gate.sh", fs::perms::owner_all, fs::perm_options::add);
  dir.write("hooks/_100_notify.yaml",
            "kind: veto\nevents: [\"deploy.*\", \"auth.*\"]\ncommand: sh notify.sh\n");
  dir.write("hooks/_20_broken.yaml", "kind: transform\nactions: [ { set: \n");
  // A descriptor that fails to load lists as the form its keys name (found in review: shown as
  // declarative, the guess from its file name).
  dir.write("hooks/_50_scan.yaml", "kind: veto\nrun: ./no-such-program\n");
  dir.write("hooks/README.txt", "not a hook\n");
  std::string cfg = dir.write("hookgate.yaml", config("[./builtin, ./user, ./hooks]", "  []\n"));

  auto r = run_hookgate({"hooks", "list", "--config", cfg});
  EXPECT_EQ(r.exit_code, 1) << "a hook failed to load\n" << r.out << r.err;
  auto lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 8u) << r.out;
  EXPECT_NE(line_matching(r.out, R"(ORDER\s+NAME\s+KIND\s+FORM\s+EVENTS\s+SOURCE)"), "") << r.out;
  const std::string ws = (dir / "hooks").string();
  // Numeric order (5, 9, 15, 20, 50, 100), whatever the directory and the form.
  int enrich = line_index(lines, "1     enrich");
  int gate = line_index(lines, "2     gate");
  int tag = line_index(lines, "3     tag");
  int broken = line_index(lines, "4     broken");
  int scan = line_index(lines, "5     scan");
  int notify = line_index(lines, "6     notify");
  ASSERT_TRUE(enrich > 0 && enrich < gate && gate < tag && tag < broken && broken < scan &&
              scan < notify)
      << r.out;
  EXPECT_TRUE(std::regex_match(
      lines[enrich],
      std::regex(R"(1\s+enrich\s+transform\s+native\s+\*\s+)" + ws + "/_5_enrich.so")))
      << lines[enrich];
  EXPECT_TRUE(std::regex_match(
      lines[gate], std::regex(R"(2\s+gate\s+transform\s+program\s+\*\s+)" + ws + "/_9_gate.sh")))
      << lines[gate];
  EXPECT_TRUE(std::regex_match(
      lines[tag],
      std::regex(R"(3\s+tag\s+transform\s+declarative\s+\*\s+)" + ws + "/_15_tag.yaml")))
      << lines[tag];
  // The workspace tag overrides the user's, which overrode the built-in one: both are listed.
  EXPECT_EQ(lines[tag + 1], "      overrides: " + (dir / "builtin/_10_tag.yaml").string());
  EXPECT_EQ(lines[tag + 2], "      overrides: " + (dir / "user/_10_tag.yaml").string());
  EXPECT_TRUE(std::regex_match(lines[broken], std::regex(R"(4\s+broken\s+-\s+declarative\s+-\s+)" +
                                                         ws + "/_20_broken.yaml")))
      << lines[broken];
  EXPECT_NE(lines[broken + 1].find("load error: " + ws + "/_20_broken.yaml:"), std::string::npos)
      << lines[broken + 1];
  EXPECT_TRUE(std::regex_match(
      lines[notify], std::regex(R"(6\s+notify\s+veto\s+oneshot\s+deploy\.\*,auth\.\*\s+)" + ws +
                                "/_100_notify.yaml")))
      << lines[notify];
  EXPECT_TRUE(std::regex_match(
      lines[scan], std::regex(R"(5\s+scan\s+-\s+program\s+-\s+)" + ws + "/_50_scan.yaml")))
      << lines[scan];
  EXPECT_EQ(line_index(lines, "README"), -1);
  EXPECT_EQ(lines.back(),
            "4 loaded, 2 failed; directories searched: " + (dir / "builtin").string() + " → " +
                (dir / "user").string() + " → " + ws);
}

TEST(HookToolsTest, HooksListReportsADirectoryThatIsNotOne) {
  TempDir dir;
  dir.write("hooks", "a file where a folder was meant\n");
  std::string cfg = dir.write("hookgate.yaml", config("[./hooks]", "  []\n"));
  auto list = run_hookgate({"hooks", "list", "--config", cfg});
  EXPECT_EQ(list.exit_code, 1) << list.out << list.err;
  EXPECT_NE(list.err.find((dir / "hooks").string()), std::string::npos) << list.err;
  // The same verdict as `hookgate check`.
  EXPECT_EQ(run_hookgate({"check", "--config", cfg}).exit_code, 1);
}

// Found in an SRE pass: a hook file named with a newline was printed raw, so `check`'s one
// problem per FILE:LINE:COL line became two lines; in review, so was a webhook problem quoting a
// CIDR item with a line break.
TEST(HookToolsTest, CheckKeepsAHookFileNamedWithANewlineOnOneLine) {
  TempDir dir;
  std::filesystem::create_directory(dir / "hooks");
  dir.write("hooks/_10_a\nb.yaml", "kind: transform\nactions:\n  - remove: [data.x]\n");
  std::string cfg = dir.write("hookgate.yaml",
                              config("[./hooks]", webhook("w", "http://127.0.0.1:9/", "[\"*\"]") +
                                                      "    deny_cidrs: [\"10.0.0.0/8\\nx\"]\n"));
  auto check = run_hookgate({"check", "--config", cfg});
  EXPECT_EQ(check.exit_code, 1) << check.err;
  EXPECT_EQ(check.err.find("_10_a\nb"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("_10_a\\nb"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("10.0.0.0/8\\nx"), std::string::npos) << check.err;
  for (size_t start = 0, end; (end = check.err.find('\n', start)) != std::string::npos;
       start = end + 1) {
    const std::string line = check.err.substr(start, end - start);
    EXPECT_TRUE(line.starts_with(dir.path().string()) || line.find("problem") != std::string::npos)
        << "a line that is not a problem of its own: " << line;
  }
}

// ---------------------------------------------------------------------------------------------
// hookgate hooks new

TEST(HookToolsTest, HooksNewYamlAndProgramScaffoldsLoadAndWork) {
  PreferSystemPython python;
  TempDir dir;
  const std::string hooks = (dir / "hooks").string();
  auto made = run_hookgate({"hooks", "new", "_10_tidy", "--form", "yaml", "--dir", hooks});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_EQ(made.out, "created " + hooks + "/_10_tidy.yaml\n");
  // Found in a newcomer's run: an unnumbered scaffold runs after every numbered hook, unsaid.
  auto unnumbered = run_hookgate({"hooks", "new", "late", "--form", "yaml", "--dir", dir.path()});
  ASSERT_EQ(unnumbered.exit_code, 0) << unnumbered.out << unnumbered.err;
  EXPECT_NE(unnumbered.out.find("note: late.yaml has no order number"), std::string::npos)
      << unnumbered.out;
  made = run_hookgate(
      {"hooks", "new", "_20_gate", "--form", "program", "--kind", "veto", "--dir", hooks});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_EQ(made.out, "created " + hooks + "/_20_gate.py\n");
  EXPECT_EQ(read_text(hooks + "/_20_gate.py").rfind("#!/usr/bin/env python3\n", 0), 0u);
  // Scaffolds never overwrite.
  made = run_hookgate({"hooks", "new", "_10_tidy", "--form", "yaml", "--dir", hooks});
  EXPECT_NE(made.exit_code, 0);

  std::string cfg = dir.write("hookgate.yaml", config("[./hooks]", "  []\n"));
  auto list = run_hookgate({"hooks", "list", "--config", cfg});
  EXPECT_EQ(list.exit_code, 0) << list.out << list.err;
  EXPECT_NE(line_matching(list.out, R"(1\s+tidy\s+transform\s+declarative\s+example\.\*\s+.*)"), "")
      << list.out;
  EXPECT_NE(line_matching(list.out, R"(2\s+gate\s+veto\s+program\s+example\.\*\s+.*)"), "")
      << list.out;

  // Unedited, they leave every other event alone: a scaffold written into a watched hook
  // directory goes live at once.
  std::string other = dir.write(
      "other.json", R"({"type":"auth.failure","data":{"user":"mallory","password":"x"}})");
  auto r = run_hookgate({"hooks", "test", "--config", cfg, "--event", other});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string untouched = line_matching(r.out, "final event: .*");
  ASSERT_NE(untouched, "") << r.out;
  auto unchanged = parse_json(untouched.substr(13));
  EXPECT_EQ(str(unchanged["data"], "password"), "x") << untouched;
  EXPECT_FALSE(unchanged["data"].HasMember("env")) << untouched;

  // They work: the YAML transform tags and redacts, the Python veto stops user mallory.
  std::string ok = dir.write(
      "ok.json", R"({"type":"example.login","data":{"user":"ann","password":"hunter2"}})");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", ok});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string final_line = line_matching(r.out, "final event: .*");
  ASSERT_NE(final_line, "") << r.out;
  auto ev = parse_json(final_line.substr(13));
  EXPECT_EQ(str(ev["data"], "env"), "prod") << final_line;
  EXPECT_FALSE(ev["data"].HasMember("password")) << final_line;
  EXPECT_NE(line_matching(r.out, R"(\s+2\. gate\s+veto\s+continue.*)"), "") << r.out;

  // Found in review: data that is not an object (any JSON value may be) crashed the scaffold.
  std::string text = dir.write("text.json", R"({"type":"example.login","data":"just a string"})");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", text});
  // The YAML scaffold's `set data.env` cannot apply to a string (a failure under on_error: open,
  // which fails the dry run); the Python one lets it through.
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, R"(\s+1\. tidy\s+transform\s+failed.*)"), "") << r.out;
  EXPECT_NE(line_matching(r.out, R"(\s+2\. gate\s+veto\s+continue.*)"), "") << r.out;

  std::string bad = dir.write("bad.json", R"({"type":"example.login","data":{"user":"mallory"}})");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", bad});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, "result: vetoed by gate: banned user"), "") << r.out;
}

// `--form oneshot`: a descriptor and its script in scripts/ (not loaded as a program hook); the
// veto stops user mallory, the observer lets everything through.
TEST(HookToolsTest, HooksNewOneShotScaffoldsLoadAndWork) {
  TempDir dir;
  const std::string hooks = (dir / "hooks").string();
  auto made = run_hookgate(
      {"hooks", "new", "_20_gate", "--form", "oneshot", "--kind", "veto", "--dir", hooks});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_EQ(made.out,
            "created " + hooks + "/_20_gate.yaml\ncreated " + hooks + "/scripts/_20_gate.sh\n");
  EXPECT_EQ(read_text(hooks + "/scripts/_20_gate.sh").rfind("#!/bin/sh\n", 0), 0u);
  made = run_hookgate(
      {"hooks", "new", "_30_seen", "--form", "oneshot", "--kind", "observe", "--dir", hooks});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  made = run_hookgate(
      {"hooks", "new", "_20_gate", "--form", "oneshot", "--kind", "veto", "--dir", hooks});
  EXPECT_NE(made.exit_code, 0);  // never overwrites

  std::string cfg = dir.write("hookgate.yaml", config("[./hooks]", "  []\n"));
  auto list = run_hookgate({"hooks", "list", "--config", cfg});
  EXPECT_EQ(list.exit_code, 0) << list.out << list.err;
  EXPECT_NE(line_matching(list.out, R"(1\s+gate\s+veto\s+oneshot\s+example\.\*\s+.*)"), "")
      << list.out;
  EXPECT_NE(line_matching(list.out, R"(2\s+seen\s+observe\s+oneshot\s+example\.\*\s+.*)"), "")
      << list.out;
  std::string bad = dir.write("bad.json", R"({"type":"example.login","data":{"user":"mallory"}})");
  auto r = run_hookgate({"hooks", "test", "--config", cfg, "--event", bad});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, "result: vetoed by gate: banned user"), "") << r.out;
  std::string ok = dir.write("ok.json", R"({"type":"example.login","data":"just a string"})");
  r = run_hookgate({"hooks", "test", "--config", cfg, "--event", ok});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, "result: delivered"), "") << r.out;
}

// Found in review: a hook that failed to load (a typo in a redaction hook) was printed on stdout
// and the dry run went on without it to "result: delivered", exit 0, so it passed a CI gate; and
// an event bus.topics leave out was shown delivered although the gateway never receives it.
TEST(HookToolsTest, HooksTestFailsWhenAHookDidNotLoadAndHonoursBusTopics) {
  TempDir dir;
  dir.write("hooks/_10_redact.yaml",
            "kind: transform\nactions:\n  - sett: {data.password: redacted}\n");
  std::string cfg = dir.write("hookgate.yaml", config("[./hooks]", "  []\n"));
  std::string login = dir.write(
      "login.json", R"({"type":"auth.failure","data":{"user":"ann","password":"hunter2"}})");
  auto r = run_hookgate({"hooks", "test", "--config", cfg, "--event", login});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("load error: " + (dir / "hooks/_10_redact.yaml").string() + ":3:"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 hook failed to load; below, each is left out"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("load error"), std::string::npos) << r.out;

  std::string topics = dir.write(
      "topics.yaml", "bus: { topics: [\"user.\"] }\n" +
                         config("[]", webhook("siem", "http://127.0.0.1:9/x", "[\"*\"]")));
  r = run_hookgate({"hooks", "test", "--config", topics, "--event", login});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: not received: bus.topics [user.] take no prefix of 'auth.failure'"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("result: delivered"), std::string::npos) << r.out;
}

bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(HookToolsTest, HooksNewNativeScaffoldBuildsWithCMakeAndLoads) {
  if (!have_tool("cmake") || !(have_tool("c++") || have_tool("g++")))
    GTEST_SKIP() << "cmake and a C++ compiler are needed to build the native scaffold";
  TempDir dir;
  const std::string src = (dir / "src").string();
  auto made = run_hookgate(
      {"hooks", "new", "_30_stamp", "--form", "native", "--kind", "transform", "--dir", src});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const fs::path project = fs::path(src) / "_30_stamp-src";
  EXPECT_NE(made.out.find("created " + (project / "_30_stamp.cpp").string()), std::string::npos)
      << made.out;
  // The scaffold finds the SDK through the folder compiled into this very binary.
  std::string cmakelists = read_text(project / "CMakeLists.txt");
  EXPECT_NE(cmakelists.find("set(HOOKGATE_SDK_DIR \"" + kSource + "/gateway/hooks/sdk\""),
            std::string::npos)
      << cmakelists;

  const fs::path build = dir / "build";
  const std::string log = (dir / "cmake.log").string();
  std::string cmd = "cmake -S '" + project.string() + "' -B '" + build.string() +
                    "' -DCMAKE_BUILD_TYPE=Release >'" + log + "' 2>&1 && cmake --build '" +
                    build.string() + "' >>'" + log + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_text(log);
  ASSERT_TRUE(fs::exists(build / "_30_stamp.so")) << read_text(log);
  fs::create_directories(dir / "hooks");
  fs::copy_file(build / "_30_stamp.so", dir / "hooks/_30_stamp.so");

  std::string cfg = dir.write("hookgate.yaml", config("[./hooks]", "  []\n"));
  auto list = run_hookgate({"hooks", "list", "--config", cfg});
  EXPECT_EQ(list.exit_code, 0) << list.out << list.err;
  EXPECT_NE(
      line_matching(list.out, R"(1\s+stamp\s+transform\s+native\s+example\.\*\s+.*/_30_stamp\.so)"),
      "")
      << list.out;
  std::string ev = dir.write("ev.json", R"({"type":"example.signup","data":{"user":"ann"}})");
  auto r = run_hookgate({"hooks", "test", "--config", cfg, "--event", ev});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(line_matching(r.out, R"(\s+1\. stamp\s+transform\s+continue.*)"), "") << r.out;
  EXPECT_NE(line_matching(r.out, "result: delivered"), "") << r.out;
}

// ---------------------------------------------------------------------------------------------
// The quickstart with every example hook (examples/quickstart/more-hooks)

const fs::path kQuickstart = fs::path(kSource) / "examples/quickstart";

// Every example file appears verbatim in docs/hooks.md, so the guide shows what the test runs.
TEST(HookToolsTest, HooksGuideShowsEveryMoreHooksExampleVerbatim) {
  std::string guide = read_text(fs::path(kSource) / "docs/hooks.md");
  ASSERT_FALSE(guide.empty());
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kQuickstart / "more-hooks")) {
    if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
    ++files;
    std::string text = read_text(entry.path());
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_NE(guide.find(text), std::string::npos)
        << entry.path().string() << " is not shown verbatim in docs/hooks.md";
  }
  EXPECT_GE(files, 15);
}

TEST(HookToolsTest, QuickstartRunsEveryExampleHook) {
  PreferSystemPython python;
  TempDir dir;
  HttpReceiver rx;
  GatewayProcess gw(dir);
  // The config's relative hook directories resolve beside the config file: link them there.
  fs::create_directory_symlink(kQuickstart / "hooks", dir / "hooks");
  fs::create_directory_symlink(kQuickstart / "more-hooks", dir / "more-hooks");
  ScopedEnv native("HOOKGATE_NATIVE_HOOKS", HOOKGATE_MORE_HOOKS_NATIVE_DIR);
  ScopedEnv receiver_port("HOOKGATE_RECEIVER_PORT", std::to_string(rx.port()));
  ScopedEnv spool("HOOKGATE_SPOOL", (dir / "spool.db").string());
  // The ports through the harness's own variables: a start that finds a port taken retries on
  // new ones, which variables set here once would not follow.
  std::string config = read_text(kQuickstart / "hookgate-more-hooks.yaml");
  for (const auto& [ours, harness] : {std::pair{"HOOKGATE_BUS_PORT", "HG_BUS_PORT"},
                                      std::pair{"HOOKGATE_ADMIN_PORT", "HG_ADMIN_PORT"}}) {
    const size_t at = config.find(ours);
    ASSERT_NE(at, std::string::npos) << ours;
    config.replace(at, std::strlen(ours), harness);
  }
  ASSERT_TRUE(gw.start(config)) << gw.log();
  ASSERT_TRUE(gw.wait_for_log("hooks: 12 loaded, 0 failed to load", 5s)) << gw.log();

  auto pub = bus::Publisher::connect({.endpoints = {gw.bus_endpoint()}, .source = "qs-test"});
  ASSERT_TRUE(pub);
  ASSERT_TRUE(pub.value()->wait_for_subscriber(10s));
  auto publish = [&](const std::string& type, const std::string& data) {
    EXPECT_TRUE(pub.value()->publish(type, data));
    return pub.value()->last_id();
  };
  const std::string login =
      publish("auth.failure", R"({"user":"ann","ip":"10.1.2.3","password":"hunter2"})");
  const std::string blocked = publish("auth.failure", R"({"user":"mallory","ip":"10.1.2.4"})");
  const std::string test_signup =
      publish("user.created", R"({"user":"t1","email":"t1@test.example.com"})");
  const std::string big =
      publish("user.created", R"({"user":"bo","bio":")" + std::string(5000, 'x') + "\"}");
  const std::string no_ticket = publish("deploy.finished", R"({"service":"api"})");
  const std::string deploy = publish("deploy.finished", R"({"service":"api","ticket":"OPS-42"})");

  // Two deliveries and four vetoes, each announced by a hookgate.event.vetoed diagnostic.
  auto find = [&](const std::string& type, const std::string& id) -> std::optional<std::string> {
    for (const auto& r : rx.requests()) {
      auto d = parse_json(r.body);
      if (str(d, "type") != type) continue;
      if (str(d, "id") == id || (d.HasMember("data") && str(d["data"], "event_id") == id))
        return r.body;
    }
    return std::nullopt;
  };
  for (const auto& [type, id] :
       std::vector<std::pair<std::string, std::string>>{{"auth.failure", login},
                                                        {"deploy.finished", deploy},
                                                        {"hookgate.event.vetoed", blocked},
                                                        {"hookgate.event.vetoed", test_signup},
                                                        {"hookgate.event.vetoed", big},
                                                        {"hookgate.event.vetoed", no_ticket}}) {
    ASSERT_TRUE(wait_until([&] { return find(type, id).has_value(); }, 15s))
        << type << " " << id << " never arrived\n"
        << gw.log();
  }

  // One delivered login, changed by hooks of every form on the way.
  auto ev = parse_json(*find("auth.failure", login));
  const auto& data = ev["data"];
  EXPECT_FALSE(data.HasMember("password"));       // hooks/_10_redact.yaml
  EXPECT_EQ(str(data, "source_ip"), "10.1.2.3");  // hooks/_10_redact.yaml
  EXPECT_EQ(str(data, "region"), "eu-west-1");    // _12_tag_region.yaml (declarative)
  EXPECT_EQ(str(data, "site"), "lab-1");          // _35_tag_site.yaml (native C++)
  EXPECT_FALSE(str(data, "host").empty());        // _35_tag_site.yaml (native C++)
  EXPECT_EQ(str(data, "network"), "private");     // _45_classify_ip.py (Python)
  EXPECT_EQ(str(ev, "severity"), "warning");      // _60_severity.yaml (shell one-shot)
  EXPECT_EQ(str(ev, "id"), login);
  auto deployed = parse_json(*find("deploy.finished", deploy));
  EXPECT_EQ(str(deployed, "severity"), "info");
  EXPECT_EQ(str(deployed["data"], "site"), "lab-1");

  // Each veto came from the hook (and form) meant to make it.
  auto vetoed_by = [&](const std::string& id) {
    auto d = parse_json(*find("hookgate.event.vetoed", id));
    return str(d["data"], "hook") + ": " + str(d["data"], "reason");
  };
  EXPECT_EQ(vetoed_by(blocked), "deny_users: user mallory is blocked");     // Python
  EXPECT_EQ(vetoed_by(test_signup), "drop_test_accounts: test account");    // declarative
  EXPECT_NE(vetoed_by(big).find("max_size: event is "), std::string::npos)  // native C++
      << vetoed_by(big);
  EXPECT_NE(vetoed_by(big).find("over the 4096-byte limit"), std::string::npos);
  EXPECT_EQ(vetoed_by(no_ticket),  // shell one-shot
            "require_ticket: deploy of qs-test has no change ticket (data.ticket like OPS-42)");

  // The observers saw the delivered events: the declarative one logs, the Python one writes its
  // audit line to stderr, which the gateway logs under the hook's name.
  EXPECT_TRUE(gw.wait_for_log("hook log_deploys: deploy finished (event " + deploy, 10s))
      << gw.log();
  EXPECT_TRUE(gw.wait_for_log(
      "hook audit_trail stderr: audit {\"hook\": \"audit_trail\", \"id\": \"" + login, 10s))
      << gw.log();
  for (const auto& r : rx.requests()) {
    EXPECT_EQ(str(parse_json(r.body), "type").find("hookgate.hook."), std::string::npos)
        << "no example hook may fail: " << r.body;
  }
}

}  // namespace
}  // namespace hookgate::testing
