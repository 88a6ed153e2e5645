#pragma once
// Native hooks: a shared library exporting the C ABI of gateway/hooks/sdk/hookgate_hook.h.
#include <optional>
#include <string>

#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// dlopen()s `so_path` (RTLD_NOW | RTLD_LOCAL), checks the ABI version, calls init(config_json).
// spec.kind comes from the library's descriptor unless `descriptor_sets_kind`; spec.events too,
// unless `descriptor_sets_kind` and `descriptor_sets_events` (a YAML descriptor with both).
LoadResult make_native_hook(HookSpec spec, std::string so_path, bool descriptor_sets_kind,
                            bool descriptor_sets_events = true);

// Loading runs the library's static constructors and its entry function inside this process, with
// no crash guard (the descriptor it returns is read with one). With a probe set (`hookgate` sets
// its own executable), make_native_hook first opens each library file in a child running `EXE
// __probe-native FILE`: a library that faults or hangs while loading is then refused with the
// reason instead of ending the gateway. Unset (unit tests), or when the probe cannot be started (a
// warning), libraries are opened directly.
void set_native_load_probe(std::string executable);
// The child's side: dlopen()s `so_path`, calls its entry function, reads the descriptor it returns
// as loading will (every string and the events list, within bounds) and exits with a code that
// says whether that worked (never returns).
[[noreturn]] void run_native_load_probe(const std::string& so_path);
// Why a probe that ended with `wait_status` (waitpid's) refuses the library; nullopt when it
// loaded, or is no hook library (the in-process load then says why).
std::optional<std::string> native_probe_refusal(int wait_status);

}  // namespace hookgate::hooks
