#pragma once
// The hook chain (PRODUCT.md "Hooks"): veto and transform hooks as ONE sequential chain in
// filename order, then observers handed to the ObserverPool. A chain is immutable once built and
// shared as std::shared_ptr<const HookChain>: a reload builds a new one and swaps the pointer, so
// events in flight finish on the generation they started on.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/diagnostics.hpp"
#include "gateway/event.hpp"
#include "gateway/hooks/hook_loader.hpp"
#include "gateway/hooks/discovery.hpp"
#include "gateway/hooks/hook.hpp"
#include "gateway/hooks/hook_runner.hpp"
#include "gateway/hooks/observer_pool.hpp"

namespace hookgate::hooks {

struct HookEntry {
  HookFile file;
  // Null when the file failed to load, unless a reload keeps the version that ran before (then
  // `error` is set too: see HookChain::load).
  HookPtr hook;
  std::string error;  // why the file failed to load ("" when it loaded)
  // Only for a veto or transform hook (or one of unknown kind) that failed to load under
  // on_error: closed: run in its place, it fails every event the hook would have seen, so those
  // are vetoed as a failure of the hook would veto them instead of passing unchecked (see
  // make_failed_load_stand_in). The entry still counts as failed to load.
  HookPtr stand_in;
};

// One hook's part in one run(), for `hookgate hooks test` and debugging.
struct ChainStep {
  std::string hook;
  std::string kind;    // veto | transform
  std::string result;  // continue | replace | veto | skip | failed | timeout | not-matched
  std::string detail;  // veto reason, failure reason, or a note ("replacement ignored")
  int64_t duration_ns = 0;
};

struct ChainOutcome {
  bool vetoed = false;
  std::string vetoed_by;  // hook name
  std::string reason;
};

// A hook that stands in for one that failed to load with `error`, whose settings were read as far
// as `attempted`: null when the hook fails open (it is left out) or is an observer (observers
// never veto). An unknown kind counts as sequential, and unknown patterns as "*": under
// on_error: closed a hook that may have been a redaction must not be assumed away.
HookPtr make_failed_load_stand_in(const AttemptedHook& attempted, const std::string& error);

class HookChain {
 public:
  // Discovers and loads every hook of config.directories. A file that fails to load is kept as an
  // entry carrying its error (and reported in `errors` and the log) and left out of execution,
  // unless its on_error is closed: then a stand-in vetoes the events it would have seen (at most
  // one per hook name, and none when another file of that name loaded). The rest load. A disabled
  // hooks section gives an empty chain. `cancel`, when set, is looked at before each hook: once
  // true the load stops there (the gateway is stopping, and a load of hooks that each wait out a
  // handshake timeout must not hold its exit) and returns nullptr.
  // `warnings` (for `check` and `hooks list`) gets what discovery only logs otherwise.
  // `previous`, the running chain on a reload: a hook that ran there keeps running that version
  // while its file fails to load (its entry carries the error too); one that stood in closed
  // there stays closed (a truncated or mistyped file cannot say on_error, and must not let a
  // redactor's events through on the global default).
  static std::shared_ptr<const HookChain> load(const config::HooksConfig& config,
                                               config::Diagnostics& errors,
                                               const std::atomic<bool>* cancel = nullptr,
                                               config::Diagnostics* warnings = nullptr,
                                               const HookChain* previous = nullptr);
  // Builds a chain from entries already in run order (tests, tools). Entries without a hook are
  // listed but never run, except for their stand_in.
  static std::shared_ptr<const HookChain> build(std::vector<HookEntry> entries,
                                                int64_t max_event_bytes = 1 << 20);

  // Every discovered file in run order, loaded or not.
  const std::vector<HookEntry>& entries() const { return entries_; }
  // Files that loaded; files that did not (kept ones included); of those, the ones whose version
  // from before the reload runs on.
  size_t loaded_count() const { return entries_.size() - failed_count(); }
  size_t failed_count() const { return failed_; }
  size_t kept_count() const { return kept_; }
  bool has_observers() const { return !observers_.empty(); }

  // Runs the veto/transform chain on `event` (which the transforms modify or replace). Stops at
  // the first veto. Hook failures follow each hook's on_error. Thread-safe; never throws.
  ChainOutcome run(Event& event, const DiagnosticSink& diagnostics,
                   std::vector<ChainStep>* trace = nullptr) const;

  // Queues every observe hook whose patterns match the event; returns immediately. Call it with the
  // event run() produced, for events that were not vetoed.
  void dispatch_observers(std::shared_ptr<const Event> event, ObserverPool& pool) const;

 private:
  struct Slot {
    HookPtr hook;
    std::shared_ptr<const HookStats> stats;
    bool stand_in = false;  // HookEntry::stand_in: its failures are load failures
  };
  HookChain(std::vector<HookEntry> entries, int64_t max_event_bytes);

  // Applies a hook failure's policy; returns true when it vetoed the event.
  bool on_failure(const Slot& slot, const HookFailure& failure, const Event& event,
                  const DiagnosticSink& diagnostics, ChainOutcome& outcome) const;
  void vetoed(const Slot& slot, std::string reason, const Event& event,
              const DiagnosticSink& diagnostics, ChainOutcome& outcome) const;

  std::vector<HookEntry> entries_;
  std::vector<Slot> sequential_;  // veto + transform, in run order
  std::vector<Slot> observers_;
  size_t failed_ = 0;        // entries whose file did not load
  size_t kept_ = 0;          // of those, entries running the version from before
  int64_t max_event_bytes_;  // HooksConfig::max_event_bytes
  metrics::Counter& vetoed_total_;
};

}  // namespace hookgate::hooks
