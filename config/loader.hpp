#pragma once
// Loads and validates the gateway configuration (PRODUCT.md "Config file"). Every problem is a
// Diagnostic at FILE:LINE:COL; loading reports all of them at once rather than stopping at the
// first.
#include <string>

#include "config/config.hpp"
#include "gateway/common/result.hpp"

namespace hookgate::config {

using ConfigResult = Result<Config, Diagnostics>;

ConfigResult load_config_file(const std::string& path);
// `file` names the text in messages; relative paths resolve against `base_dir`.
ConfigResult load_config_text(const std::string& text, const std::string& file,
                              const std::string& base_dir);
// The embedded defaults `hookgate run` uses without --config: own bus endpoint, a SQLite spool and
// the ./hooks directory under `base_dir`, no webhooks.
Config default_config(const std::string& base_dir);
// The built-in, user and workspace hook directories, in search order.
std::vector<std::string> default_hook_directories(const std::string& base_dir);

}  // namespace hookgate::config
