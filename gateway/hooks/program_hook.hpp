#pragma once
// Program hooks: a long-running co-process speaking newline-delimited JSON (PRODUCT.md "Hooks",
// form 2), and the one-shot `command:` form (a process per event).
#include <string>
#include <vector>

#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// Starts `argv` as a co-process and reads its handshake line
// ({"hookgate":1,"kind":..,"events":..}). When `descriptor_sets_kind` is true (a YAML descriptor
// with `run:`), spec.kind wins and the handshake may be just {"hookgate":1}; otherwise the
// handshake must name a kind. spec.events win when the descriptor sets them too
// (`descriptor_sets_events`); otherwise the handshake's (default `*`) apply.
LoadResult make_program_hook(HookSpec spec, std::vector<std::string> argv,
                             bool descriptor_sets_kind, bool descriptor_sets_events = true);

// `command` runs through /bin/sh -c per event. Exit 0 = continue (or a replaced event on stdout),
// an exit code in `veto_exit_codes` = veto with stderr as reason, anything else = failure.
LoadResult make_oneshot_hook(HookSpec spec, std::string command, std::vector<int> veto_exit_codes);

}  // namespace hookgate::hooks
