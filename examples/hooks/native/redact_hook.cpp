// _20_native_redact.so: a transform hook that removes `data.password` and `data.token` from every
// event (the native twin of the declarative `remove:` action). Build: examples/CMakeLists.txt.
//
// JSON is parsed with RapidJSON (header-only) instead of edited as text: a text scanner would miss
// escaped keys ("pass\u0077ord") and duplicate keys, which a receiver's parser would still read.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>

#include "hookgate_hook.hpp"

using hookgate::sdk::Result;

class Redact : public hookgate::sdk::HookBase {
 public:
  Result handle(std::string_view event_json) override {
    rapidjson::Document doc;
    doc.Parse(event_json.data(), event_json.size());
    if (doc.HasParseError() || !doc.IsObject()) return Result::Error("event is not a JSON object");
    auto data = doc.FindMember("data");
    if (data == doc.MemberEnd() || !data->value.IsObject()) return Result::Skip();
    bool removed = false;
    for (const char* field : {"password", "token"}) {
      while (data->value.EraseMember(field)) removed = true;  // every duplicate, order kept
    }
    if (!removed) return Result::Continue();
    ++redacted_;
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> writer(out);
    doc.Accept(writer);
    return Result::Replace(std::string(out.GetString(), out.GetSize()));
  }

  std::string snapshot() override { return "{\"redacted\":" + std::to_string(redacted_) + "}"; }

 private:
  unsigned long long redacted_ = 0;  // no lock: the gateway calls a hook from one thread
};

HOOKGATE_DEFINE_HOOK(Redact, "transform", {"*"})
