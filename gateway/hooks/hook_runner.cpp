#include "gateway/hooks/hook_runner.hpp"

#include <spdlog/spdlog.h>

#include "gateway/common/log.hpp"

#include <exception>
#include <optional>

#include "gateway/common/clock.hpp"

namespace hookgate::hooks {

const char* to_string(RunResult result) {
  switch (result) {
    case RunResult::Continue:
      return "continue";
    case RunResult::Replace:
      return "replace";
    case RunResult::Veto:
      return "veto";
    case RunResult::Skip:
      return "skip";
    case RunResult::Failed:
      return "failed";
    case RunResult::Timeout:
      return "timeout";
  }
  return "unknown";
}

HookStats::HookStats(const std::string& hook_name) {
  for (size_t i = 0; i < kRunResultCount; ++i) {
    by_result[i] = &metrics::counter("hookgate_hook_runs_total", "Hook invocations by result",
                                     {{"hook", hook_name}, {"result", to_string(RunResult(i))}});
  }
  failures = &metrics::counter("hookgate_hook_failures_total",
                               "Hook failures (errors, garbage answers, crashes, timeouts)",
                               {{"hook", hook_name}});
  timeouts = &metrics::counter("hookgate_hook_timeouts_total", "Hooks that outlived their timeout",
                               {{"hook", hook_name}});
  duration =
      &metrics::histogram("hookgate_hook_duration_seconds", "Hook run time", {{"hook", hook_name}});
  ignored_answers = &metrics::counter(
      "hookgate_hook_answers_ignored_total",
      "Answers a hook's kind cannot act on (a veto hook's edit, an observer's veto or edit)",
      {{"hook", hook_name}});
}

void report_ignored_answer(const HookStats& stats, const std::string& hook_name,
                           std::string_view what) {
  stats.ignored_answers->inc();
  if (log_limiter_for("hook " + hook_name + " ignored answers", 1).allow())
    spdlog::warn(
        "hook {}: {}; ignored, the event goes on unchanged "
        "(hookgate_hook_answers_ignored_total)",
        hook_name, what);
}

Invocation invoke_hook(Hook& hook, Event& event, const HookStats& stats, int64_t start_ns) {
  std::optional<HookResult> result;
  try {
    result.emplace(hook.handle(event));
  } catch (const std::exception& e) {
    result.emplace(HookFailure{HookFailure::Kind::Error, std::string("hook threw: ") + e.what()});
  } catch (...) {
    result.emplace(HookFailure{HookFailure::Kind::Error, "hook threw an unknown exception"});
  }
  const int64_t end = now_steady_ns();
  stats.duration->observe_ns(end - start_ns);
  return {std::move(*result), end - start_ns, end};
}

void report_failure(const Hook& hook, const HookStats& stats, const HookFailure& failure,
                    std::string_view event_id, std::string_view event_type,
                    const DiagnosticSink& diagnostics, std::string_view consequence) {
  bool timeout = failure.kind == HookFailure::Kind::Timeout;
  stats.failures->inc();
  if (timeout) stats.timeouts->inc();
  stats.runs(timeout ? RunResult::Timeout : RunResult::Failed).inc();
  // Every failure is counted and raises its diagnostic; the log takes 20 a second per hook.
  if (log_limiter_for("hook " + hook.spec().name + " failures", 20).allow())
    spdlog::warn("hook {} {} on event {} ({}): {}; {}", hook.spec().name,
                 timeout ? "timed out" : "failed", event_id, event_type, failure.reason,
                 consequence);
  DiagnosticEvent d;
  d.type = timeout ? diag::kHookTimeout : diag::kHookFailed;
  d.hook = hook.spec().name;
  d.event_id = std::string(event_id);
  d.event_type = std::string(event_type);
  d.reason = failure.reason;
  emit_diagnostic(diagnostics, std::move(d));
}

void emit_diagnostic(const DiagnosticSink& sink, DiagnosticEvent event) {
  if (sink) sink(std::move(event));
}

}  // namespace hookgate::hooks
