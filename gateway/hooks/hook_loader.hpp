#pragma once
// The loader that turns any discovered hook file into a Hook. A YAML file is either a declarative
// hook (kind + when/actions/reason: declarative_hook.hpp) or a descriptor for another form:
// `run:` → program, `command:` → one-shot, `library:` → native. `*.so` files load as native hooks
// and other executables as program hooks. Schema errors are config::Diagnostics with
// FILE:LINE:COL.
#include <optional>

#include "config/config.hpp"
#include "gateway/hooks/discovery.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// What a hook file gets before it says anything itself: name, file and directory from discovery,
// form from the discovery guess, timeout from hooks.default_timeout_ms, on_error from
// hooks.fail_open.
HookSpec default_spec(const HookFile& file, const config::HooksConfig& defaults);

// What a loader had read of a hook's settings when it stopped: default_spec() plus whatever the
// file set before the failure (on_error, events, kind). The chain stands in for a hook that fails
// to load under on_error: closed (HookChain::load). `kind` stays unset until something said it.
struct AttemptedHook {
  HookSpec spec;
  std::optional<HookKind> kind;
};

// Loads a *.yaml/*.yml hook file. Every schema error is appended to `errors` with its position;
// the returned error is a one-line summary (the first diagnostic, and how many more there are).
LoadResult load_yaml_hook(const HookFile& file, const config::HooksConfig& defaults,
                          config::Diagnostics& errors, AttemptedHook* attempted = nullptr);

// Loads any discovered hook file, by its form: YAML → load_yaml_hook, *.so → make_native_hook,
// executable → make_program_hook. A file discovery already marked as broken fails with its error.
// With `attempted`, it receives the settings read on the way (see AttemptedHook).
LoadResult load_hook(const HookFile& file, const config::HooksConfig& defaults,
                     config::Diagnostics& errors, AttemptedHook* attempted = nullptr);

}  // namespace hookgate::hooks
