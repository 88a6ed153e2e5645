#include "gateway/event.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "gateway/common/clock.hpp"
#include "gateway/common/ids.hpp"
#include "gateway/common/text.hpp"

namespace hookgate {
namespace {

// Not kParseFullPrecisionFlag: in RapidJSON 1.1.0 (Debian 12) its StrtodDiyFp reads out of bounds
// on crafted exponents (found by tests/fuzz/fuzz_envelope). The default path is exact for integers
// and for doubles up to ~15 significant digits; beyond that the last digit may be re-rounded.
// Iterative: a deeply nested payload must not exhaust the stack while parsing.
constexpr unsigned kParseFlags =
    rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;
// Serializing is recursive, so nesting is bounded; real events are a few levels deep.
constexpr size_t kMaxDepth = 64;

// Rejects what parses but cannot be written back as JSON: numbers beyond the double range (they
// parse to infinity, which the writer refuses, leaving a truncated body — found by fuzz_envelope)
// and nesting deeper than kMaxDepth. One walk with an explicit stack.
// RapidJSON 1.1.0 accepts a lone low-surrogate escape ("\uDC00") and stores it as the bytes
// ED B0..BF xx, which is not UTF-8 (found by fuzz_envelope). Everything else it validated, so a
// surrogate's ED lead byte is the only thing to look for, and only text with a "\u" escape can
// hold one.
bool has_surrogate(const char* s, size_t n) {
  for (const char* p = static_cast<const char*>(std::memchr(s, 0xED, n)); p;
       p = static_cast<const char*>(std::memchr(p + 1, 0xED, n - static_cast<size_t>(p + 1 - s)))) {
    if (p + 1 < s + n && static_cast<unsigned char>(p[1]) >= 0xA0) return true;
  }
  return false;
}

// The first name an object holds twice, if any. Lookups, edits and removals act on the first
// member of a name while receivers' parsers keep the last, so a duplicate could carry a value
// past a redaction (`"password":"x","password":"secret"`) or a second `type` past routing.
std::optional<std::string_view> duplicate_name(const JsonValue& object) {
  const auto members = object.GetObject();
  const size_t n = members.MemberCount();
  if (n < 2) return std::nullopt;
  auto name = [](const JsonValue::Member& m) {
    return std::string_view(m.name.GetString(), m.name.GetStringLength());
  };
  if (n <= 16) {  // events' objects are small: pairwise is cheaper than sorting
    for (auto a = members.begin(); a != members.end(); ++a)
      for (auto b = a + 1; b != members.end(); ++b)
        if (name(*a) == name(*b)) return name(*a);
    return std::nullopt;
  }
  std::vector<std::string_view> names;
  names.reserve(n);
  for (const auto& m : members) names.push_back(name(m));
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return *dup;
  return std::nullopt;
}

std::optional<std::string> unwritable(const JsonValue& root, bool may_hold_surrogates,
                                      size_t max_depth) {
  std::vector<std::pair<const JsonValue*, size_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > max_depth) return "nested deeper than " + std::to_string(kMaxDepth) + " levels";
    if (v->IsDouble() && !std::isfinite(v->GetDouble()))
      return std::string("a number is out of range");
    if (may_hold_surrogates && v->IsString() && has_surrogate(v->GetString(), v->GetStringLength()))
      return std::string("a string holds an unpaired UTF-16 surrogate escape");
    if (v->IsObject()) {
      if (auto dup = duplicate_name(*v))
        return "the key \"" + printable_prefix(*dup, 64) + "\" appears twice in one object";
      for (const auto& m : v->GetObject()) {
        if (may_hold_surrogates && has_surrogate(m.name.GetString(), m.name.GetStringLength()))
          return std::string("a key holds an unpaired UTF-16 surrogate escape");
        stack.emplace_back(&m.value, depth + 1);
      }
    } else if (v->IsArray()) {
      for (const auto& e : v->GetArray()) stack.emplace_back(&e, depth + 1);
    }
  }
  return std::nullopt;
}

std::string_view next_segment(std::string_view& path) {
  auto dot = path.find('.');
  std::string_view seg = path.substr(0, dot);
  path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  return seg;
}

bool parse_index(std::string_view seg, rapidjson::SizeType& out) {
  // "01" is not an index (one spelling per element: a remove: step orders its paths by them).
  if (seg.empty() || (seg.size() > 1 && seg[0] == '0')) return false;
  auto [p, ec] = std::from_chars(seg.data(), seg.data() + seg.size(), out);
  return ec == std::errc{} && p == seg.data() + seg.size();
}

// An object's member by name. RapidJSON's FindMember calls memcmp for every member whose name
// has the length asked for ("type", "time", "data" and "user" all have 4); looking at the first
// byte before calling it skips nearly all of those calls (memcmp and the lookups were ~15 % of
// the ingest thread through the 3-hook benchmark chain; docs/performance.md, after #12).
JsonValue* member(JsonValue& object, std::string_view name) {
  for (auto m = object.MemberBegin(); m != object.MemberEnd(); ++m) {
    if (m->name.GetStringLength() != name.size()) continue;
    const char* s = m->name.GetString();
    if (name.empty() || (s[0] == name[0] && std::memcmp(s, name.data(), name.size()) == 0))
      return &m->value;
  }
  return nullptr;
}

const JsonValue* member(const JsonValue& object, std::string_view name) {
  return member(const_cast<JsonValue&>(object), name);
}

JsonValue* child(JsonValue* v, std::string_view seg) {
  if (v->IsObject()) return member(*v, seg);
  rapidjson::SizeType idx;
  if (v->IsArray() && parse_index(seg, idx) && idx < v->Size()) return &(*v)[idx];
  return nullptr;
}

}  // namespace

Event::Event() {
  doc_.SetObject();
}

namespace {
// Where a parse error is, for a person: "at offset N" on one line (bus messages), "at line L,
// column C" in text with line breaks (`hooks test --event`, `publish --data-file`).
std::string json_error_place(std::string_view json, size_t offset) {
  const std::string_view before = json.substr(0, std::min(offset, json.size()));
  const auto newlines = std::count(before.begin(), before.end(), '\n');
  if (newlines == 0) return "at offset " + std::to_string(offset);
  return "at line " + std::to_string(newlines + 1) + ", column " +
         std::to_string(before.size() - before.rfind('\n'));
}

// Parses `json` into `doc`; the error, worded for a person, when it does not parse.
std::optional<std::string> parse_into(JsonDocument& doc, std::string_view json) {
  // RapidJSON's stream reads a NUL as the end of input, so `{...}\0junk` would pass with the rest
  // ignored. JSON text has no raw NUL (inside strings it is escaped). One at the very end is a C
  // publisher sending strlen() + 1 bytes, and is let go; anywhere else it is an error.
  if (!json.empty() && json.back() == '\0') json.remove_suffix(1);
  if (const size_t nul = json.find('\0'); nul != std::string_view::npos)
    return "invalid JSON " + json_error_place(json, nul) + ": a NUL byte";
  doc.Parse<kParseFlags>(json.data(), json.size());
  if (doc.HasParseError())
    return "invalid JSON " + json_error_place(json, doc.GetErrorOffset()) + ": " +
           rapidjson::GetParseError_En(doc.GetParseError());
  return std::nullopt;
}
}  // namespace

std::optional<std::string> Event::syntax_error(std::string_view json) {
  JsonDocument doc;
  return parse_into(doc, json);
}

Result<Event> Event::parse(std::string_view json, size_t extra_depth, std::string_view subject) {
  Event ev;
  if (auto error = parse_into(ev.doc_, json)) return make_error(std::move(*error));
  if (!ev.doc_.IsObject()) return make_error(std::string(subject) + " is not a JSON object");
  // One scan of the text instead of one per string: most events have no \u escape at all.
  const bool escapes = json.find("\\u") != std::string_view::npos;
  if (auto problem = unwritable(ev.doc_, escapes, kMaxDepth + extra_depth))
    return make_error("invalid JSON: " + *problem);
  return ev;
}

Result<Event> Event::parse_envelope(std::string_view json, int64_t now_ms) {
  auto ev = parse(json);
  if (!ev) return ev;
  if (auto st = ev->normalize(now_ms); !st) return st.error();
  return ev;
}

Status Event::normalize(std::optional<int64_t> now_ms) {
  auto& a = doc_.GetAllocator();
  const JsonValue* type = member(doc_, "type");
  if (type == nullptr) return make_error("event has no \"type\"");
  if (!type->IsString() || type->GetStringLength() == 0)
    return make_error("event \"type\" must be a non-empty string");
  if (type->GetStringLength() > kMaxTypeBytes)
    return make_error("event \"type\" is " + std::to_string(type->GetStringLength()) +
                      " bytes long, more than " + std::to_string(kMaxTypeBytes));
  const JsonValue* spec = member(doc_, "specversion");
  if (spec == nullptr) {
    doc_.AddMember("specversion", "1.0", a);
  } else if (!spec->IsString() ||
             std::string_view(spec->GetString(), spec->GetStringLength()) != "1.0") {
    return make_error("unsupported \"specversion\" (only \"1.0\")");
  }
  auto require_string = [&](const char* name, auto make_default) -> Status {
    const JsonValue* value = member(doc_, name);
    if (value == nullptr) {
      std::string v = make_default();
      doc_.AddMember(JsonValue(rapidjson::StringRef(name)), JsonValue(v.c_str(), a), a);
      return {};
    }
    if (!value->IsString() || value->GetStringLength() == 0)
      return make_error(std::string("event \"") + name + "\" must be a non-empty string");
    return {};
  };
  if (auto st = require_string("id", [] { return new_uuid_v7(); }); !st) return st;
  if (auto st = require_string("source", [] { return std::string("unknown"); }); !st) return st;
  if (auto st =
          require_string("time", [&] { return format_rfc3339(now_ms ? *now_ms : now_unix_ms()); });
      !st)
    return st;
  // CloudEvents' optional attributes are strings too: found in a SIEM pass, a transform's
  // `copy: {data.user: subject}` of an object delivered `"subject": {...}`, which receivers'
  // CloudEvents SDKs refuse. A null or "" one is taken as absent (CloudEvents' JSON format reads
  // null so), as publishers that always set the field did before this check: dropped, not refused.
  for (const char* name : {"subject", "dataschema", "datacontenttype"}) {
    const JsonValue* value = member(doc_, name);
    if (value == nullptr) continue;
    if (value->IsNull() || (value->IsString() && value->GetStringLength() == 0)) {
      doc_.RemoveMember(name);
    } else if (!value->IsString()) {
      return make_error(std::string("event \"") + name + "\" must be a string when present");
    }
  }
  if (member(doc_, "data") != nullptr && member(doc_, "datacontenttype") == nullptr)
    doc_.AddMember("datacontenttype", "application/json", a);
  return {};
}

size_t Event::memory_bytes() const {
  // RapidJSON's pool allocator counts what it handed out; GetAllocator() is not const.
  return const_cast<JsonDocument&>(doc_).GetAllocator().Size();
}

Event Event::clone() const {
  Event ev;
  ev.doc_.CopyFrom(doc_, ev.doc_.GetAllocator());
  return ev;
}

std::string_view Event::string_member(const char* name) const {
  const JsonValue* value = member(doc_, name);
  if (value == nullptr || !value->IsString()) return {};
  return {value->GetString(), value->GetStringLength()};
}

const JsonValue* Event::find(std::string_view path) const {
  auto* v = const_cast<JsonValue*>(static_cast<const JsonValue*>(&doc_));
  while (v && !path.empty()) v = child(v, next_segment(path));
  return v;
}

bool Event::set(std::string_view path, const JsonValue& value, bool* changed) {
  auto& a = doc_.GetAllocator();
  JsonValue* v = &doc_;
  while (true) {
    std::string_view seg = next_segment(path);
    if (seg.empty()) return false;
    bool last = path.empty();
    JsonValue* next = child(v, seg);
    if (last) {
      if (next) {
        if (changed) *changed = !(*next == value) || next->IsDouble() != value.IsDouble();
        next->CopyFrom(value, a);
        return true;
      }
      if (!v->IsObject()) return false;
      if (changed) *changed = true;
      v->AddMember(JsonValue(seg.data(), static_cast<rapidjson::SizeType>(seg.size()), a),
                   JsonValue(value, a), a);
      return true;
    }
    if (!next) {
      if (!v->IsObject()) return false;
      v->AddMember(JsonValue(seg.data(), static_cast<rapidjson::SizeType>(seg.size()), a),
                   JsonValue(rapidjson::kObjectType), a);
      next = &(v->MemberEnd() - 1)->value;
    }
    if (!next->IsObject() && !next->IsArray()) return false;
    v = next;
  }
}

bool Event::can_set(std::string_view path) const {
  // The same walk as set(), stopping where set() would start creating objects.
  auto* v = const_cast<JsonValue*>(static_cast<const JsonValue*>(&doc_));
  while (true) {
    std::string_view seg = next_segment(path);
    if (seg.empty()) return false;
    JsonValue* next = child(v, seg);
    if (path.empty() || !next) return next != nullptr || v->IsObject();
    if (!next->IsObject() && !next->IsArray()) return false;
    v = next;
  }
}

bool Event::set_string(std::string_view path, std::string_view value) {
  JsonValue v(value.data(), static_cast<rapidjson::SizeType>(value.size()), doc_.GetAllocator());
  return set(path, v);
}

bool Event::remove(std::string_view path) {
  auto dot = path.rfind('.');
  std::string_view parent_path =
      dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
  std::string_view leaf = dot == std::string_view::npos ? path : path.substr(dot + 1);
  auto* parent = const_cast<JsonValue*>(parent_path.empty() ? &doc_ : find(parent_path));
  if (!parent) return false;
  // A list element goes, and the ones after it move up: `remove: [data.cards.0]` must not
  // leave the card number behind because it sits in a list.
  rapidjson::SizeType idx;
  if (parent->IsArray() && parse_index(leaf, idx) && idx < parent->Size()) {
    parent->Erase(parent->Begin() + idx);
    return true;
  }
  if (!parent->IsObject()) return false;
  return parent->EraseMember(JsonValue(rapidjson::StringRef(leaf.data(), leaf.size())));
}

bool Event::rename(std::string_view from, std::string_view to) {
  const JsonValue* src = find(from);
  if (!src) return false;
  JsonValue copy(*src, doc_.GetAllocator());
  // A move: the value must not stay behind at `from` (a secret in two places).
  if (!remove(from)) return false;
  return set(to, copy);
}

namespace {

// A RapidJSON output stream that only counts what it is given.
struct CountingStream {
  using Ch = char;
  size_t bytes = 0;
  void Put(char) { ++bytes; }
  void Flush() {}
};

}  // namespace

size_t Event::json_bytes() const {
  CountingStream counter;
  rapidjson::Writer<CountingStream> w(counter);
  doc_.Accept(w);
  return counter.bytes;
}

std::string Event::to_json() const {
  return hookgate::to_json(doc_);
}

std::string Event::data_json() const {
  if (const JsonValue* data = member(doc_, "data")) return hookgate::to_json(*data);
  // A binary payload goes as its base64 text, a JSON string: the body stays JSON, as the
  // webhook's Content-Type says, and the bytes are not lost.
  if (const JsonValue* binary = member(doc_, "data_base64"); binary && binary->IsString())
    return hookgate::to_json(*binary);
  return "null";
}

std::string to_json(const JsonValue& value) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  value.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

std::string scalar_text(const JsonValue& value) {
  if (value.IsString()) return {value.GetString(), value.GetStringLength()};
  return to_json(value);
}

}  // namespace hookgate
