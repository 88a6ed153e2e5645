#pragma once
// The CloudEvents 1.0 envelope (JSON structured mode) every part of the gateway passes around.
//
// JSON library: RapidJSON. The hot path parses each bus message once, may mutate it in place
// (declarative transforms: set/remove/rename/copy) and serializes it once per delivery body;
// RapidJSON does all three in one in-situ DOM at several times nlohmann-json's speed, and unlike
// simdjson it can mutate and write. See docs/design.md.
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "gateway/common/result.hpp"

namespace hookgate {

using JsonValue = rapidjson::Value;
using JsonDocument = rapidjson::Document;

// The longest event type: as long as a bus.topics prefix may be. A type travels as the topic
// frame and in X-Hookgate-Event, where a very long one would be refused (a receiver's 431) long
// after the event was accepted.
inline constexpr size_t kMaxTypeBytes = config::kMaxTopicBytes;

class Event {
 public:
  Event();  // an empty JSON object
  Event(Event&&) noexcept = default;
  Event& operator=(Event&&) noexcept = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Parses JSON text (strict UTF-8). Fails unless the text is one JSON object. `extra_depth`
  // allows that many more levels of nesting, for a wrapper (a program hook's answer line) whose
  // members must obey the event limits themselves; `subject` names what the text is in the
  // error for valid JSON that is not an object ("event is not a JSON object").
  static Result<Event> parse(std::string_view json, size_t extra_depth = 0,
                             std::string_view subject = "event");
  // What is wrong with JSON text holding any one value (not only an object), worded and placed as
  // parse() words it ("invalid JSON at offset N: ..."); nullopt when it parses. For callers that
  // wrap text before parse(), whose error would point into the wrapper.
  static std::optional<std::string> syntax_error(std::string_view json);
  // Parses and applies the envelope rules (see normalize()).
  static Result<Event> parse_envelope(std::string_view json, int64_t now_unix_ms);

  // Envelope rules: `type` must be a non-empty string of at most kMaxTypeBytes; `specversion` if
  // present must be "1.0";
  // `id`/`source`/`time` if present must be strings. Fills specversion "1.0", a UUIDv7 id,
  // source "unknown", time (RFC 3339 UTC) and datacontenttype "application/json" when data is set.
  // The default time is `now_unix_ms`, or without it the clock, read only when one is needed
  // (hooks that edit an event that already has a time skip the read).
  Status normalize(std::optional<int64_t> now_unix_ms = std::nullopt);

  Event clone() const;
  // Bytes of memory the parsed event holds (its DOM and strings): what queueing it pins.
  size_t memory_bytes() const;
  // Length of to_json(), counted without building the string.
  size_t json_bytes() const;

  std::string_view type() const { return string_member("type"); }
  std::string_view id() const { return string_member("id"); }
  std::string_view source() const { return string_member("source"); }

  // Dotted paths into the envelope: "data.user.name", "subject". A numeric segment indexes an
  // array. Paths never create arrays.
  const JsonValue* find(std::string_view path) const;
  // Sets the value at path, creating intermediate objects. Fails if a non-object is in the way.
  // `changed`, when given, says whether the event differs afterwards (a number of another type,
  // 1 against 1.0, counts: the serialized body shows it).
  [[nodiscard]] bool set(std::string_view path, const JsonValue& value, bool* changed = nullptr);
  [[nodiscard]] bool set_string(std::string_view path, std::string_view value);
  // Whether set(path, ...) would succeed on the event as it is now, without changing it.
  bool can_set(std::string_view path) const;
  // Removes the member at path; false if it was not there.
  bool remove(std::string_view path);
  // Moves the value at `from` to `to`; false if `from` was absent.
  bool rename(std::string_view from, std::string_view to);

  JsonDocument& doc() { return doc_; }
  const JsonDocument& doc() const { return doc_; }
  JsonDocument::AllocatorType& allocator() { return doc_.GetAllocator(); }

  std::string to_json() const;
  // The `data` member alone: the body of a webhook with `body: data`. A binary event's
  // `data_base64` is sent as that JSON string; "null" when the event has neither.
  std::string data_json() const;

 private:
  std::string_view string_member(const char* name) const;
  JsonDocument doc_;
};

// A JSON value as compact text (for logs, hook protocols and tests).
std::string to_json(const JsonValue& value);
// Renders a scalar JSON value as the string conditions compare against: strings as-is, numbers and
// booleans in JSON spelling, null as "null". Objects and arrays as compact JSON.
std::string scalar_text(const JsonValue& value);

}  // namespace hookgate
