// _30_enrich.so: a transform hook that adds `data.host` (the gateway's host name) and
// `data.environment` (from the hook's config, e.g. `config: {environment: prod}`). Fields the
// publisher already set are left alone: the event's own account of itself wins.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <string>

#include "hookgate_hook.hpp"

using hookgate::sdk::Result;

class Enrich : public hookgate::sdk::HookBase {
 public:
  std::string init(std::string_view config_json) override {
    rapidjson::Document cfg;
    cfg.Parse(config_json.data(), config_json.size());
    if (cfg.HasParseError() || !cfg.IsObject()) return "config must be a JSON object";
    auto env = cfg.FindMember("environment");
    if (env != cfg.MemberEnd()) {
      if (!env->value.IsString()) return "config.environment must be a string";
      environment_.assign(env->value.GetString(), env->value.GetStringLength());
    }
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "gethostname() failed";
    host_ = host;
    return {};
  }

  Result handle(std::string_view event_json) override {
    rapidjson::Document doc;
    doc.Parse(event_json.data(), event_json.size());
    if (doc.HasParseError() || !doc.IsObject()) return Result::Error("event is not a JSON object");
    auto& a = doc.GetAllocator();
    auto data = doc.FindMember("data");
    if (data == doc.MemberEnd()) {
      doc.AddMember("data", rapidjson::Value(rapidjson::kObjectType), a);
      data = doc.FindMember("data");
    }
    if (!data->value.IsObject()) return Result::Skip();  // nothing to add fields to
    bool changed = add(data->value, "host", host_, a);
    if (!environment_.empty())
      changed = add(data->value, "environment", environment_, a) || changed;
    if (!changed) return Result::Continue();
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> writer(out);
    doc.Accept(writer);
    return Result::Replace(std::string(out.GetString(), out.GetSize()));
  }

  std::string snapshot() override {
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> w(out);
    w.StartObject();
    w.Key("host");
    w.String(host_.c_str());
    w.Key("environment");
    w.String(environment_.c_str());
    w.EndObject();
    return out.GetString();
  }

 private:
  static bool add(rapidjson::Value& obj, const char* key, const std::string& value,
                  rapidjson::Document::AllocatorType& a) {
    if (obj.HasMember(key)) return false;
    obj.AddMember(rapidjson::StringRef(key), rapidjson::Value(value.c_str(), a), a);
    return true;
  }

  std::string host_;
  std::string environment_;
};

HOOKGATE_DEFINE_HOOK(Enrich, "transform", {"*"})
