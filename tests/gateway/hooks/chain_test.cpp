#include "gateway/hooks/chain.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "tests/gateway/hooks/hook_test_util.hpp"

namespace hookgate::hooks {
namespace {

using testing::answer;
using testing::counter;
using testing::DiagnosticLog;
using testing::fail;
using testing::fake;
using testing::make_event;
using testing::TempDir;
using testing::time_out;
using testing::write_file;

std::shared_ptr<const HookChain> chain_of(std::vector<HookPtr> hooks,
                                          int64_t max_event_bytes = 1 << 20) {
  std::vector<HookEntry> entries;
  for (auto& h : hooks) {
    HookEntry e;
    e.file.name = h->spec().name;
    e.file.path = h->spec().file;
    e.hook = std::move(h);
    entries.push_back(std::move(e));
  }
  return HookChain::build(std::move(entries), max_event_bytes);
}

std::vector<std::string> results(const std::vector<ChainStep>& trace) {
  std::vector<std::string> out;
  for (const auto& s : trace) out.push_back(s.hook + ":" + s.result);
  return out;
}

TEST(HookChainRun, TransformAt10NormalizesWhatVetoAt20Inspects) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_normalize.yaml", R"(
kind: transform
events: ["auth.*"]
actions:
  - rename: { data.login: data.user }
)");
  write_file(dir, "_20_drop_healthchecks.yaml", R"(
kind: veto
events: ["auth.*"]
when: { any: [ { field: data.user, matches: "healthcheck*" },
               { field: data.ip, in: ["127.0.0.1", "::1"] } ] }
reason: health-check noise
)");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors;
  auto chain = HookChain::load(cfg, errors);
  ASSERT_TRUE(errors.empty()) << errors[0].str();
  ASSERT_EQ(chain->entries().size(), 2u);
  EXPECT_EQ(chain->entries()[0].file.name, "normalize");

  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"auth.failure","id":"ev-1","data":{"login":"healthcheck-7"}})");
  std::vector<ChainStep> trace;
  ChainOutcome out = chain->run(ev, diags.sink(), &trace);
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.vetoed_by, "drop_healthchecks");
  EXPECT_EQ(out.reason, "health-check noise");
  EXPECT_EQ(results(trace),
            (std::vector<std::string>{"normalize:replace", "drop_healthchecks:veto"}));
  ASSERT_EQ(diags.events().size(), 1u);
  EXPECT_EQ(diags.events()[0].type, diag::kEventVetoed);
  EXPECT_EQ(diags.events()[0].event_id, "ev-1");

  Event ok = make_event(R"({"type":"auth.failure","data":{"login":"ann"}})");
  EXPECT_FALSE(chain->run(ok, diags.sink()).vetoed);
  EXPECT_STREQ(ok.find("data.user")->GetString(), "ann");
}

TEST(HookChainRun, VetoStopsTheChainAndEmitsADiagnostic) {
  auto first = fake("chain_veto_first", HookKind::Transform, [](Event& ev) {
    EXPECT_TRUE(ev.set_string("data.seen", "yes"));
    return answer(Action::Continue);
  });
  auto veto = fake("chain_veto_veto", HookKind::Veto,
                   [](Event&) { return answer(Action::Veto, "not today"); });
  auto after = fake("chain_veto_after", HookKind::Transform,
                    [](Event&) { return answer(Action::Continue); });
  auto chain = chain_of({first, veto, after});
  uint64_t vetoed_before = counter("hookgate_events_vetoed_total");
  uint64_t runs_before =
      counter("hookgate_hook_runs_total", {{"hook", "chain_veto_veto"}, {"result", "veto"}});

  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"deploy.finished","id":"d-1"})");
  std::vector<ChainStep> trace;
  ChainOutcome out = chain->run(ev, diags.sink(), &trace);
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.vetoed_by, "chain_veto_veto");
  EXPECT_EQ(out.reason, "not today");
  EXPECT_EQ(after->calls(), 0);
  EXPECT_EQ(first->calls(), 1);
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[1].kind, "veto");
  EXPECT_EQ(trace[1].detail, "not today");
  ASSERT_EQ(diags.events().size(), 1u);
  const auto all = diags.events();
  const DiagnosticEvent& d = all[0];
  EXPECT_EQ(d.type, diag::kEventVetoed);
  EXPECT_EQ(d.hook, "chain_veto_veto");
  EXPECT_EQ(d.event_id, "d-1");
  EXPECT_EQ(d.event_type, "deploy.finished");
  EXPECT_EQ(d.reason, "not today");
  EXPECT_EQ(counter("hookgate_events_vetoed_total"), vetoed_before + 1);
  EXPECT_EQ(counter("hookgate_hook_runs_total", {{"hook", "chain_veto_veto"}, {"result", "veto"}}),
            runs_before + 1);
}

// Found in review: a program hook's veto reason was unbounded, and went whole into the log, the
// hookgate.event.vetoed diagnostic and the spool row of every webhook subscribed to it.
TEST(HookChainRun, AVetoReasonIsCutToOneKiB) {
  auto veto = fake("chain_long_reason", HookKind::Veto,
                   [](Event&) { return answer(Action::Veto, std::string(2 << 20, 'r')); });
  auto chain = chain_of({veto});
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"deploy.finished"})");
  ChainOutcome out = chain->run(ev, diags.sink());
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.reason, std::string(kMaxVetoReason, 'r') + "...");
  ASSERT_EQ(diags.events().size(), 1u);
  EXPECT_EQ(diags.events()[0].reason.size(), kMaxVetoReason + 3);
}

TEST(HookChainRun, OnlyMatchingHooksRun) {
  auto auth_only =
      fake("chain_match_auth", HookKind::Veto, [](Event&) { return answer(Action::Veto); },
           FailurePolicy::Open, {"auth.*"});
  auto chain = chain_of({auth_only});
  Event ev = make_event(R"({"type":"user.created"})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, {}, &trace).vetoed);
  EXPECT_EQ(auth_only->calls(), 0);
  EXPECT_EQ(results(trace), (std::vector<std::string>{"chain_match_auth:not-matched"}));
  Event auth = make_event(R"({"type":"auth.failure"})");
  ChainOutcome out = chain->run(auth, {});
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.reason, "vetoed by hook chain_match_auth");  // default reason
}

struct PolicyCase {
  FailurePolicy policy;
  bool timeout;
};

class HookChainFailurePolicy : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(HookChainFailurePolicy, OpenSkipsClosedVetoes) {
  const PolicyCase c = GetParam();
  std::string name = std::string("chain_policy_") +
                     (c.policy == FailurePolicy::Open ? "open" : "closed") +
                     (c.timeout ? "_timeout" : "_error");
  auto broken = fake(
      name, HookKind::Transform,
      [&](Event& ev) {
        EXPECT_TRUE(ev.set_string("data.partial",
                                  "must not survive"));  // a misbehaving hook's half-edit...
        (void)ev.remove("data.partial");                 // ...that it rolled back
        return c.timeout ? time_out() : fail("exit status 3");
      },
      c.policy);
  auto next = fake(name + "_next", HookKind::Transform, [](Event& ev) {
    EXPECT_TRUE(ev.set_string("data.next", "ran"));
    return answer(Action::Continue);
  });
  auto chain = chain_of({broken, next});
  uint64_t failures = counter("hookgate_hook_failures_total", {{"hook", name}});
  uint64_t timeouts = counter("hookgate_hook_timeouts_total", {{"hook", name}});
  uint64_t vetoed = counter("hookgate_events_vetoed_total");

  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"auth.failure","id":"f-1"})");
  std::vector<ChainStep> trace;
  ChainOutcome out = chain->run(ev, diags.sink(), &trace);

  const char* failure_type = c.timeout ? diag::kHookTimeout : diag::kHookFailed;
  std::string reason = c.timeout ? "no answer within 50 ms" : "exit status 3";
  ASSERT_GE(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, c.timeout ? "timeout" : "failed");
  EXPECT_EQ(trace[0].detail, reason);
  EXPECT_EQ(counter("hookgate_hook_failures_total", {{"hook", name}}), failures + 1);
  EXPECT_EQ(counter("hookgate_hook_timeouts_total", {{"hook", name}}),
            timeouts + (c.timeout ? 1 : 0));
  auto events = diags.events();
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].type, failure_type);
  EXPECT_EQ(events[0].hook, name);
  EXPECT_EQ(events[0].event_id, "f-1");
  EXPECT_EQ(events[0].event_type, "auth.failure");
  EXPECT_EQ(events[0].reason, reason);

  if (c.policy == FailurePolicy::Open) {
    EXPECT_FALSE(out.vetoed);
    EXPECT_EQ(next->calls(), 1);
    EXPECT_STREQ(ev.find("data.next")->GetString(), "ran");
    EXPECT_EQ(events.size(), 1u);
    EXPECT_EQ(counter("hookgate_events_vetoed_total"), vetoed);
  } else {
    EXPECT_TRUE(out.vetoed);
    EXPECT_EQ(out.vetoed_by, name);
    EXPECT_EQ(out.reason, "hook " + name + " failed: " + reason);
    EXPECT_EQ(next->calls(), 0);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].type, diag::kEventVetoed);
    EXPECT_EQ(events[1].reason, out.reason);
    EXPECT_EQ(counter("hookgate_events_vetoed_total"), vetoed + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(All, HookChainFailurePolicy,
                         ::testing::Values(PolicyCase{FailurePolicy::Open, false},
                                           PolicyCase{FailurePolicy::Open, true},
                                           PolicyCase{FailurePolicy::Closed, false},
                                           PolicyCase{FailurePolicy::Closed, true}),
                         [](const ::testing::TestParamInfo<PolicyCase>& info) {
                           return std::string(info.param.policy == FailurePolicy::Open ? "Open"
                                                                                       : "Closed") +
                                  (info.param.timeout ? "Timeout" : "Error");
                         });

TEST(HookChainRun, SkipIsNotAFailure) {
  auto skipper = fake(
      "chain_skip", HookKind::Transform, [](Event&) { return answer(Action::Skip); },
      FailurePolicy::Closed);
  auto next =
      fake("chain_skip_next", HookKind::Veto, [](Event&) { return answer(Action::Continue); });
  auto chain = chain_of({skipper, next});
  uint64_t failures = counter("hookgate_hook_failures_total", {{"hook", "chain_skip"}});
  uint64_t skips =
      counter("hookgate_hook_runs_total", {{"hook", "chain_skip"}, {"result", "skip"}});
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"t"})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, diags.sink(), &trace).vetoed);
  EXPECT_TRUE(diags.events().empty());
  EXPECT_EQ(next->calls(), 1);
  EXPECT_EQ(results(trace),
            (std::vector<std::string>{"chain_skip:skip", "chain_skip_next:continue"}));
  EXPECT_EQ(counter("hookgate_hook_failures_total", {{"hook", "chain_skip"}}), failures);
  EXPECT_EQ(counter("hookgate_hook_runs_total", {{"hook", "chain_skip"}, {"result", "skip"}}),
            skips + 1);
}

TEST(HookChainRun, ReplaceSwapsTheEventAndKeepsItsIdentity) {
  auto replacer = fake("chain_replace", HookKind::Transform, [](Event&) {
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement = Event::parse(R"({"type":"auth.failure.v2","data":{"n":1}})").value().clone();
    return HookResult(std::move(v));
  });
  std::string seen_type;
  auto reader = fake("chain_replace_reader", HookKind::Veto, [&](Event& ev) {
    seen_type = std::string(ev.type());
    return answer(Action::Continue);
  });
  auto chain = chain_of({replacer, reader});
  Event ev = make_event(R"({"type":"auth.failure","id":"keep-me","source":"svc","data":{"n":0}})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, {}, &trace).vetoed);
  EXPECT_EQ(results(trace),
            (std::vector<std::string>{"chain_replace:replace", "chain_replace_reader:continue"}));
  EXPECT_EQ(seen_type, "auth.failure.v2");  // the next hook saw the replacement
  EXPECT_EQ(ev.type(), "auth.failure.v2");
  EXPECT_EQ(ev.id(), "keep-me");
  EXPECT_EQ(ev.source(), "svc");
  EXPECT_EQ(ev.find("data.n")->GetInt(), 1);
}

TEST(HookChainRun, InvalidReplacementIsAHookFailure) {
  auto garbage = fake("chain_garbage", HookKind::Transform, [](Event&) {
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement = Event::parse(R"({"data":{"no":"type"}})").value().clone();
    return HookResult(std::move(v));
  });
  auto chain = chain_of({garbage});
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"t","data":{"x":1}})");
  std::string before = ev.to_json();
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, diags.sink(), &trace).vetoed);  // on_error: open
  EXPECT_EQ(ev.to_json(), before);
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "failed");
  EXPECT_EQ(trace[0].detail.rfind("replacement is not a valid event", 0), 0u) << trace[0].detail;
  ASSERT_EQ(diags.events().size(), 1u);
  EXPECT_EQ(diags.events()[0].type, diag::kHookFailed);
}

// Found in review: a program hook's answer (up to 16 MiB) was taken whatever its size, so a hook
// bug could grow events past bus.max_message_bytes, which the spool, memory bounds and receivers
// (Splunk HEC takes 1 MB by default) were sized for. Now it is a hook failure, under on_error.
TEST(HookChainRun, AReplacementLargerThanTheBusAcceptsIsAHookFailure) {
  const std::string blob(300, 'x');
  auto grower = fake("chain_grow", HookKind::Transform, [&](Event&) {
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement =
        Event::parse(R"({"type":"t","data":{"blob":")" + blob + R"("}})").value().clone();
    return HookResult(std::move(v));
  });
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"t","id":"e1","data":{"x":1}})");
  const std::string before = ev.to_json();
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain_of({grower}, 256)->run(ev, diags.sink(), &trace).vetoed);  // on_error: open
  EXPECT_EQ(ev.to_json(), before);
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "failed");
  EXPECT_NE(
      trace[0].detail.find("bytes, larger than the event and over bus.max_message_bytes (256)"),
      std::string::npos)
      << trace[0].detail;
  ASSERT_EQ(diags.events().size(), 1u);
  EXPECT_EQ(diags.events()[0].type, diag::kHookFailed);

  // The same answer within the limit is taken.
  Event fits = make_event(R"({"type":"t","id":"e1","data":{"x":1}})");
  trace.clear();
  EXPECT_FALSE(chain_of({grower}, 1024)->run(fits, {}, &trace).vetoed);
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "replace");
  EXPECT_EQ(fits.to_json().size(), fits.json_bytes());

  // An event already past the limit (the gateway fills in id, time, ...: the bus measured it
  // before) may be replaced by one no larger: a redaction hook's answer must not be refused.
  auto redactor = fake("chain_redact", HookKind::Transform, [&](Event&) {
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement =
        Event::parse(R"({"type":"t","data":{"blob":")" + std::string(300, '*') + R"("}})")
            .value()
            .clone();
    return HookResult(std::move(v));
  });
  Event big = make_event(R"({"type":"t","id":"e1","data":{"blob":")" + blob + R"("}})");
  trace.clear();
  EXPECT_FALSE(chain_of({redactor}, 256)->run(big, {}, &trace).vetoed);
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "replace") << trace[0].detail;
  EXPECT_NE(big.to_json().find(std::string(300, '*')), std::string::npos);
}

TEST(HookChainRun, VetoHookReplaceIsIgnored) {
  auto veto = fake("chain_veto_replace", HookKind::Veto, [](Event&) {
    HookVerdict v;
    v.action = Action::Replace;
    v.replacement = Event::parse(R"({"type":"other"})").value().clone();
    return HookResult(std::move(v));
  });
  auto chain = chain_of({veto});
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"t"})");
  std::vector<ChainStep> trace;
  const uint64_t ignored_before =
      counter("hookgate_hook_answers_ignored_total", {{"hook", "chain_veto_replace"}});
  EXPECT_FALSE(chain->run(ev, diags.sink(), &trace).vetoed);
  EXPECT_EQ(ev.type(), "t");
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "continue");
  EXPECT_TRUE(diags.events().empty());
  // A degraded path: counted (and logged), not silent.
  EXPECT_EQ(counter("hookgate_hook_answers_ignored_total", {{"hook", "chain_veto_replace"}}),
            ignored_before + 1);
}

// What every form answers for a veto hook's replace, valid or not: no event to look into.
TEST(HookChainRun, AVetoHooksReplaceWithoutAnEventContinues) {
  auto veto = fake("chain_veto_replace_none", HookKind::Veto,
                   [](Event&) { return HookResult(ignored_replacement()); });
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"t"})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain_of({veto})->run(ev, diags.sink(), &trace).vetoed);
  EXPECT_EQ(ev.type(), "t");
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].result, "continue");
  EXPECT_TRUE(diags.events().empty());
}

TEST(HookChainRun, ThrowingHookIsAFailureNotACrash) {
  auto thrower = fake(
      "chain_thrower", HookKind::Transform,
      [](Event&) -> HookResult { throw std::runtime_error("kaboom"); }, FailurePolicy::Closed);
  auto chain = chain_of({thrower});
  Event ev = make_event(R"({"type":"t"})");
  ChainOutcome out = chain->run(ev, {});
  EXPECT_TRUE(out.vetoed);
  EXPECT_NE(out.reason.find("kaboom"), std::string::npos);
}

TEST(HookChainLoad, BrokenFileIsReportedWhileTheOthersLoad) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_good.yaml", "kind: veto\nwhen: {field: data.drop, equals: true}\n");
  write_file(dir, "_20_typo.yaml", "kind: veto\nwhen: {field: data.x, exists: true}\nreson: x\n");
  write_file(dir, "_30_syntax.yaml", "kind: [unclosed\n");
  write_file(dir, "_40_dup.yaml", "kind: observe\nactions: [{log: a}]\n");
  write_file(dir, "_50_dup.yml", "kind: observe\nactions: [{log: b}]\n");
  write_file(dir, "_60_also_good.yaml", "kind: transform\nactions: [{set: {data.ok: 1}}]\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors;
  auto chain = HookChain::load(cfg, errors);

  ASSERT_EQ(chain->entries().size(), 6u);
  EXPECT_EQ(chain->loaded_count(), 3u);
  EXPECT_EQ(chain->failed_count(), 3u);
  const auto& e = chain->entries();
  EXPECT_TRUE(e[0].hook);
  EXPECT_FALSE(e[1].hook);
  EXPECT_NE(e[1].error.find(":3:1: unknown key 'reson'"), std::string::npos) << e[1].error;
  EXPECT_FALSE(e[2].hook);
  EXPECT_NE(e[2].error.find("YAML syntax error"), std::string::npos) << e[2].error;
  EXPECT_TRUE(e[3].hook);
  EXPECT_FALSE(e[4].hook);
  EXPECT_NE(e[4].error.find("duplicate hook name"), std::string::npos);
  EXPECT_TRUE(e[5].hook);
  // Every failure is in `errors`, with the file it belongs to.
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].where.file, dir + "/_20_typo.yaml");
  EXPECT_EQ(errors[0].where.line, 3);
  EXPECT_EQ(errors[1].where.file, dir + "/_30_syntax.yaml");
  EXPECT_EQ(errors[2].where.file, dir + "/_50_dup.yml");

  Event ev = make_event(R"({"type":"t","data":{"drop":false}})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, {}, &trace).vetoed);
  EXPECT_EQ(results(trace), (std::vector<std::string>{"good:continue", "also_good:replace"}));
  EXPECT_EQ(ev.find("data.ok")->GetInt(), 1);
}

// Found in review: every reload loads every hook afresh, and a fail-closed redaction hook whose
// handshake was slow at that moment was left out of the new chain: its events went through
// unredacted until the next reload. A hook that fails to load under on_error: closed now fails
// closed in its place; a fail-open one is left out as before, and an observer never vetoes.
TEST(HookChainLoad, AFailClosedHookThatFailsToLoadVetoesWhatItWouldHaveSeen) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_chain_standin_redact.yaml",
             "kind: transform\nevents: [\"auth.*\"]\non_error: closed\ntimeout_ms: 200\n"
             "run: ./slow.sh\n");
  write_file(dir, "slow.sh", "#!/bin/sh\nexec sleep 5\n", true);  // no handshake in time
  write_file(dir, "_20_chain_standin_open.yaml",
             "kind: veto\non_error: open\nlibrary: ./missing.so\n");
  write_file(dir, "_30_chain_standin_watch.yaml",
             "kind: observe\non_error: closed\nlibrary: ./missing.so\n");
  write_file(dir, "_40_chain_standin_ok.yaml", "kind: transform\nactions: [{set: {data.ok: 1}}]\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors;
  auto chain = HookChain::load(cfg, errors);

  ASSERT_EQ(chain->entries().size(), 4u);
  EXPECT_EQ(chain->loaded_count(), 1u);
  EXPECT_EQ(chain->failed_count(), 3u);  // a stand-in is no loaded hook: `hooks list` says failed
  const auto& e = chain->entries();
  EXPECT_FALSE(e[0].hook);
  ASSERT_TRUE(e[0].stand_in);
  EXPECT_NE(
      e[0].error.find("(on_error: closed: the events it would see are vetoed until it loads)"),
      std::string::npos)
      << e[0].error;
  EXPECT_FALSE(e[1].stand_in);  // on_error: open: left out
  EXPECT_FALSE(e[2].stand_in);  // an observer cannot veto
  EXPECT_TRUE(e[3].hook);

  // Events it would not have seen pass as before.
  Event other = make_event(R"({"type":"user.created","data":{}})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(other, {}, &trace).vetoed);
  EXPECT_EQ(results(trace), (std::vector<std::string>{"chain_standin_redact:not-matched",
                                                      "chain_standin_ok:replace"}));

  const std::string name = "chain_standin_redact";
  uint64_t failures = counter("hookgate_hook_failures_total", {{"hook", name}});
  DiagnosticLog diags;
  Event ev = make_event(R"({"type":"auth.failure","id":"s-1","data":{"password":"x"}})");
  trace.clear();
  ChainOutcome out = chain->run(ev, diags.sink(), &trace);
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.vetoed_by, name);
  EXPECT_EQ(out.reason.rfind("hook " + name + " failed to load: ", 0), 0u) << out.reason;
  EXPECT_NE(out.reason.find("handshake"), std::string::npos) << out.reason;
  EXPECT_EQ(results(trace), (std::vector<std::string>{name + ":failed"}));
  EXPECT_EQ(counter("hookgate_hook_failures_total", {{"hook", name}}), failures + 1);
  ASSERT_EQ(diags.types(), (std::vector<std::string>{diag::kHookFailed, diag::kEventVetoed}));
  EXPECT_EQ(diags.events()[0].hook, name);
}

// Found in an exploratory run: an observer on `hookgate.*` (a "page on dead letters" hook) loaded
// and `check` said ok, but diagnostics never pass through hooks, so it never ran. It is a warning.
TEST(HookChainLoad, AHookPatternForDiagnosticsIsAWarning) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_chain_pager.yaml",
             "kind: observe\nevents: [\"hookgate.delivery.*\", \"auth.*\"]\n"
             "actions:\n  - log: dead\n");
  write_file(dir, "_20_chain_all.yaml", "kind: observe\nactions:\n  - log: any\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors, warnings;
  auto chain = HookChain::load(cfg, errors, nullptr, &warnings);
  EXPECT_EQ(chain->loaded_count(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].where.file, dir + "/_10_chain_pager.yaml");
  EXPECT_NE(warnings[0].message.find("'hookgate.delivery.*' never matches"), std::string::npos)
      << warnings[0].message;
}

// Found in an exploratory run: a redactor whose file was truncated (a non-atomic deploy) or
// mistyped dropped out of the chain on the reload (fail-open), or fell back to the global default
// (a closed one could not say on_error), and the next events went out with their passwords. A
// reload keeps the version that ran before, as Envoy and Fluent Bit keep their last good config,
// until the file loads again; a first load has nothing to keep.
TEST(HookChainLoad, AHookWhoseFileStopsLoadingOnAReloadRunsItsVersionFromBefore) {
  for (const char* policy : {"open", "closed"}) {
    SCOPED_TRACE(policy);
    TempDir tmp;
    std::string dir = tmp.dir("hooks");
    const std::string redactor = std::string("kind: transform\non_error: ") + policy +
                                 "\nevents: [\"pw.*\"]\nactions:\n  - remove: [data.password]\n";
    write_file(dir, "_12_chain_keep_redact.yaml", redactor);
    config::HooksConfig cfg;
    cfg.directories = {dir};
    config::Diagnostics errors;
    auto running = HookChain::load(cfg, errors);
    ASSERT_EQ(running->loaded_count(), 1u);

    for (const std::string broken :
         {"", "kind: transform\nactions:\n  - remove: [data.password\n"}) {
      write_file(dir, "_12_chain_keep_redact.yaml", broken);
      errors.clear();
      auto first_load = HookChain::load(cfg, errors);
      ASSERT_EQ(first_load->entries().size(), 1u);
      EXPECT_FALSE(first_load->entries()[0].hook);  // a start has no version to keep

      errors.clear();
      auto reloaded = HookChain::load(cfg, errors, nullptr, nullptr, running.get());
      ASSERT_EQ(reloaded->entries().size(), 1u);
      const HookEntry& entry = reloaded->entries()[0];
      EXPECT_EQ(entry.hook, running->entries()[0].hook) << entry.error;
      EXPECT_FALSE(entry.stand_in);
      EXPECT_NE(entry.error.find("the version that ran before runs on"), std::string::npos)
          << entry.error;
      EXPECT_EQ(reloaded->failed_count(), 1u);
      EXPECT_EQ(reloaded->kept_count(), 1u);
      EXPECT_EQ(reloaded->loaded_count(), 0u);
      Event secret = make_event(R"({"type":"pw.login","data":{"password":"hunter2"}})");
      EXPECT_FALSE(reloaded->run(secret, {}).vetoed);
      EXPECT_FALSE(secret.find("data.password")) << broken;
      // Still failing on the next reload: the same version runs on.
      errors.clear();
      auto again = HookChain::load(cfg, errors, nullptr, nullptr, reloaded.get());
      EXPECT_EQ(again->entries()[0].hook, running->entries()[0].hook);
    }
    // A file deleted takes its hook away (the operator's word, not an accident of a deploy).
    std::filesystem::remove(std::filesystem::path(dir) / "_12_chain_keep_redact.yaml");
    errors.clear();
    EXPECT_TRUE(HookChain::load(cfg, errors, nullptr, nullptr, running.get())->entries().empty());
    // A version that loads is taken as written, on_error: open included.
    write_file(dir, "_12_chain_keep_redact.yaml",
               "kind: transform\non_error: open\nevents: [\"pw.*\"]\nactions:\n"
               "  - remove: [data.password]\n");
    errors.clear();
    auto relaxed = HookChain::load(cfg, errors, nullptr, nullptr, running.get());
    ASSERT_EQ(relaxed->loaded_count(), 1u);
    EXPECT_EQ(relaxed->entries()[0].hook->spec().on_error, FailurePolicy::Open);
  }
}

// Found in an adversarial run: a script redeployed by rename came out 0644, and the reload left
// it out as if deleted (no count, no error). It is a file that does not load: its version from
// before runs on, and says why.
TEST(HookChainLoad, AScriptThatLostItsExecutableBitRunsItsVersionFromBefore) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  const std::filesystem::path script = std::filesystem::path(dir) / "_20_chain_keep_prog.py";
  std::filesystem::copy_file(std::string(HOOKGATE_TEST_HOOK_FIXTURES) + "/program/proto_hook.py",
                             script);
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors;
  auto running = HookChain::load(cfg, errors);
  ASSERT_EQ(running->loaded_count(), 1u) << (errors.empty() ? "" : errors[0].str());
  std::filesystem::permissions(
      script, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  errors.clear();
  EXPECT_TRUE(HookChain::load(cfg, errors)->entries().empty());  // a start: left out, warned
  errors.clear();
  auto reloaded = HookChain::load(cfg, errors, nullptr, nullptr, running.get());
  ASSERT_EQ(reloaded->entries().size(), 1u);
  const HookEntry& entry = reloaded->entries()[0];
  EXPECT_EQ(entry.hook, running->entries()[0].hook);
  EXPECT_NE(entry.error.find("is not executable"), std::string::npos) << entry.error;
  EXPECT_NE(entry.error.find("the version that ran before runs on"), std::string::npos)
      << entry.error;
  EXPECT_EQ(reloaded->kept_count(), 1u);
  EXPECT_EQ(errors.size(), 1u);
}

// A closed hook that has not loaded since the start stands in closed; a reload whose file says no
// on_error at all (truncated) keeps that policy, its kind and patterns, until the file loads.
TEST(HookChainLoad, AClosedStandInKeepsItsPolicyWhileItsFileDoesNotLoad) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_12_chain_keep_closed.yaml",
             "kind: transform\non_error: closed\nevents: [\"pw.*\"]\nactions:\n"
             "  - frobnicate: [data.password]\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  config::Diagnostics errors;
  auto running = HookChain::load(cfg, errors);
  ASSERT_EQ(running->entries().size(), 1u);
  ASSERT_TRUE(running->entries()[0].stand_in);
  write_file(dir, "_12_chain_keep_closed.yaml", "");
  errors.clear();
  auto reloaded = HookChain::load(cfg, errors, nullptr, nullptr, running.get());
  const HookEntry& entry = reloaded->entries()[0];
  ASSERT_TRUE(entry.stand_in) << entry.error;
  EXPECT_NE(entry.error.find("its running version was on_error: closed"), std::string::npos)
      << entry.error;
  Event secret = make_event(R"({"type":"pw.login","data":{"password":"hunter2"}})");
  EXPECT_TRUE(reloaded->run(secret, {}).vetoed);
  Event other = make_event(R"({"type":"user.created","data":{}})");
  EXPECT_FALSE(reloaded->run(other, {}).vetoed);  // its patterns, kept too
}

// With hooks.fail_open: false every hook fails closed, a file that cannot even be parsed too (its
// kind and patterns unknown, it stands in for everything); a same-directory duplicate does not:
// the hook of that name is in the chain.
TEST(HookChainLoad, UnderFailOpenFalseABrokenFileStandsInForEverything) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_chain_standin_syntax.yaml", "kind: [unclosed\n");
  write_file(dir, "_20_chain_standin_dup.yaml",
             "kind: veto\nwhen: {field: data.drop, equals: true}\n");
  write_file(dir, "_30_chain_standin_dup.yml", "kind: [unclosed\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  cfg.fail_open = false;
  config::Diagnostics errors;
  auto chain = HookChain::load(cfg, errors);
  ASSERT_EQ(chain->entries().size(), 3u);
  EXPECT_TRUE(chain->entries()[0].stand_in);
  EXPECT_TRUE(chain->entries()[1].hook);
  EXPECT_FALSE(chain->entries()[2].stand_in);
  Event ev = make_event(R"({"type":"anything"})");
  ChainOutcome out = chain->run(ev, {});
  EXPECT_TRUE(out.vetoed);
  EXPECT_EQ(out.vetoed_by, "chain_standin_syntax");
}

TEST(HookChainLoad, DisabledHooksGiveAnEmptyChain) {
  TempDir tmp;
  std::string dir = tmp.dir("hooks");
  write_file(dir, "_10_x.yaml", "kind: veto\nwhen: {field: type, exists: true}\n");
  config::HooksConfig cfg;
  cfg.directories = {dir};
  cfg.enabled = false;
  config::Diagnostics errors;
  auto chain = HookChain::load(cfg, errors);
  EXPECT_TRUE(chain->entries().empty());
  Event ev = make_event(R"({"type":"t"})");
  EXPECT_FALSE(chain->run(ev, {}).vetoed);
}

TEST(HookChainObservers, ObserversAreNotPartOfTheSequentialChain) {
  auto observer = fake("chain_obs_only", HookKind::Observe,
                       [](Event&) { return answer(Action::Veto, "observers cannot veto"); });
  auto chain = chain_of({observer});
  Event ev = make_event(R"({"type":"t"})");
  std::vector<ChainStep> trace;
  EXPECT_FALSE(chain->run(ev, {}, &trace).vetoed);
  EXPECT_TRUE(trace.empty());
  EXPECT_EQ(observer->calls(), 0);

  ObserverPool pool(1, 10, {});
  chain->dispatch_observers(std::make_shared<const Event>(std::move(ev)), pool);
  pool.stop();
  EXPECT_EQ(observer->calls(), 1);
}

// The observer is held until the events have gone through: if the chain waited for it, the
// loop would still be running when the gate opens.
TEST(HookChainObservers, ABlockedObserverDoesNotDelayTheEvent) {
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  auto observer = fake("chain_obs_blocked", HookKind::Observe, [gate](Event&) {
    gate.wait();
    return answer(Action::Continue);
  });
  auto transform = fake("chain_obs_transform", HookKind::Transform,
                        [](Event&) { return answer(Action::Continue); });
  auto chain = chain_of({observer, transform});
  ObserverPool pool(2, 100, {});
  auto events = std::async(std::launch::async, [&] {
    for (int i = 0; i < 3; ++i) {
      Event ev = make_event(R"({"type":"t"})");
      EXPECT_FALSE(chain->run(ev, {}).vetoed);
      chain->dispatch_observers(std::make_shared<const Event>(std::move(ev)), pool);
    }
  });
  const bool went_through = events.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  open.set_value();
  events.wait();
  EXPECT_TRUE(went_through) << "the events waited for the observer";
  EXPECT_EQ(transform->calls(), 3);
  pool.stop(std::chrono::seconds(10));
  EXPECT_EQ(observer->calls(), 3);
}

}  // namespace
}  // namespace hookgate::hooks
