// Every hook form × kind × outcome × failure policy, through the real binary: what a webhook
// receiver gets (delivered or not, unchanged or transformed) and which diagnostics reach a webhook
// subscribed to hookgate.*. One gateway process serves the whole matrix: each cell is a hook of its
// own that only matches the cell's own event type (m.<cell>), so cells cannot disturb each other.
//
// "Nothing else arrived" is checked without sleeping: both webhooks deliver one request at a time
// (max_in_flight: 1) from a FIFO queue, so once a fence event published after a cell's events has
// arrived, every delivery or diagnostic those events caused on the ingest thread has arrived too.
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bus/publisher.hpp"
#include "gateway/common/clock.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/http_receiver.hpp"

namespace hookgate::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kFixtures = std::string(HOOKGATE_SOURCE_DIR) + "/tests/integration/fixtures";
const std::string kNativeFixture =
    std::string(HOOKGATE_INTEGRATION_NATIVE_DIR) + "/matrix_native.so";

enum class Form { Declarative, Program, OneShot, Native };
enum class Kind { Veto, Transform, Observe };
enum class Outcome { Ok, Error, Crash, Hang, Garbage };
enum class Policy { Open, Closed };

const char* name_of(Form f) {
  switch (f) {
    case Form::Declarative:
      return "declarative";
    case Form::Program:
      return "program";
    case Form::OneShot:
      return "oneshot";
    case Form::Native:
      return "native";
  }
  return "?";
}
const char* name_of(Kind k) {
  switch (k) {
    case Kind::Veto:
      return "veto";
    case Kind::Transform:
      return "transform";
    case Kind::Observe:
      return "observe";
  }
  return "?";
}
const char* name_of(Outcome o) {
  switch (o) {
    case Outcome::Ok:
      return "ok";
    case Outcome::Error:
      return "error";
    case Outcome::Crash:
      return "crash";
    case Outcome::Hang:
      return "hang";
    case Outcome::Garbage:
      return "garbage";
  }
  return "?";
}
const char* name_of(Policy p) {
  return p == Policy::Open ? "open" : "closed";
}
// For gtest's messages ("where GetParam() = (program, veto, hang, closed)").
std::ostream& operator<<(std::ostream& os, Form f) {
  return os << name_of(f);
}
std::ostream& operator<<(std::ostream& os, Kind k) {
  return os << name_of(k);
}
std::ostream& operator<<(std::ostream& os, Outcome o) {
  return os << name_of(o);
}
std::ostream& operator<<(std::ostream& os, Policy p) {
  return os << name_of(p);
}

constexpr Form kForms[] = {Form::Declarative, Form::Program, Form::OneShot, Form::Native};
constexpr Kind kKinds[] = {Kind::Veto, Kind::Transform, Kind::Observe};
constexpr Outcome kOutcomes[] = {Outcome::Ok, Outcome::Error, Outcome::Crash, Outcome::Hang,
                                 Outcome::Garbage};
constexpr Policy kPolicies[] = {Policy::Open, Policy::Closed};

// Timeouts: a hanging hook is cut off after kHangTimeoutMs (observers: kObserverHangTimeoutMs, long
// enough that the event's delivery clearly comes first, even on a loaded CI machine; the native
// fixture hangs for 5 s). Other cells get a roomy timeout so a loaded CI machine cannot turn them
// into timeouts.
constexpr int kHangTimeoutMs = 300;
constexpr int kObserverHangTimeoutMs = 3000;
constexpr int kRoomyTimeoutMs = 3000;

struct Cell {
  Form form;
  Kind kind;
  Outcome outcome;
  Policy policy;

  std::string name() const {
    return std::string(name_of(form)) + "_" + name_of(kind) + "_" + name_of(outcome) + "_" +
           name_of(policy);
  }
  std::string event_type() const { return "m." + name(); }
  // A veto hook's replacement is not looked into (docs/hooks.md): a one-shot veto's stdout and a
  // native veto's Replace are ignored, counted as continue. (A program's garbage line is not an
  // answer at all, so it stays a failure.)
  bool replacement_ignored() const {
    return kind == Kind::Veto && outcome == Outcome::Garbage &&
           (form == Form::OneShot || form == Form::Native);
  }
  bool failure() const { return outcome != Outcome::Ok && !replacement_ignored(); }
  // The event does not reach the receiver: a closed failure of a sequential hook.
  bool dropped() const { return failure() && kind != Kind::Observe && policy == Policy::Closed; }
  int timeout_ms() const {
    if (outcome != Outcome::Hang) return kRoomyTimeoutMs;
    return kind == Kind::Observe ? kObserverHangTimeoutMs : kHangTimeoutMs;
  }
};

// Why a combination cannot happen, or nullopt when the cell is meaningful.
std::optional<std::string> meaningless(const Cell& c) {
  if (c.form == Form::Declarative) {
    if (c.outcome == Outcome::Crash || c.outcome == Outcome::Hang)
      return "declarative hooks run in memory inside the gateway: they cannot crash or hang";
    if (c.kind == Kind::Veto && c.outcome != Outcome::Ok)
      return "a declarative veto is a condition: it has no actions that could fail";
    if (c.kind == Kind::Observe && c.outcome != Outcome::Ok)
      return "declarative observers can only log: they cannot fail";
  }
  return std::nullopt;
}

std::vector<Cell> all_cells() {
  std::vector<Cell> out;
  for (Form f : kForms)
    for (Kind k : kKinds)
      for (Outcome o : kOutcomes)
        for (Policy p : kPolicies) out.push_back({f, k, o, p});
  return out;
}

// The part of a cell's descriptor that makes the hook do its thing.
std::string hook_body(const Cell& c) {
  const std::string kind = name_of(c.kind);
  const std::string outcome = name_of(c.outcome);
  switch (c.form) {
    case Form::Declarative:
      if (c.kind == Kind::Veto)
        return "when: { field: data.user, equals: mallory }\nreason: banned user mallory\n";
      if (c.kind == Kind::Observe) return "actions:\n  - log: observed\n";
      if (c.outcome == Outcome::Error)  // data.user is a string: nothing can be set inside it
        return "actions:\n  - set: { data.user.name: x }\n";
      if (c.outcome == Outcome::Garbage)  // an envelope no receiver could accept
        return "actions:\n  - set: { specversion: \"0.3\" }\n";
      return "when: { not: { field: data.skip, equals: true } }\n"
             "actions:\n  - set: { data.transformed_by: declarative }\n";
    case Form::Program:
      return "run: [sh, " + kFixtures + "/matrix_program.sh, " + outcome + ", " + kind +
             ", program]\n";
    case Form::OneShot:
      return "command: sh '" + kFixtures + "/matrix_oneshot.sh' " + outcome + " " + kind +
             " oneshot\nveto_exit_codes: [1]\n";
    case Form::Native:
      return "library: " + kNativeFixture + "\nconfig: { outcome: " + outcome + ", kind: " + kind +
             ", label: native }\n";
  }
  return "";
}

std::string descriptor(const Cell& c) {
  return "kind: " + std::string(name_of(c.kind)) + "\nevents: [\"" + c.event_type() +
         "\"]\ntimeout_ms: " + std::to_string(c.timeout_ms()) + "\non_error: " + name_of(c.policy) +
         "\n" + hook_body(c);
}

// What the failure reason of a failing cell says.
std::string expected_reason(const Cell& c) {
  switch (c.outcome) {
    case Outcome::Ok:
      return "";
    case Outcome::Error:
      if (c.form == Form::Declarative) return "a non-object value is in the way";
      if (c.form == Form::Program) return "hook process exited with status 1";
      if (c.form == Form::OneShot) return "command exited with status 3 (its stderr is in the log)";
      return "fixture error";
    case Outcome::Crash:
      if (c.form == Form::Native)
        return "handle() crashed; hook quarantined after a crash (SIGSEGV)";
      return c.form == Form::Program ? "hook process killed by signal 9"
                                     : "command killed by signal 9";
    case Outcome::Hang:
      if (c.form == Form::Program)
        return "timed out after " + std::to_string(c.timeout_ms()) + " ms waiting for the answer";
      if (c.form == Form::OneShot) return "command did not finish within";
      return "handle() did not return within";
    case Outcome::Garbage:
      if (c.form == Form::Declarative) return "actions produced an invalid event";
      if (c.form == Form::OneShot) return "garbage output";
      return "garbage answer";
  }
  return "";
}

std::string str(const rapidjson::Value& obj, const char* key) {
  if (!obj.IsObject()) return "";
  auto it = obj.FindMember(key);
  return it != obj.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

// The value of one Prometheus series ("name{labels}"), or -1 when absent.
double metric(const std::string& metrics, const std::string& series) {
  auto pos = metrics.find("\n" + series + " ");
  if (pos == std::string::npos) return -1;
  return std::stod(metrics.substr(pos + series.size() + 2));
}

// A webhook request as the receiver saw it, parsed.
struct Seen {
  HttpReceiver::Request request;
  std::string type;
  std::string id;        // the delivered event's id
  std::string event_id;  // diagnostics: the triggering event's id
};

std::vector<Seen> seen(const HttpReceiver& rx) {
  std::vector<Seen> out;
  for (auto& r : rx.requests()) {
    auto d = parse_json(r.body);
    Seen s{r, str(d, "type"), str(d, "id"), ""};
    if (d.IsObject() && d.HasMember("data")) s.event_id = str(d["data"], "event_id");
    out.push_back(std::move(s));
  }
  return out;
}

// Deliveries of event `id` (receiver of events).
std::vector<Seen> deliveries_of(const HttpReceiver& rx, const std::string& id) {
  std::vector<Seen> out;
  for (auto& s : seen(rx))
    if (s.id == id) out.push_back(std::move(s));
  return out;
}

// Diagnostics about event `id` (receiver of hookgate.*).
std::vector<Seen> diagnostics_of(const HttpReceiver& rx, const std::string& id) {
  std::vector<Seen> out;
  for (auto& s : seen(rx))
    if (s.event_id == id) out.push_back(std::move(s));
  return out;
}

std::string dump(const std::vector<Seen>& items) {
  std::string out;
  for (const auto& s : items) out += "  " + s.request.body + "\n";
  return out.empty() ? "  (none)\n" : out;
}

std::string config(const std::string& events_url, const std::string& diag_url) {
  return "bus: { bind: \"tcp://127.0.0.1:${HG_BUS_PORT}\" }\n"
         "admin: { listen: \"127.0.0.1:${HG_ADMIN_PORT}\" }\n"
         "spool: { mode: memory }\n"
         "log: { level: info }\n"
         "hooks: { directories: [./hooks], hot_reload: false, observer_threads: 4 }\n"
         "webhooks:\n"
         "  - name: events\n    url: " +
         events_url +
         "\n    events: [\"m.*\", \"order.*\", \"crash.*\", \"fence.pass\"]\n    max_in_flight: 1\n"
         "  - name: diagnostics\n    url: " +
         diag_url + "\n    events: [\"hookgate.*\"]\n    max_in_flight: 1\n";
}

// A gateway with a set of hooks, a receiver for events and one for diagnostics, and a publisher.
class Rig {
 public:
  Rig() : gw_(dir_) {}

  const TempDir& dir() const { return dir_; }
  GatewayProcess& gateway() { return gw_; }
  HttpReceiver& events() { return events_; }
  HttpReceiver& diagnostics() { return diagnostics_; }

  // Starts the gateway on ./hooks and connects the publisher; false with the reason in `why`.
  bool start(std::string& why) {
    dir_.write("hooks/_1_fence.yaml",
               "kind: veto\nevents: [fence.veto]\nwhen: { field: data.fence, equals: true }\n"
               "reason: fence\n");
    if (!gw_.start(config(events_.url("/events"), diagnostics_.url("/diagnostics")))) {
      why = "gateway did not start:\n" + gw_.log();
      return false;
    }
    auto pub = bus::Publisher::connect({.endpoints = {gw_.bus_endpoint()}, .source = "matrix"});
    if (!pub || !pub.value()->wait_for_subscriber(10s)) {
      why = "publisher did not connect";
      return false;
    }
    pub_ = std::move(pub).value();
    return true;
  }

  // Publishes one event; its id ("" on failure).
  std::string publish(const std::string& type, const std::string& data_json) {
    if (!pub_ || !pub_->publish(type, data_json)) return "";
    return pub_->last_id();
  }

  // After this returns true, everything the events published before it caused on the ingest
  // thread has reached both receivers (see the comment at the top of the file).
  bool fence() {
    std::string pass = publish("fence.pass", "{}");
    std::string veto = publish("fence.veto", R"({"fence":true})");
    return wait_until([&] { return !deliveries_of(events_, pass).empty(); }, 10s) &&
           wait_until([&] { return !diagnostics_of(diagnostics_, veto).empty(); }, 10s);
  }

  std::string metrics() { return http_get(gw_.admin_port(), "/metrics"); }

 private:
  TempDir dir_;
  HttpReceiver events_;
  HttpReceiver diagnostics_;
  GatewayProcess gw_;
  std::unique_ptr<bus::Publisher> pub_;
};

// ---------------------------------------------------------------------------------------------
// The matrix

using CellParam = std::tuple<Form, Kind, Outcome, Policy>;

class HookMatrixTest : public ::testing::TestWithParam<CellParam> {
 protected:
  // One gateway for every cell that runs in this process (all of them in a plain run; one when
  // ctest runs each test on its own): a hook per cell, each matching only its cell's event type.
  static void SetUpTestSuite() {
    std::set<std::string> selected;
    if (const auto* suite = ::testing::UnitTest::GetInstance()->current_test_suite()) {
      for (int i = 0; i < suite->total_test_count(); ++i) {
        const ::testing::TestInfo* info = suite->GetTestInfo(i);
        std::string name = info->name();  // "ReceiverAndDiagnostics/<cell>"
        if (info->should_run()) selected.insert(name.substr(name.find('/') + 1));
      }
    }
    rig_ = std::make_unique<Rig>();
    int order = 100, hooks = 0;
    for (const Cell& c : all_cells()) {
      ++order;
      if (meaningless(c) || !selected.count(c.name())) continue;
      rig_->dir().write("hooks/_" + std::to_string(order) + "_" + c.name() + ".yaml",
                        descriptor(c));
      ++hooks;
    }
    if (hooks == 0) {
      why_not_ready_ = "no meaningful cell selected";
      return;
    }
    ready_ = rig_->start(why_not_ready_);
  }

  static void TearDownTestSuite() {
    if (ready_) {
      // The gateway survived every cell (program crashes, hangs, quarantined native hooks) and
      // still stops cleanly.
      EXPECT_TRUE(rig_->gateway().running()) << rig_->gateway().log();
      rig_->gateway().signal(SIGTERM);
      EXPECT_EQ(rig_->gateway().wait_exit(20s), 0) << rig_->gateway().log();
    }
    rig_.reset();
  }

  static Cell cell() {
    auto [f, k, o, p] = GetParam();
    return {f, k, o, p};
  }

  static inline std::unique_ptr<Rig> rig_;
  static inline bool ready_ = false;
  static inline std::string why_not_ready_;
};

TEST_P(HookMatrixTest, ReceiverAndDiagnostics) {
  const Cell c = cell();
  if (auto why = meaningless(c)) GTEST_SKIP() << *why;
  ASSERT_TRUE(ready_) << why_not_ready_;
  Rig& rig = *rig_;
  const std::string hook = c.name();
  const std::string type = c.event_type();
  const bool failure = c.failure();
  const bool timeout = c.outcome == Outcome::Hang;
  const std::string failure_type = timeout ? "hookgate.hook.timeout" : "hookgate.hook.failed";

  // The main event, plus the event that shows a healthy hook's other answer: a vetoed user for a
  // veto, a skipped event for a transform.
  const std::string main_data = R"({"user":"ann","n":1})";
  const int64_t published_ns = now_steady_ns();
  const std::string main_id = rig.publish(type, main_data);
  ASSERT_FALSE(main_id.empty());
  std::string other_id, other_data;
  if (c.outcome == Outcome::Ok && c.kind == Kind::Veto) other_data = R"({"user":"mallory"})";
  if (c.outcome == Outcome::Ok && c.kind == Kind::Transform)
    other_data = R"({"user":"ann","skip":true})";
  if (!other_data.empty()) {
    other_id = rig.publish(type, other_data);
    ASSERT_FALSE(other_id.empty());
  }

  // Wait for what must arrive...
  if (!c.dropped()) {
    ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), main_id).empty(); }, 10s))
        << "event not delivered\n"
        << rig.gateway().log();
  }
  std::vector<std::string> want_diags;
  if (failure) want_diags.push_back(failure_type);
  if (c.dropped()) want_diags.push_back("hookgate.event.vetoed");
  for (const auto& want : want_diags) {
    ASSERT_TRUE(wait_until(
        [&] {
          for (const auto& d : diagnostics_of(rig.diagnostics(), main_id))
            if (d.type == want) return true;
          return false;
        },
        10s))
        << "no " << want << "\n"
        << dump(diagnostics_of(rig.diagnostics(), main_id)) << rig.gateway().log();
  }
  if (c.kind == Kind::Observe && !failure) {
    // An observer's run is asynchronous: its counter says it finished.
    std::string series = "hookgate_hook_runs_total{hook=\"" + hook + "\",result=\"continue\"}";
    ASSERT_TRUE(wait_until([&] { return metric(rig.metrics(), series) >= 1; }, 10s))
        << rig.metrics();
  }
  // ...then fence, so that anything that should NOT arrive would have arrived by now.
  ASSERT_TRUE(rig.fence()) << rig.gateway().log();

  // The receiver of events.
  auto delivered = deliveries_of(rig.events(), main_id);
  if (c.dropped()) {
    EXPECT_TRUE(delivered.empty()) << "a closed failure must drop the event\n" << dump(delivered);
  } else {
    ASSERT_EQ(delivered.size(), 1u) << dump(delivered);
    auto body = parse_json(delivered[0].request.body);
    ASSERT_TRUE(body.IsObject() && body.HasMember("data")) << delivered[0].request.body;
    EXPECT_EQ(str(body, "type"), type);
    EXPECT_EQ(str(body, "source"), "matrix");
    const auto& data = body["data"];
    if (c.kind == Kind::Transform && !failure) {
      EXPECT_EQ(str(data, "transformed_by"), name_of(c.form)) << delivered[0].request.body;
      EXPECT_EQ(str(data, "user"), "ann");
    } else {
      // Unchanged: exactly what was published.
      EXPECT_EQ(parse_json(main_data), data) << delivered[0].request.body;
    }
  }
  if (!other_id.empty()) {
    auto other = deliveries_of(rig.events(), other_id);
    if (c.kind == Kind::Veto) {
      EXPECT_TRUE(other.empty()) << "the veto hook did not veto\n" << dump(other);
    } else {
      ASSERT_EQ(other.size(), 1u) << dump(other);
      EXPECT_EQ(parse_json(other_data), parse_json(other[0].request.body)["data"])
          << "a skipped event must be unchanged: " << other[0].request.body;
    }
  }

  // The receiver of hookgate.* diagnostics: exactly the expected ones about the main event.
  auto diags = diagnostics_of(rig.diagnostics(), main_id);
  ASSERT_EQ(diags.size(), want_diags.size()) << dump(diags);
  std::string failure_reason;
  for (const auto& d : diags) {
    auto body = parse_json(d.request.body);
    const auto& data = body["data"];
    EXPECT_EQ(str(data, "hook"), hook) << d.request.body;
    EXPECT_EQ(str(data, "event_type"), type) << d.request.body;
    if (d.type == failure_type) {
      failure_reason = str(data, "reason");
      EXPECT_NE(failure_reason.find(expected_reason(c)), std::string::npos)
          << "want \"" << expected_reason(c) << "\" in " << d.request.body;
    } else {
      EXPECT_EQ(d.type, "hookgate.event.vetoed") << d.request.body;
    }
  }
  if (c.dropped()) {
    for (const auto& d : diags) {
      if (d.type != "hookgate.event.vetoed") continue;
      EXPECT_EQ(str(parse_json(d.request.body)["data"], "reason"),
                "hook " + hook + " failed: " + failure_reason);
    }
  }
  if (!other_id.empty()) {
    auto other_diags = diagnostics_of(rig.diagnostics(), other_id);
    if (c.kind == Kind::Veto) {
      ASSERT_EQ(other_diags.size(), 1u) << dump(other_diags);
      auto body = parse_json(other_diags[0].request.body);
      EXPECT_EQ(other_diags[0].type, "hookgate.event.vetoed");
      EXPECT_EQ(str(body["data"], "hook"), hook);
      EXPECT_EQ(str(body["data"], "reason"), "banned user mallory");
    } else {
      EXPECT_TRUE(other_diags.empty()) << "a skip is not a failure\n" << dump(other_diags);
    }
  }

  // A hanging observer never delays delivery: the event arrived well within the observer's
  // timeout, before the observer's timeout diagnostic.
  if (c.kind == Kind::Observe && timeout) {
    ASSERT_EQ(delivered.size(), 1u);
    ASSERT_EQ(diags.size(), 1u);
    EXPECT_LT(delivered[0].request.received_ns - published_ns, int64_t{c.timeout_ms()} * 1'000'000)
        << "delivery waited for the hanging observer";
    EXPECT_LT(delivered[0].request.received_ns, diags[0].request.received_ns);
  }

  // Per-hook metrics: one run, counted under the right result.
  std::map<std::string, int> want_runs;
  if (failure) {
    want_runs[timeout ? "timeout" : "failed"] = 1;
  } else if (c.replacement_ignored()) {
    want_runs["continue"] = 1;
  } else if (c.kind == Kind::Veto) {
    want_runs = {{"continue", 1}, {"veto", 1}};
  } else if (c.kind == Kind::Transform) {
    // Declarative transforms edit in place, counted as replace when they changed the event; a
    // one-shot has no skip (no output = continue).
    want_runs["replace"] += 1;
    want_runs[c.form == Form::OneShot ? "continue" : "skip"] += 1;
  } else {
    want_runs["continue"] = 1;
  }
  std::string m = rig.metrics();
  for (const char* result : {"continue", "replace", "veto", "skip", "failed", "timeout"}) {
    std::string series =
        "hookgate_hook_runs_total{hook=\"" + hook + "\",result=\"" + result + "\"}";
    EXPECT_EQ(metric(m, series), want_runs[result]) << series;
  }
  EXPECT_EQ(metric(m, "hookgate_hook_failures_total{hook=\"" + hook + "\"}"), failure ? 1 : 0);
  EXPECT_EQ(metric(m, "hookgate_hook_timeouts_total{hook=\"" + hook + "\"}"), timeout ? 1 : 0);

  // A program's stderr goes to the gateway's log, one line per line, under the hook's name.
  if (c.form == Form::Program && c.outcome == Outcome::Error) {
    EXPECT_TRUE(rig.gateway().wait_for_log("hook " + hook + " stderr: fixture error", 5s))
        << rig.gateway().log();
  }
}

std::string cell_name(const ::testing::TestParamInfo<CellParam>& info) {
  auto [f, k, o, p] = info.param;
  return Cell{f, k, o, p}.name();
}

INSTANTIATE_TEST_SUITE_P(Matrix, HookMatrixTest,
                         ::testing::Combine(::testing::ValuesIn(kForms),
                                            ::testing::ValuesIn(kKinds),
                                            ::testing::ValuesIn(kOutcomes),
                                            ::testing::ValuesIn(kPolicies)),
                         cell_name);

// ---------------------------------------------------------------------------------------------
// Beyond the matrix

// Veto and transform hooks of all four forms form ONE chain in numeric file-name order: each
// appends its name to data.trail. (Alphabetical order would run _100_ first and _5_ last.)
TEST(HookFormsTest, MixedFormsRunInNumericOrder) {
  Rig rig;
  fs::create_directories(rig.dir() / "hooks");
  fs::copy_file(kNativeFixture, rig.dir() / "hooks/_5_native.so");  // bare: appends "native"
  fs::copy_file(kFixtures + "/matrix_program.sh", rig.dir() / "hooks/_10_program.sh");
  fs::permissions(rig.dir() / "hooks/_10_program.sh", fs::perms::owner_all,
                  fs::perm_options::add);  // a bare executable: appends its hook name
  // A declarative hook cannot append to a list; it writes the whole list, and only when the
  // trail is exactly what numeric order predicts at its place.
  rig.dir().write("hooks/_20_yaml.yaml",
                  "kind: transform\n"
                  "when: { field: data.trail, equals: '[\"native\",\"program\"]' }\n"
                  "actions:\n  - set: { data.trail: [native, program, yaml] }\n");
  rig.dir().write("hooks/_100_oneshot.yaml", "kind: transform\ncommand: sh '" + kFixtures +
                                                 "/matrix_oneshot.sh' append transform oneshot\n");
  std::string why;
  ASSERT_TRUE(rig.start(why)) << why;
  std::string id = rig.publish("order.check", R"({"trail":[]})");
  ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), id).empty(); }, 10s))
      << rig.gateway().log();
  auto body = parse_json(deliveries_of(rig.events(), id)[0].request.body);
  EXPECT_EQ(parse_json(R"(["native","program","yaml","oneshot"])"), body["data"]["trail"])
      << deliveries_of(rig.events(), id)[0].request.body;
  EXPECT_TRUE(diagnostics_of(rig.diagnostics(), id).empty());
}

// A rebuilt native hook installed under the same name (by rename, as docs/hooks.md says) takes
// effect on reload, although the old chain still holds the old library while the new one loads.
TEST(HookFormsTest, RebuiltNativeHookTakesEffectOnReload) {
  Rig rig;
  const fs::path installed = rig.dir() / "hooks/_10_swap.so";
  auto install = [&](const std::string& library) {
    fs::create_directories(installed.parent_path());
    fs::copy_file(library, rig.dir() / "hooks/.swap.so.new");
    fs::rename(rig.dir() / "hooks/.swap.so.new", installed);
  };
  // First a veto that lets everything through, then the fixture that appends "native".
  install(std::string(HOOKGATE_MORE_HOOKS_NATIVE_DIR) + "/max_size.so");
  std::string why;
  ASSERT_TRUE(rig.start(why)) << why;
  std::string before = rig.publish("m.reload", R"({"trail":[]})");
  ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), before).empty(); }, 10s));
  install(kNativeFixture);
  rig.gateway().signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& s : seen(rig.diagnostics()))
          if (s.type == "hookgate.hooks.reloaded") return true;
        return false;
      },
      10s))
      << rig.gateway().log();
  std::string after = rig.publish("m.reload", R"({"trail":[]})");
  ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), after).empty(); }, 10s));
  EXPECT_EQ(parse_json(R"([])"),
            parse_json(deliveries_of(rig.events(), before)[0].request.body)["data"]["trail"]);
  EXPECT_EQ(parse_json(R"(["native"])"),
            parse_json(deliveries_of(rig.events(), after)[0].request.body)["data"]["trail"])
      << "the reload kept running the old library";
}

// Found in review: a reload waited 2 s for the old chain's users and then let go, so when an event
// held the old chain longer (a slow hook), the ingest thread finished it last and stopped every
// old co-process itself (~300 ms each when they linger) before reading the bus again. The loader
// thread stops them now: an event published after the slow one is delivered before the last
// old co-process is signalled. The order is read from one file both sides append to.
TEST(HookFormsTest, TheOldChainIsStoppedOffTheIngestThread) {
  Rig rig;
  const std::string order = (rig.dir().path() / "order.log").string();
  // Slow to start (so the reload's load takes a while), slow on m.slow for the hook named
  // "slow", and stubborn to stop: it records SIGTERM and keeps running until SIGKILL (or until
  // the gateway is gone: the test's teardown SIGKILLs it, and must leave no process behind).
  rig.dir().write("hooks/bin/stubborn.py",
                  "#!/usr/bin/python3\n"
                  "import json, os, signal, sys, time\n"
                  "name = os.environ['HOOKGATE_HOOK_NAME']\n"
                  "def log(line):\n"
                  "    with open('" +
                      order +
                      "', 'a') as f: f.write(line + '\\n')\n"
                      "signal.signal(signal.SIGTERM, lambda *_: log('term ' + name))\n"
                      "parent = os.getppid()\n"
                      "time.sleep(0.4)\n"
                      "def send(m):\n"
                      "    sys.stdout.write(json.dumps(m) + '\\n'); sys.stdout.flush()\n"
                      "send({'hookgate': 1, 'kind': 'transform', 'events': ['m.*']})\n"
                      "for line in sys.stdin:\n"
                      "    request = json.loads(line)\n"
                      "    if name == 'slow' and request['event']['type'] == 'm.slow':\n"
                      "        log('slow started'); time.sleep(6)\n"
                      "    send({'id': request['id'], 'action': 'continue'})\n"
                      "while os.getppid() == parent: time.sleep(0.2)  # no orphans after SIGKILL\n",
                  /*executable=*/true);
  for (const char* name : {"_10_slow", "_20_a", "_30_b", "_40_c"})
    rig.dir().write(std::string("hooks/") + name + ".yaml",
                    "kind: transform\nevents: [\"m.*\"]\nrun: bin/stubborn.py\n"
                    "timeout_ms: 15000\n");
  rig.events().set_handler([order](const HttpReceiver::Request& r) {
    if (r.body.find("\"m.fast\"") != std::string::npos) {
      std::ofstream(order, std::ios::app) << "delivered m.fast\n";
    }
    return HttpReceiver::Response{};
  });
  std::string why;
  ASSERT_TRUE(rig.start(why)) << why;
  // The new chain takes ~1.6 s to load; the slow event, published once the load has begun,
  // holds the old chain for 6 s.
  rig.gateway().signal(SIGHUP);
  ASSERT_TRUE(rig.gateway().wait_for_log("hooks: reloading", 10s)) << rig.gateway().log();
  const std::string slow = rig.publish("m.slow", "{}");
  ASSERT_FALSE(slow.empty());
  ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), slow).empty(); }, 20s))
      << rig.gateway().log();
  const std::string fast = rig.publish("m.fast", "{}");
  ASSERT_FALSE(fast.empty());
  auto lines = [&] {
    std::ifstream in(order);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  auto count_terms = [](const std::vector<std::string>& ls) {
    return std::count_if(ls.begin(), ls.end(),
                         [](const auto& l) { return l.rfind("term ", 0) == 0; });
  };
  ASSERT_TRUE(wait_until(
      [&] {
        auto ls = lines();
        return count_terms(ls) >= 4 &&
               std::find(ls.begin(), ls.end(), "delivered m.fast") != ls.end();
      },
      20s))
      << rig.gateway().log();
  auto ls = lines();
  std::string all;
  for (const auto& l : ls) all += l + "\n";
  const auto delivered = std::find(ls.begin(), ls.end(), "delivered m.fast");
  EXPECT_LT(count_terms({ls.begin(), delivered}), 4)
      << "the fast event waited for the old chain's co-processes to stop:\n"
      << all;
  EXPECT_NE(std::find(ls.begin(), ls.end(), "slow started"), ls.end()) << all;
}

// The documented price of running in-process: a native hook that crashes takes the gateway with
// it (untrusted code belongs in a program hook, whose crash is just a hook failure — see the
// matrix). Nothing is delivered.
// A native hook that aborts (SIGABRT) fails like any hook (on_error: open: the chain goes on)
// and is quarantined: later events fail fast without calling it; the gateway keeps running and
// /status says why. (The matrix covers SIGSEGV in every kind and policy.)
TEST(HookFormsTest, NativeCrashIsAHookFailureAndQuarantinesTheHook) {
  Rig rig;
  rig.dir().write("hooks/_10_crash.yaml", "kind: transform\nevents: [crash.*]\nlibrary: " +
                                              kNativeFixture + "\nconfig: { outcome: abort }\n");
  std::string why;
  ASSERT_TRUE(rig.start(why)) << why;
  const std::string first = rig.publish("crash.now", R"({"n":1})");
  const std::string second = rig.publish("crash.now", R"({"n":2})");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  ASSERT_TRUE(wait_until(
      [&] {
        return !deliveries_of(rig.events(), first).empty() &&
               !deliveries_of(rig.events(), second).empty() &&
               diagnostics_of(rig.diagnostics(), second).size() == 1;
      },
      10s))
      << rig.gateway().log();
  EXPECT_TRUE(rig.gateway().running());
  auto reason_of = [&](const std::string& id) {
    auto diags = diagnostics_of(rig.diagnostics(), id);
    if (diags.size() != 1) return std::string("(" + std::to_string(diags.size()) + " diagnostics)");
    EXPECT_EQ(diags[0].type, "hookgate.hook.failed");
    return str(parse_json(diags[0].request.body)["data"], "reason");
  };
  EXPECT_EQ(reason_of(first),
            "handle() crashed; hook quarantined after a crash (SIGABRT), until reloaded");
  EXPECT_EQ(reason_of(second), "quarantined after a crash (SIGABRT)");
  std::string m = rig.metrics();
  EXPECT_EQ(metric(m, "hookgate_hook_quarantined_total"), 1);
  EXPECT_EQ(metric(m, "hookgate_hook_failures_total{hook=\"crash\"}"), 2);
  std::string status = http_get(rig.gateway().admin_port(), "/status");
  EXPECT_NE(status.find("quarantined after a crash (SIGABRT)"), std::string::npos) << status;
}

// Found in review: a native library is opened inside the gateway, so a static constructor that
// faults used to end the gateway at load. Each library is now opened in a probe process first:
// this one is refused with the reason, and the gateway runs on without it.
TEST(HookFormsTest, ANativeLibraryThatCrashesWhileLoadingIsRefused) {
  Rig rig;
  rig.dir().write("hooks/_10_boom.yaml",
                  "kind: transform\nlibrary: " + std::string(HOOKGATE_INTEGRATION_NATIVE_DIR) +
                      "/crash_on_load.so\n");
  std::string why;
  ASSERT_TRUE(rig.start(why)) << why;
  const std::string id = rig.publish("m.load", R"({"n":1})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return !deliveries_of(rig.events(), id).empty(); }, 10s))
      << rig.gateway().log();
  EXPECT_TRUE(rig.gateway().running());
  // "crashed" (a signal), or "failed" where the gateway's build turns a crash into exit status 1
  // (AddressSanitizer).
  EXPECT_TRUE(rig.gateway().wait_for_log("while loading in a probe process", 1s))
      << rig.gateway().log();
}

}  // namespace
}  // namespace hookgate::testing
