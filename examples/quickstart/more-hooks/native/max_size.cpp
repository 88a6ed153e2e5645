// max_size.so — a native VETO hook: drops events whose JSON envelope is larger than
// config.max_bytes (default 65536) before any other hook or webhook pays for them. Loaded by
// ../_05_max_size.yaml.
#include <rapidjson/document.h>

#include <string>

#include "hookgate_hook.hpp"

using hookgate::sdk::Result;

class MaxSize : public hookgate::sdk::HookBase {
 public:
  std::string init(std::string_view config_json) override {
    rapidjson::Document cfg;
    cfg.Parse(config_json.data(), config_json.size());
    if (!cfg.IsObject()) return "config must be a mapping";
    if (auto it = cfg.FindMember("max_bytes"); it != cfg.MemberEnd()) {
      if (!it->value.IsUint64() || it->value.GetUint64() == 0)
        return "config.max_bytes must be a positive integer";
      max_bytes_ = it->value.GetUint64();
    }
    return {};
  }

  Result handle(std::string_view event_json) override {
    if (event_json.size() <= max_bytes_) return Result::Continue();
    return Result::Veto("event is " + std::to_string(event_json.size()) + " bytes, over the " +
                        std::to_string(max_bytes_) + "-byte limit");
  }

 private:
  uint64_t max_bytes_ = 65536;
};

HOOKGATE_DEFINE_HOOK(MaxSize, "veto", {"*"})
