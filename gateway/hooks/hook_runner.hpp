#pragma once
// What the chain and the observer pool share when they run one hook on one event: the hook's
// metric series (looked up once per hook, not per event), exception-proof invocation, and the
// one-line reporting of a hook failure (log, counters, diagnostic event).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/common/clock.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/diagnostics.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// The `result` label values of hookgate_hook_runs_total.
enum class RunResult { Continue, Replace, Veto, Skip, Failed, Timeout };
inline constexpr size_t kRunResultCount = 6;
const char* to_string(RunResult result);

// One hook's series. Registry series live as long as the process, so a HookStats stays valid for
// observer work items that outlive the chain generation that created it.
struct HookStats {
  explicit HookStats(const std::string& hook_name);

  metrics::Counter& runs(RunResult r) const { return *by_result[static_cast<size_t>(r)]; }

  std::array<metrics::Counter*, kRunResultCount> by_result{};
  metrics::Counter* failures = nullptr;  // hookgate_hook_failures_total (errors and timeouts)
  metrics::Counter* timeouts = nullptr;  // hookgate_hook_timeouts_total
  // hookgate_hook_answers_ignored_total: answers the hook's kind cannot act on (a veto hook's
  // edit, an observer's veto or edit), which run as continue.
  metrics::Counter* ignored_answers = nullptr;
  metrics::Histogram* duration = nullptr;
};

struct Invocation {
  HookResult result;
  int64_t duration_ns = 0;
  int64_t end_ns = 0;  // steady clock when the hook returned
};

// Counts an answer the hook's kind cannot act on and says so in a warn line, at most one a second
// per hook: the hook runs, but not as its author meant.
void report_ignored_answer(const HookStats& stats, const std::string& hook_name,
                           std::string_view what);

// Runs hook.handle(event) and records its duration. Hook::handle must not throw; if one does
// anyway (a buggy native hook), the exception becomes an Error failure instead of escaping.
// `start_ns` is the steady clock just before the call; the chain passes the previous hook's
// end_ns when nothing ran in between, so N hooks cost N + 1 clock reads instead of 2N.
Invocation invoke_hook(Hook& hook, Event& event, const HookStats& stats,
                       int64_t start_ns = now_steady_ns());

// Counts the failure, writes ONE warn line (hook, event id, reason, then `consequence`, e.g.
// "skipped (on_error: open)") and emits hookgate.hook.failed or hookgate.hook.timeout.
void report_failure(const Hook& hook, const HookStats& stats, const HookFailure& failure,
                    std::string_view event_id, std::string_view event_type,
                    const DiagnosticSink& diagnostics, std::string_view consequence);

// Calls `sink` if it is set (tests and tools may run without one).
void emit_diagnostic(const DiagnosticSink& sink, DiagnosticEvent event);

}  // namespace hookgate::hooks
