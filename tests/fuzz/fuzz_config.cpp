// The config loader on arbitrary YAML: errors are fine, crashes and hangs are not, and every
// error carries a position inside the text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = hookgate::config::load_config_text(text, "fuzz.yaml", "/tmp");
  if (!cfg) {
    for (const auto& d : cfg.error())
      if (d.where.file != "fuzz.yaml" || d.message.empty()) __builtin_trap();
  }
  return 0;
}
