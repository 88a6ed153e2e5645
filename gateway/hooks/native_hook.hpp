#pragma once
// Native hooks: a shared library exporting the C ABI of gateway/hooks/sdk/hookgate_hook.h.
#include <string>

#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// dlopen()s `so_path` (RTLD_NOW | RTLD_LOCAL), checks the ABI version, calls init(config_json).
// spec.kind/events come from the library's descriptor unless `descriptor_sets_kind`.
LoadResult make_native_hook(HookSpec spec, std::string so_path, bool descriptor_sets_kind);

}  // namespace hookgate::hooks
