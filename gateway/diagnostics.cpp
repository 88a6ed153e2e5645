#include "gateway/diagnostics.hpp"

#include "gateway/common/text.hpp"

namespace hookgate {

Event make_diagnostic_event(const DiagnosticEvent& d, int64_t now_unix_ms) {
  Event ev;
  auto& a = ev.allocator();
  auto& doc = ev.doc();
  doc.AddMember("type", JsonValue(d.type.c_str(), a), a);
  doc.AddMember("source", "hookgate", a);
  JsonValue data(rapidjson::kObjectType);
  // Reasons quote hooks and receivers: made valid UTF-8, and kept whole past a NUL.
  auto put = [&](const char* key, const std::string& v) {
    if (v.empty()) return;
    const std::string text = to_valid_utf8(v);
    data.AddMember(JsonValue(rapidjson::StringRef(key)),
                   JsonValue(text.data(), static_cast<rapidjson::SizeType>(text.size()), a), a);
  };
  put("hook", d.hook);
  put("webhook", d.webhook);
  put("event_id", d.event_id);
  put("event_type", d.event_type);
  put("reason", d.reason);
  put("delivery_id", d.delivery_id);
  if (d.attempts > 0) data.AddMember("attempts", d.attempts, a);
  doc.AddMember("data", data, a);
  (void)ev.normalize(now_unix_ms);  // cannot fail: type is set
  return ev;
}

}  // namespace hookgate
