#pragma once
// The hook interface (PRODUCT.md "Hooks"), shaped after Envoy's filters: one small abstract class,
// one outcome enum, an explicit failure policy. Each form implements Hook in its own file:
// declarative_hook.cpp, program_hook.cpp (both process forms, program and one-shot, which share
// how a hook process starts and is stopped), native_hook.cpp; hook_loader.cpp reads any hook file
// and hands it to its form. The chain applies kinds, ordering and policies.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/common/result.hpp"
#include "gateway/event.hpp"
#include "gateway/pattern.hpp"

namespace hookgate::hooks {

enum class HookKind { Veto, Transform, Observe };
enum class HookForm { Declarative, Program, OneShot, Native };
enum class FailurePolicy { Open, Closed };

// What a hook decided for one event.
enum class Action {
  Continue,  // go on (a transform may have modified the event in place)
  Replace,   // go on with HookVerdict::replacement
  Veto,      // drop the event; HookVerdict::reason says why
  Skip,      // nothing to do for this event (not a failure)
};

struct HookVerdict {
  Action action = Action::Continue;
  std::optional<Event> replacement;
  std::string reason;
  // With Continue: the hook changed the event in place (a declarative transform), so it is
  // counted and shown as `replace`, as a replacement would be.
  bool edited_in_place = false;
};

// What a veto hook's replace becomes in every form: Replace with no event, which the chain
// counts as continue ("replacement ignored"). Checking it first made an invalid one a failure,
// which vetoed the event under on_error: closed (found in review).
inline HookVerdict ignored_replacement() {
  HookVerdict v;
  v.action = Action::Replace;
  return v;
}

// A veto reason goes into logs, diagnostics and every subscribed webhook's spool row: the chain
// keeps at most this many bytes of it, whatever the hook's form.
inline constexpr size_t kMaxVetoReason = 1024;

// A hook failure: it erred, crashed, answered garbage, or outlived its timeout.
struct HookFailure {
  enum class Kind { Error, Timeout };
  Kind kind = Kind::Error;
  std::string reason;  // logged and sent in diagnostics: never the event's content
  // Shown only by `hookgate hooks test` (a hook author's own dry run, whose logging is off): what
  // the hook wrote to stderr, which may quote the event and so stays out of `reason`.
  std::string tool_detail;
};

using HookResult = Result<HookVerdict, HookFailure>;

// Settings every hook has, whatever its form.
struct HookSpec {
  std::string name;       // file name without the numeric prefix and extension
  std::string file;       // absolute path of the defining file
  std::string directory;  // the hook directory it came from
  HookKind kind = HookKind::Observe;
  HookForm form = HookForm::Declarative;
  std::vector<std::string> events{"*"};
  int timeout_ms = 5000;
  FailurePolicy on_error = FailurePolicy::Open;
  std::string config_json = "{}";  // the hook's `config` map as JSON
};

class Hook {
 public:
  explicit Hook(HookSpec spec) : spec_(std::move(spec)), patterns_(spec_.events) {}
  virtual ~Hook() = default;
  Hook(const Hook&) = delete;
  Hook& operator=(const Hook&) = delete;

  const HookSpec& spec() const { return spec_; }
  bool matches(std::string_view event_type) const { return patterns_.matches(event_type); }

  // Runs the hook on one event within spec().timeout_ms. Never throws. A hook may modify `event`
  // in place only when it returns Action::Continue; on failure `event` must be unchanged.
  // Thread-safe: observers run on pool threads, `hooks test` may run beside the pipeline.
  virtual HookResult handle(Event& event) = 0;
  // Read-only JSON for status pages (a native hook's snapshot(), a program hook's pid/restarts).
  virtual std::string snapshot() const { return "{}"; }

 protected:
  // For forms that learn kind/events after construction (a program's handshake line).
  void set_kind_and_events(HookKind kind, std::vector<std::string> events) {
    spec_.kind = kind;
    spec_.events = std::move(events);
    patterns_ = PatternSet(spec_.events);
  }

 private:
  HookSpec spec_;
  PatternSet patterns_;
};

using HookPtr = std::shared_ptr<Hook>;
using LoadResult = Result<HookPtr, std::string>;  // error: a one-line reason for `hooks list`

const char* to_string(HookKind kind);
const char* to_string(HookForm form);
std::optional<HookKind> parse_hook_kind(std::string_view text);

}  // namespace hookgate::hooks
