// tag_site.so — a native TRANSFORM hook: stamps every event with the site and host that handled
// it (data.site from the hook's config, data.host from gethostname). Fields the publisher already
// set are kept. Loaded by ../_35_tag_site.yaml, which passes `config: {site: lab-1}`.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <string>

#include "hookgate_hook.hpp"

using hookgate::sdk::Result;

class TagSite : public hookgate::sdk::HookBase {
 public:
  // Runs once at load; an error string here makes the load fail (shown by `hooks list`).
  std::string init(std::string_view config_json) override {
    rapidjson::Document cfg;
    cfg.Parse(config_json.data(), config_json.size());
    auto site = cfg.IsObject() ? cfg.FindMember("site") : cfg.MemberEnd();
    if (!cfg.IsObject() || site == cfg.MemberEnd() || !site->value.IsString())
      return "config.site (a string) is required";
    site_ = site->value.GetString();
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "gethostname() failed";
    host_ = host;
    return {};
  }

  // Runs per matching event, one call at a time; event_json is the whole CloudEvents envelope.
  Result handle(std::string_view event_json) override {
    rapidjson::Document doc;
    doc.Parse(event_json.data(), event_json.size());
    if (!doc.IsObject()) return Result::Error("event is not a JSON object");
    auto data = doc.FindMember("data");
    if (data == doc.MemberEnd() || !data->value.IsObject()) return Result::Skip();
    auto& a = doc.GetAllocator();
    bool changed = false;
    for (auto [key, value] : {std::pair{"site", &site_}, std::pair{"host", &host_}}) {
      if (data->value.HasMember(key)) continue;
      data->value.AddMember(rapidjson::StringRef(key), rapidjson::Value(value->c_str(), a), a);
      changed = true;
    }
    if (!changed) return Result::Continue();
    ++tagged_;
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> writer(out);
    doc.Accept(writer);
    return Result::Replace(out.GetString());
  }

  // Shown under this hook in GET /status.
  // Written with RapidJSON, not pasted together: the site comes from config and may hold a quote.
  std::string snapshot() override {
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> writer(out);
    writer.StartObject();
    writer.Key("site");
    writer.String(site_.c_str(), static_cast<rapidjson::SizeType>(site_.size()));
    writer.Key("tagged");
    writer.Uint64(tagged_);
    writer.EndObject();
    return out.GetString();
  }

 private:
  std::string site_, host_;
  unsigned long tagged_ = 0;  // no lock needed: the gateway never calls one hook concurrently
};

// The kind and patterns a bare tag_site.so would run with; the YAML descriptor overrides both.
HOOKGATE_DEFINE_HOOK(TagSite, "transform", {"*"})
