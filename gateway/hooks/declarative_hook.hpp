#pragma once
// Declarative YAML hooks (PRODUCT.md "Hooks", form 1): kind + when/actions/reason, compiled once
// at load into a small condition/action tree, so no YAML is touched at event time. The hook file
// loader (hook_loader.hpp) reads the keys every hook file shares and hands the rest here.
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"
#include "gateway/hooks/hook.hpp"

namespace hookgate::hooks {

// The declarative part of a hook file whose shared keys (kind:, events:, timeout_ms:, ...) `r` has
// read into `spec` and `kind`: its when:, actions: and reason:, then r.finish(). Every schema
// error goes to `errors` with its position; the result is then an error.
LoadResult read_declarative_hook(HookSpec spec, std::optional<HookKind> kind, config::MapReader& r,
                                 const std::string& path, config::Diagnostics& errors);

// A YAML value as JSON text, with the declarative hooks' scalar typing (5 → number, "5" → string)
// and ${VAR} expansion: a hook's `config:` as its program or library gets it.
std::optional<std::string> yaml_to_json_text(const YAML::Node& node, const std::string& file,
                                             config::Diagnostics& errors);

}  // namespace hookgate::hooks
