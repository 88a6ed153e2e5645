#include "gateway/hooks/chain.hpp"

#include <spdlog/spdlog.h>

#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "gateway/common/clock.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/text.hpp"
#include "gateway/hooks/hook_loader.hpp"

namespace hookgate::hooks {
namespace {

// A replacement is the same event, modified: attributes it leaves out keep the original's values
// (a program may answer with just type and data), so the event keeps its identity (id) for
// delivery and deduplication. Then the envelope rules must hold, as for a published event.
Status accept_replacement(std::optional<Event>& replacement, const Event& original,
                          int64_t max_event_bytes) {
  if (!replacement) return make_error("no event in the answer");
  Event& r = *replacement;
  if (r.type().empty()) return make_error("event \"type\" must be a non-empty string");
  auto& doc = r.doc();
  for (const char* key : {"id", "source", "time", "specversion"}) {
    if (doc.HasMember(key)) continue;
    auto it = original.doc().FindMember(key);
    if (it != original.doc().MemberEnd())
      doc.AddMember(JsonValue(rapidjson::StringRef(key)), JsonValue(it->value, r.allocator()),
                    r.allocator());
  }
  if (Status st = r.normalize(now_unix_ms()); !st) return st;
  if (is_diagnostic_type(r.type())) return make_error(kReservedTypeReason);
  // As the bus refuses an oversize message: a transform must not grow an event past what the
  // spool, the memory bounds and the receivers were sized for. Only growth: the attributes the
  // gateway fills in (id, time, ...) can take an event the bus accepted past the limit, and a
  // redaction hook's same-size answer must not be refused for that (found in review: the
  // unredacted event went on under on_error: open).
  if (const size_t bytes = r.json_bytes();
      static_cast<int64_t>(bytes) > max_event_bytes && bytes > original.json_bytes())
    return make_error(std::to_string(bytes) + " bytes, larger than the event and over " +
                      "bus.max_message_bytes (" + std::to_string(max_event_bytes) + ")");
  return {};
}

// In the place of a hook that failed to load (make_failed_load_stand_in): each event it is asked
// about fails with the load error, so the chain's on_error: closed path vetoes, counts, logs and
// reports it as it would a failure of the hook itself.
class FailedLoadStandIn final : public Hook {
 public:
  FailedLoadStandIn(HookSpec spec, const std::string& error)
      : Hook(std::move(spec)), reason_("failed to load: " + excerpt(error, kMaxVetoReason)) {}
  HookResult handle(Event&) override { return HookFailure{HookFailure::Kind::Error, reason_}; }

 private:
  const std::string reason_;
};

}  // namespace

HookPtr make_failed_load_stand_in(const AttemptedHook& attempted, const std::string& error) {
  if (attempted.spec.on_error != FailurePolicy::Closed) return nullptr;
  if (attempted.kind == HookKind::Observe) return nullptr;
  HookSpec spec = attempted.spec;
  spec.kind = attempted.kind.value_or(HookKind::Veto);
  return std::make_shared<FailedLoadStandIn>(std::move(spec), error);
}

HookChain::HookChain(std::vector<HookEntry> entries, int64_t max_event_bytes)
    : entries_(std::move(entries)),
      max_event_bytes_(max_event_bytes),
      vetoed_total_(metrics::counter("hookgate_events_vetoed_total",
                                     "Events dropped by a veto hook or a closed hook failure")) {
  for (const auto& e : entries_) {
    if (!e.error.empty()) ++failed_;
    if (!e.error.empty() && e.hook) ++kept_;
    const HookPtr& hook = e.hook ? e.hook : e.stand_in;
    if (!hook) continue;
    // Series are looked up here, once per hook, so run() is only atomic adds.
    Slot slot{hook, std::make_shared<const HookStats>(hook->spec().name), !e.hook};
    if (hook->spec().kind == HookKind::Observe) {
      observers_.push_back(std::move(slot));
    } else {
      sequential_.push_back(std::move(slot));
    }
  }
}

std::shared_ptr<const HookChain> HookChain::build(std::vector<HookEntry> entries,
                                                  int64_t max_event_bytes) {
  return std::shared_ptr<const HookChain>(new HookChain(std::move(entries), max_event_bytes));
}

std::shared_ptr<const HookChain> HookChain::load(const config::HooksConfig& config,
                                                 config::Diagnostics& errors,
                                                 const std::atomic<bool>* cancel,
                                                 config::Diagnostics* warnings,
                                                 const HookChain* previous) {
  // Of each hook name in the previous chain: the version that ran (kept by a reload whose file
  // does not load), and for one that ran closed without one, its settings (standing in).
  std::map<std::string, HookPtr> ran_before;
  std::map<std::string, const HookSpec*> closed_before;
  if (previous)
    for (const auto& e : previous->entries()) {
      if (e.hook) ran_before.emplace(e.file.name, e.hook);
      const HookPtr& hook = e.hook ? e.hook : e.stand_in;
      if (hook && hook->spec().on_error == FailurePolicy::Closed)
        closed_before.emplace(e.file.name, &hook->spec());
    }
  std::vector<HookEntry> entries;
  std::set<std::string> kept_closed;  // paths of entries closed by their running version
  if (!config.enabled) return build(std::move(entries), config.max_event_bytes);
  std::vector<HookFile> not_executable;
  for (auto& file :
       discover_hooks(config.directories, errors, warnings, previous ? &not_executable : nullptr)) {
    if (cancel && cancel->load()) return nullptr;  // the hooks loaded so far stop as they go
    HookEntry entry;
    AttemptedHook attempted;
    if (!file.error.empty()) {
      entry.error = file.error;
      errors.push_back({{file.path, 0, 0}, file.error});
      attempted.spec = default_spec(file, config);
    } else {
      size_t before = errors.size();
      // A thread or memory the system will not give (a hook's worker, its stderr reader) is this
      // hook's load error, not the end of the loader thread and with it the gateway.
      LoadResult loaded = [&]() -> LoadResult {
        try {
          return load_hook(file, config, errors, &attempted);
        } catch (const std::exception& e) {
          return std::string("cannot load: ") + e.what();
        }
      }();
      if (loaded.ok() && loaded.value()) {
        entry.hook = std::move(loaded.value());
      } else {
        entry.error = loaded.ok() ? "the loader returned no hook" : loaded.error();
        // Loaders report positioned diagnostics themselves; make sure every failure has one.
        if (errors.size() == before) errors.push_back({{file.path, 0, 0}, entry.error});
      }
    }
    // Decision: on a reload, a file that does not load (a half-written deploy, a typo) leaves the
    // version that ran before running, as Envoy and Fluent Bit keep their last good config.
    // Found in an exploratory run: a fail-open redactor dropped out of the chain, and the next
    // events went out with their passwords. A file deleted is another matter: its hook goes.
    // (Said below, once a same-directory duplicate has been told apart.)
    // Decision: a hook that fails to load under on_error: closed (and has no version from
    // before) fails closed, like a hook that fails on an event. Left out, a redaction hook whose
    // handshake was slow would let events through unredacted until the next reload.
    if (!entry.error.empty()) {
      if (auto ran = ran_before.find(file.name); ran != ran_before.end()) {
        entry.hook = ran->second;
      } else {
        if (attempted.spec.on_error != FailurePolicy::Closed)
          if (auto closed = closed_before.find(file.name); closed != closed_before.end()) {
            attempted.spec = *closed->second;
            attempted.kind = closed->second->kind;
            kept_closed.insert(file.path);  // said below, if it stands in
          }
        entry.stand_in = make_failed_load_stand_in(attempted, entry.error);
      }
    }
    // A YAML file's form is known once its keys are read (a run: descriptor is a program).
    if (file.form == HookForm::Declarative) file.form = attempted.spec.form;
    entry.file = std::move(file);
    entries.push_back(std::move(entry));
  }
  // A script that ran before and lost its executable bit (found in an adversarial run: a
  // deploy by rename made it 0644) is a file that does not load, not a deleted one: the version
  // from before runs on (or stands in closed), said as any other. Matched by path: a helper
  // script a deleted descriptor ran is not that descriptor's hook.
  if (previous)
    for (auto& file : not_executable) {
      const auto before =
          std::find_if(previous->entries().begin(), previous->entries().end(),
                       [&](const HookEntry& e) { return e.file.path == file.path; });
      if (before == previous->entries().end() || (!before->hook && !before->stand_in)) continue;
      if (std::any_of(entries.begin(), entries.end(),
                      [&](const HookEntry& e) { return e.file.name == file.name; }))
        continue;
      HookEntry entry;
      entry.hook = before->hook;
      entry.stand_in = before->hook ? nullptr : before->stand_in;
      if (entry.stand_in) kept_closed.insert(file.path);
      entry.error = kNotExecutable;
      errors.push_back({{file.path, 0, 0}, entry.error});
      entry.file = std::move(file);
      entries.push_back(std::move(entry));
    }
  std::stable_sort(entries.begin(), entries.end(), [](const HookEntry& a, const HookEntry& b) {
    return runs_before(a.file, b.file);
  });
  // One place in the chain per hook name: no stand-in where a file of that name loaded (the
  // first of a same-directory duplicate), nor a second one.
  std::set<std::string> present;
  for (const auto& e : entries)
    if (e.hook && e.error.empty()) present.insert(e.file.name);
  // A kept version once only too: not beside a file of its name that loads, nor twice.
  for (auto& e : entries) {
    if (!e.hook || e.error.empty()) continue;
    if (!present.insert(e.file.name).second) {
      e.hook.reset();
      continue;
    }
    // A program's process is the version that ran before only until it restarts (a crash, a
    // timeout): a new one runs the file on disk. A one-shot hook keeps its command, and any
    // script that command names is read from disk at each run.
    const HookForm form = e.hook->spec().form;
    e.error += form == HookForm::Program
                   ? " (the version that ran before runs on until the file loads: its running "
                     "process, until that restarts, which runs the file on disk)"
               : form == HookForm::OneShot
                   ? " (the version that ran before runs on until the file loads: its command, "
                     "which reads a script it names from disk at each run)"
                   : " (the version that ran before runs on until the file loads)";
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    HookEntry& e = entries[i];
    if (e.stand_in && !present.insert(e.file.name).second) e.stand_in.reset();
    if (e.stand_in && kept_closed.count(e.file.path))
      e.error +=
          " (its running version was on_error: closed, which a file that does not load "
          "cannot relax)";
    if (e.stand_in)
      e.error += " (on_error: closed: the events it would see are vetoed until it loads)";
    if (!e.error.empty())
      spdlog::warn("hook {} ({}) not loaded: {}", e.file.name, e.file.path, e.error);
    // Diagnostics never pass through hooks (a hook's own failure would feed the chain): a
    // pattern for them is a hook that silently never runs (found in an exploratory run).
    if (!e.hook || !e.error.empty()) continue;
    for (const auto& pattern : e.hook->spec().events) {
      if (!pattern.starts_with(kDiagnosticTypePrefix)) continue;
      const std::string said = "hook " + e.file.name + ": events pattern '" + pattern +
                               "' never matches: hookgate.* diagnostics go to webhooks only, "
                               "never through hooks (subscribe a webhook to them instead)";
      spdlog::warn("{}", said);
      if (warnings) warnings->push_back({{e.file.path, 0, 0}, said});
    }
  }
  auto chain = build(std::move(entries), config.max_event_bytes);
  if (chain->kept_count() > 0)
    spdlog::info("hooks: {} loaded, {} failed to load ({} of them run the version from before)",
                 chain->loaded_count(), chain->failed_count(), chain->kept_count());
  else
    spdlog::info("hooks: {} loaded, {} failed to load", chain->loaded_count(),
                 chain->failed_count());
  return chain;
}

ChainOutcome HookChain::run(Event& event, const DiagnosticSink& diagnostics,
                            std::vector<ChainStep>* trace) const {
  ChainOutcome outcome;
  // Steady-clock reading that can start the next hook's timing: the previous hook's end, as
  // long as only counter increments ran since. Anything slower in between (a replacement's
  // validation, a failure's log line) clears it, so it is not charged to the next hook.
  std::optional<int64_t> clock_ns;
  // The step is built only when a trace is asked for (`hookgate hooks test`): on the ingest
  // path it would cost string copies per hook per event.
  auto record = [&](const Slot& slot, const char* result, int64_t duration_ns,
                    std::string_view detail = {}) {
    if (!trace) return;
    const HookSpec& spec = slot.hook->spec();
    trace->push_back(
        ChainStep{spec.name, to_string(spec.kind), result, std::string(detail), duration_ns});
  };
  for (const Slot& slot : sequential_) {
    Hook& hook = *slot.hook;
    const HookSpec& spec = hook.spec();
    if (!hook.matches(event.type())) {
      record(slot, "not-matched", 0);
      continue;
    }
    Invocation inv = invoke_hook(hook, event, *slot.stats, clock_ns ? *clock_ns : now_steady_ns());
    clock_ns = inv.end_ns;
    if (!inv.result.ok()) {
      clock_ns.reset();
      const HookFailure& failure = inv.result.error();
      record(slot, failure.kind == HookFailure::Kind::Timeout ? "timeout" : "failed",
             inv.duration_ns, failure.tool_detail.empty() ? failure.reason : failure.tool_detail);
      if (on_failure(slot, failure, event, diagnostics, outcome)) return outcome;
      continue;
    }
    HookVerdict& verdict = inv.result.value();
    switch (verdict.action) {
      case Action::Continue:
        if (verdict.edited_in_place && spec.kind == HookKind::Transform) {
          slot.stats->runs(RunResult::Replace).inc();
          record(slot, "replace", inv.duration_ns);
        } else {
          slot.stats->runs(RunResult::Continue).inc();
          record(slot, "continue", inv.duration_ns);
        }
        break;
      case Action::Skip:
        // Not a failure: the hook had nothing to do for this event.
        slot.stats->runs(RunResult::Skip).inc();
        record(slot, "skip", inv.duration_ns);
        break;
      case Action::Replace:
        clock_ns.reset();
        if (spec.kind == HookKind::Veto) {
          // A veto hook may only allow or veto; its edits are ignored, not treated as garbage.
          report_ignored_answer(*slot.stats, spec.name,
                                "a veto hook answered with an edited event (veto hooks allow or "
                                "veto; a transform hook edits)");
          slot.stats->runs(RunResult::Continue).inc();
          record(slot, "continue", inv.duration_ns,
                 "replacement or output ignored (veto hooks cannot modify events)");
        } else if (auto st = accept_replacement(verdict.replacement, event, max_event_bytes_);
                   !st) {
          HookFailure failure{HookFailure::Kind::Error,
                              "replacement is not a valid event: " + st.error().message};
          record(slot, "failed", inv.duration_ns, failure.reason);
          if (on_failure(slot, failure, event, diagnostics, outcome)) return outcome;
        } else {
          event = std::move(*verdict.replacement);
          slot.stats->runs(RunResult::Replace).inc();
          record(slot, "replace", inv.duration_ns);
        }
        break;
      case Action::Veto: {
        slot.stats->runs(RunResult::Veto).inc();
        std::string reason = verdict.reason.empty() ? "vetoed by hook " + spec.name
                                                    : excerpt(verdict.reason, kMaxVetoReason);
        record(slot, "veto", inv.duration_ns, reason);
        vetoed(slot, std::move(reason), event, diagnostics, outcome);
        return outcome;
      }
    }
  }
  return outcome;
}

bool HookChain::on_failure(const Slot& slot, const HookFailure& failure, const Event& event,
                           const DiagnosticSink& diagnostics, ChainOutcome& outcome) const {
  const HookSpec& spec = slot.hook->spec();
  bool closed = spec.on_error == FailurePolicy::Closed;
  report_failure(*slot.hook, *slot.stats, failure, event.id(), event.type(), diagnostics,
                 closed ? "event vetoed (on_error: closed)" : "hook skipped (on_error: open)");
  if (!closed) return false;
  // A stand-in's reason already says "failed to load: ...".
  vetoed(slot, "hook " + spec.name + (slot.stand_in ? " " : " failed: ") + failure.reason, event,
         diagnostics, outcome);
  return true;
}

void HookChain::vetoed(const Slot& slot, std::string reason, const Event& event,
                       const DiagnosticSink& diagnostics, ChainOutcome& outcome) const {
  vetoed_total_.inc();
  outcome.vetoed = true;
  outcome.vetoed_by = slot.hook->spec().name;
  outcome.reason = std::move(reason);
  spdlog::debug("event {} ({}) vetoed by hook {}: {}", event.id(), event.type(), outcome.vetoed_by,
                outcome.reason);
  DiagnosticEvent d;
  d.type = diag::kEventVetoed;
  d.hook = outcome.vetoed_by;
  d.event_id = std::string(event.id());
  d.event_type = std::string(event.type());
  d.reason = outcome.reason;
  emit_diagnostic(diagnostics, std::move(d));
}

void HookChain::dispatch_observers(std::shared_ptr<const Event> event, ObserverPool& pool) const {
  if (!event) return;
  size_t bytes = 0;
  for (const Slot& slot : observers_) {
    if (slot.hook->matches(event->type())) {
      if (bytes == 0) bytes = event->memory_bytes();  // once per event, not per observer
      pool.submit({slot.hook, slot.stats, event, bytes});
    }
  }
}

}  // namespace hookgate::hooks
