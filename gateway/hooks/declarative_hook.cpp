#include "gateway/hooks/declarative_hook.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/yaml_reader.hpp"
#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/text.hpp"
#include "gateway/pattern.hpp"

namespace hookgate::hooks {
namespace {

using config::Diagnostics;
using config::MapReader;
using config::position_of;
using Allocator = JsonDocument::AllocatorType;

constexpr const char* kConditionKeys[] = {"field",  "equals", "in",  "matches",
                                          "exists", "all",    "any", "not"};
constexpr const char* kActionKeys[] = {"remove", "set", "rename", "copy", "log"};
// The CloudEvents attributes every event must keep: a transform may change them, not drop them.
constexpr const char* kRequiredAttributes[] = {"specversion", "id", "source", "type"};

// ---------------------------------------------------------------------------------------------
// YAML → JSON. Scalars keep their YAML 1.2 core-schema types (5 → number, true → bool, ~ → null,
// "5" → string), so `set: {data.retries: 3}` writes a number. `${VAR}` expands in strings, as in
// the config file.

bool is_integer_text(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

bool is_float_text(const std::string& s) {
  // [-+]? ( digits [. digits?] | . digits ) ([eE] [-+]? digits)?
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp;
    if (exp == 0) return false;
  }
  return i == s.size();
}

bool is_non_finite_text(const std::string& s) {
  for (const char* t : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf",
                        "-.INF", ".nan", ".NaN", ".NAN"})
    if (s == t) return true;
  return false;
}

// YAML values and conditions nest at most this deep. Besides keeping events writable, it stops
// the walk on an alias that refers to its own anchor (`x: &a [*a]`): yaml-cpp builds such a
// node as a cycle, and an unbounded recursion over it would overflow the stack.
constexpr size_t kMaxYamlDepth = 64;

bool too_deep(const YAML::Node& node, size_t depth, const std::string& file,
              const std::string& what, Diagnostics& errors) {
  if (depth <= kMaxYamlDepth) return false;
  errors.push_back({position_of(node, file), what + " nests deeper than " +
                                                 std::to_string(kMaxYamlDepth) +
                                                 " levels (or an alias refers to its own anchor)"});
  return true;
}

bool yaml_to_json(const YAML::Node& node, JsonValue& out, Allocator& a, const std::string& file,
                  Diagnostics& errors, size_t depth = 1) {
  if (too_deep(node, depth, file, "this value", errors)) return false;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out.SetNull();
      return true;
    case YAML::NodeType::Scalar: {
      const std::string& raw = node.Scalar();
      // "!" = quoted or block scalar: always a string. "?" = plain: typed by its spelling.
      bool plain = node.Tag() == "?";
      if (plain) {
        if (raw == "true" || raw == "True" || raw == "TRUE") {
          out.SetBool(true);
          return true;
        }
        if (raw == "false" || raw == "False" || raw == "FALSE") {
          out.SetBool(false);
          return true;
        }
        if (raw == "null" || raw == "Null" || raw == "NULL" || raw == "~") {
          out.SetNull();
          return true;
        }
        if (is_integer_text(raw)) {
          const char* begin = raw.data() + (raw[0] == '+' ? 1 : 0);
          int64_t i = 0;
          auto [p, ec] = std::from_chars(begin, raw.data() + raw.size(), i);
          if (ec == std::errc{} && p == raw.data() + raw.size()) {
            out.SetInt64(i);
            return true;
          }
          uint64_t u = 0;
          auto [pu, ecu] = std::from_chars(begin, raw.data() + raw.size(), u);
          if (ecu == std::errc{} && pu == raw.data() + raw.size()) {
            out.SetUint64(u);
            return true;
          }
          errors.push_back({position_of(node, file), "integer out of range: " + raw});
          return false;
        }
        if (is_float_text(raw)) {
          double d = std::strtod(raw.c_str(), nullptr);
          if (std::isfinite(d)) {
            out.SetDouble(d);
            return true;
          }
        }
        if (is_non_finite_text(raw) || is_float_text(raw)) {
          errors.push_back({position_of(node, file), "JSON has no infinity or NaN: " + raw});
          return false;
        }
      }
      std::string text = config::expand_env(raw, position_of(node, file), errors);
      // Events are UTF-8 text end to end: a value that is not (a ${VAR} holding Latin-1, say)
      // would go into every event this hook edits, and on to the receivers, who may refuse it
      // for good. The value itself is not quoted: it may be a secret.
      if (!valid_utf8(text)) {
        errors.push_back(
            {position_of(node, file), "this value is not UTF-8 text (after ${VAR} expansion)"});
        return false;
      }
      out.SetString(text.c_str(), static_cast<rapidjson::SizeType>(text.size()), a);
      return true;
    }
    case YAML::NodeType::Sequence: {
      out.SetArray();
      bool ok = true;
      for (const auto& item : node) {
        JsonValue v;
        ok = yaml_to_json(item, v, a, file, errors, depth + 1) && ok;
        out.PushBack(v, a);
      }
      return ok;
    }
    case YAML::NodeType::Map: {
      out.SetObject();
      bool ok = true;
      for (auto it : node) {
        if (!it.first.IsScalar()) {
          errors.push_back({position_of(it.first, file), "mapping keys must be strings"});
          ok = false;
          continue;
        }
        const std::string& key = it.first.Scalar();
        if (out.HasMember(key.c_str())) {
          errors.push_back({position_of(it.first, file), "duplicate key '" + key + "'"});
          ok = false;
          continue;
        }
        JsonValue v;
        ok = yaml_to_json(it.second, v, a, file, errors, depth + 1) && ok;
        out.AddMember(JsonValue(key.c_str(), static_cast<rapidjson::SizeType>(key.size()), a), v,
                      a);
      }
      return ok;
    }
  }
  return false;
}

// The text a condition compares against, from a YAML scalar: typed first, then rendered like
// scalar_text renders event fields, so `equals: 5`, `equals: 5.0` and `equals: "5"` line up with
// the event's 5, 5.0 and "5".
std::optional<std::string> condition_text(const YAML::Node& node, const std::string& file,
                                          const std::string& what, Diagnostics& errors) {
  if (node.IsMap() || node.IsSequence()) {
    errors.push_back({position_of(node, file), what + ": expected a scalar value"});
    return std::nullopt;
  }
  JsonDocument doc;
  if (!yaml_to_json(node, doc, doc.GetAllocator(), file, errors)) return std::nullopt;
  return scalar_text(doc);
}

// "data.user.name": non-empty segments separated by single dots.
// Whether dotted path `p` lies inside `parent` (data.a.b inside data.a; not data.ab).
bool is_under(std::string_view p, std::string_view parent) {
  return p.size() > parent.size() && p.substr(0, parent.size()) == parent &&
         p[parent.size()] == '.';
}

// A path segment that is all digits: a list index where the value is a list.
bool is_index(std::string_view segment) {
  return !segment.empty() &&
         std::all_of(segment.begin(), segment.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool valid_path(std::string_view p) {
  if (p.empty() || p.front() == '.' || p.back() == '.') return false;
  return p.find("..") == std::string_view::npos;
}

bool is_required_attribute(std::string_view path) {
  for (const char* attr : kRequiredAttributes)
    if (path == attr) return true;
  return false;
}

std::optional<std::string> read_path(const YAML::Node& node, const std::string& file,
                                     const std::string& what, Diagnostics& errors) {
  if (!node.IsScalar()) {
    errors.push_back({position_of(node, file), what + ": expected a dotted path like data.user"});
    return std::nullopt;
  }
  std::string p = config::expand_env(node.Scalar(), position_of(node, file), errors);
  if (!valid_path(p)) {
    errors.push_back({position_of(node, file),
                      what + ": " + config::quoted_as_written(node, p) + " is not a dotted path"});
    return std::nullopt;
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Conditions

struct Condition {
  enum class Op { Equals, In, Matches, Exists, All, Any, Not };
  Op op = Op::All;
  std::string field;
  std::vector<std::string> values;  // Equals: one; In: the list
  std::vector<Pattern> pattern;     // Matches: one (Pattern has no default constructor)
  bool exists = true;
  std::vector<Condition> children;  // All/Any: the list; Not: one

  bool eval(const Event& ev) const {
    switch (op) {
      case Op::All:
        for (const auto& c : children)
          if (!c.eval(ev)) return false;
        return true;
      case Op::Any:
        for (const auto& c : children)
          if (c.eval(ev)) return true;
        return false;
      case Op::Not:
        return !children.front().eval(ev);
      case Op::Exists:
        return (ev.find(field) != nullptr) == exists;
      case Op::Equals:
      case Op::In:
      case Op::Matches:
        break;
    }
    const JsonValue* v = ev.find(field);
    if (!v) return false;  // a missing field never equals, is in or matches anything
    std::string text = scalar_text(*v);
    if (op == Op::Matches) return pattern.front().matches(text);
    for (const auto& want : values)
      if (text == want) return true;
    return false;
  }
};

std::optional<Condition> parse_condition(const YAML::Node& node, const std::string& file,
                                         const std::string& context, Diagnostics& errors,
                                         size_t depth = 1) {
  // Named by its root (`when`): the full path of a cycle would repeat `.not` 64 times.
  if (too_deep(node, depth, file, context.substr(0, context.find('.')), errors))
    return std::nullopt;
  if (!node.IsMap()) {
    errors.push_back({position_of(node, file),
                      context +
                          ": a condition is a mapping: {field: ..., equals|in|matches|exists: "
                          "...} or {all: [...]}, {any: [...]}, {not: {...}}"});
    return std::nullopt;
  }
  size_t before = errors.size();
  MapReader r(node, file, context, errors);
  for (const char* k : kConditionKeys) (void)r.node(k);
  int tests = r.has("equals") + r.has("in") + r.has("matches") + r.has("exists");
  int combinators = r.has("all") + r.has("any") + r.has("not");
  Condition c;
  if (r.has("field")) {
    if (combinators > 0) {
      r.error(r.pos(), context + ": a field test cannot share a mapping with all/any/not; nest it");
    }
    if (tests != 1) {
      r.error(r.pos(), context +
                           ": a field condition needs exactly one of equals, in, matches, "
                           "exists");
    }
    if (auto p = read_path(r.node("field"), file, context + ".field", errors)) c.field = *p;
    if (r.has("equals")) {
      c.op = Condition::Op::Equals;
      if (auto t = condition_text(r.node("equals"), file, context + ".equals", errors))
        c.values.push_back(std::move(*t));
    } else if (r.has("in")) {
      c.op = Condition::Op::In;
      YAML::Node list = r.node("in");
      if (!list.IsSequence() || list.size() == 0) {
        r.error(r.pos("in"), context + ".in: expected a non-empty list of values");
      } else {
        for (const auto& item : list)
          if (auto t = condition_text(item, file, context + ".in", errors))
            c.values.push_back(std::move(*t));
      }
    } else if (r.has("matches")) {
      c.op = Condition::Op::Matches;
      std::string glob;
      r.get("matches", glob);
      c.pattern.emplace_back(std::move(glob));
    } else if (r.has("exists")) {
      c.op = Condition::Op::Exists;
      r.get("exists", c.exists);
    }
  } else if (tests > 0) {
    r.error(r.pos(), context + ": equals/in/matches/exists need a field:");
  } else if (combinators != 1) {
    r.error(r.pos(), context + ": a condition needs field: or exactly one of all, any, not");
  } else if (r.has("not")) {
    c.op = Condition::Op::Not;
    if (auto child = parse_condition(r.node("not"), file, context + ".not", errors, depth + 1))
      c.children.push_back(std::move(*child));
  } else {
    const char* key = r.has("all") ? "all" : "any";
    c.op = r.has("all") ? Condition::Op::All : Condition::Op::Any;
    YAML::Node list = r.node(key);
    if (!list.IsSequence() || list.size() == 0) {
      r.error(r.pos(key), context + "." + key + ": expected a non-empty list of conditions");
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        std::string where = context + "." + key + "[" + std::to_string(i) + "]";
        if (auto child = parse_condition(list[i], file, where, errors, depth + 1))
          c.children.push_back(std::move(*child));
      }
    }
  }
  r.finish();
  if (errors.size() != before) return std::nullopt;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Actions

struct ActionStep {
  enum class Op { Remove, Set, Rename, Copy, Log };
  Op op = Op::Remove;
  std::vector<std::string> paths;                          // Remove; Set: targets
  std::vector<std::pair<std::string, std::string>> moves;  // Rename, Copy: from → to
  std::unique_ptr<JsonDocument> values;                    // Set: an array parallel to paths
  std::string text;                                        // Log
};

// Reads a {from: to} mapping for rename/copy.
void read_moves(const YAML::Node& node, const std::string& file, const std::string& what,
                bool from_must_stay, ActionStep& step, Diagnostics& errors) {
  if (!node.IsMap() || node.size() == 0) {
    errors.push_back({position_of(node, file), what + ": expected a mapping {from: to}"});
    return;
  }
  config::report_duplicate_keys(node, file, what, errors);
  for (auto it : node) {
    auto from = read_path(it.first, file, what, errors);
    auto to = read_path(it.second, file, what, errors);
    if (!from || !to) continue;
    if (from_must_stay && is_required_attribute(*from)) {
      errors.push_back(
          {position_of(it.first, file), what + ": " + config::quoted_as_written(it.first, *from) +
                                            " is a required event attribute; it can be "
                                            "changed with set: but not moved away"});
      continue;
    }
    step.moves.emplace_back(std::move(*from), std::move(*to));
  }
}

// The order removals go in: every path names what was there before the step, and removing a list
// element moves the later ones up, so higher indexes of one list go first (data.cards.1 before
// data.cards.0, 10 before 2). Descending order, numeric segments compared as numbers, does that.
// Segments are ranked numeric first, so the order is a strict weak one even when siblings mix
// numbers and names (9, 10, 1a): comparing 1a to 9 as text and 9 to 10 as numbers was not
// transitive, which std::sort may answer with undefined behaviour.
bool removal_order(std::string_view a, std::string_view b) {
  while (!a.empty() && !b.empty()) {
    const std::string_view sa = a.substr(0, a.find('.')), sb = b.substr(0, b.find('.'));
    a.remove_prefix(std::min(a.size(), sa.size() + 1));
    b.remove_prefix(std::min(b.size(), sb.size() + 1));
    if (sa == sb) continue;
    const bool na = is_index(sa), nb = is_index(sb);
    if (na != nb) return na;
    if (na && sa.size() != sb.size()) return sa.size() > sb.size();
    return sa > sb;
  }
  return a.size() > b.size();  // the longer (deeper) path first
}

std::optional<ActionStep> parse_action(const YAML::Node& node, const std::string& file,
                                       const std::string& context, HookKind kind,
                                       Diagnostics& errors) {
  if (!node.IsMap()) {
    errors.push_back({position_of(node, file),
                      context + ": an action is a mapping with one of remove, set, rename, copy, "
                                "log"});
    return std::nullopt;
  }
  size_t before = errors.size();
  MapReader r(node, file, context, errors);
  for (const char* k : kActionKeys) (void)r.node(k);
  int count = r.has("remove") + r.has("set") + r.has("rename") + r.has("copy") + r.has("log");
  ActionStep step;
  if (count != 1) {
    r.error(r.pos(), context +
                         ": each action has exactly one of remove, set, rename, copy, log "
                         "(use several list items for several actions)");
  } else if (kind == HookKind::Observe && !r.has("log")) {
    r.error(r.pos(), context + ": observe hooks are read-only; only log: actions are allowed");
  } else if (r.has("remove")) {
    step.op = ActionStep::Op::Remove;
    YAML::Node list = r.node("remove");
    std::string what = context + ".remove";
    auto take = [&](const YAML::Node& item) {
      auto p = read_path(item, file, what, errors);
      if (!p) return;
      if (is_required_attribute(*p))
        r.error(position_of(item, file), what + ": " + config::quoted_as_written(item, *p) +
                                             " is a required event attribute");
      step.paths.push_back(std::move(*p));
    };
    if (list.IsScalar()) {
      take(list);
    } else if (list.IsSequence() && list.size() > 0) {
      for (const auto& item : list) take(item);
    } else {
      r.error(r.pos("remove"), what + ": expected a list of dotted paths");
    }
    std::sort(step.paths.begin(), step.paths.end(), removal_order);
    // A path listed twice is removed once: the second would take the element that moved up.
    step.paths.erase(std::unique(step.paths.begin(), step.paths.end()), step.paths.end());
  } else if (r.has("set")) {
    step.op = ActionStep::Op::Set;
    YAML::Node map = r.node("set");
    if (!map.IsMap() || map.size() == 0) {
      r.error(r.pos("set"), context + ".set: expected a mapping {path: value}");
    } else {
      config::report_duplicate_keys(map, file, context + ".set", errors);
      step.values = std::make_unique<JsonDocument>();
      step.values->SetArray();
      auto& a = step.values->GetAllocator();
      for (auto it : map) {
        auto path = read_path(it.first, file, context + ".set", errors);
        JsonValue v;
        bool ok = yaml_to_json(it.second, v, a, file, errors);
        if (!path || !ok) continue;
        step.paths.push_back(std::move(*path));
        step.values->PushBack(v, a);
      }
    }
  } else if (r.has("rename")) {
    step.op = ActionStep::Op::Rename;
    read_moves(r.node("rename"), file, context + ".rename", true, step, errors);
  } else if (r.has("copy")) {
    step.op = ActionStep::Op::Copy;
    read_moves(r.node("copy"), file, context + ".copy", false, step, errors);
  } else {
    step.op = ActionStep::Op::Log;
    r.get("log", step.text);
    if (step.text.empty()) r.error(r.pos("log"), context + ".log: expected a message");
  }
  r.finish();
  if (errors.size() != before) return std::nullopt;
  return step;
}

// ---------------------------------------------------------------------------------------------
// The hook

class DeclarativeHook final : public Hook {
 public:
  DeclarativeHook(HookSpec spec, std::optional<Condition> when, std::vector<ActionStep> actions,
                  std::string reason)
      : Hook(std::move(spec)),
        when_(std::move(when)),
        actions_(std::move(actions)),
        reason_(std::move(reason)) {
    for (const auto& a : actions_) {
      if (a.op == ActionStep::Op::Set || a.op == ActionStep::Op::Rename ||
          a.op == ActionStep::Op::Copy)
        copy_on_write_ = true;
    }
    plan_in_place();
  }

  // Declarative hooks run in memory in microseconds, so timeout_ms never comes into play.
  HookResult handle(Event& event) override {
    if (when_ && !when_->eval(event)) {
      // For a veto, "condition false" is the ordinary allow; for the others, nothing to do.
      return HookVerdict{spec().kind == HookKind::Veto ? Action::Continue : Action::Skip, {}, {}};
    }
    switch (spec().kind) {
      case HookKind::Veto:
        return HookVerdict{Action::Veto, {}, reason_};
      case HookKind::Observe: {
        Status st = apply(event);  // log actions only: cannot fail, cannot modify
        (void)st;
        return HookVerdict{};
      }
      case HookKind::Transform:
        break;
    }
    bool changed = false;
    if (!copy_on_write_) {
      // Only removes (and logs): they cannot fail half-way, so edit in place.
      Status st = apply(event, &changed);
      (void)st;
      return edited(changed);
    }
    if (in_place_ && can_apply_in_place(event)) {
      // Every destination was checked just now, so neither can fail; normalize() only restores
      // what an earlier remove-only hook may have taken out, exactly as the copy path would.
      if (Status st = apply(event, &changed); !st)
        return HookFailure{HookFailure::Kind::Error, st.error().message};
      if (Status st = event.normalize(); !st)
        return HookFailure{HookFailure::Kind::Error,
                           "actions produced an invalid event: " + st.error().message};
      return edited(changed);
    }
    // set/rename/copy can fail midway (a string where an object is needed); the contract says a
    // failed hook leaves the event unchanged, so work on a copy and swap it in at the end.
    Event work = event.clone();
    if (Status st = apply(work, &changed); !st) return failed(event, st.error().message);
    if (Status st = work.normalize(); !st)
      return failed(event, "actions produced an invalid event: " + st.error().message);
    if (is_diagnostic_type(work.type()))
      return failed(event,
                    std::string("actions produced an invalid event: ") + kReservedTypeReason);
    event = std::move(work);
    return edited(changed);
  }

 private:
  static HookVerdict edited(bool changed) {
    HookVerdict verdict;
    verdict.edited_in_place = changed;
    return verdict;
  }

  // A failed hook leaves the event as it was, except for its remove: actions: under on_error:
  // open the event goes on, and a redactor whose set: met an odd event (a string where an object
  // is needed) must not let through what it removes. Removals cannot fail. A remove after a
  // rename takes the value where it was before the rename too (rename data.pwd to
  // data.password, then remove data.password: data.pwd goes).
  HookResult failed(Event& event, std::string reason) const {
    for (size_t step = 0; step < actions_.size(); ++step) {
      if (actions_[step].op != ActionStep::Op::Remove) continue;
      std::vector<std::string> origins;
      for (const auto& p : actions_[step].paths)
        for (auto& origin : before_renames(p, step)) origins.push_back(std::move(origin));
      std::sort(origins.begin(), origins.end(), removal_order);
      origins.erase(std::unique(origins.begin(), origins.end()), origins.end());
      for (const auto& origin : origins) event.remove(origin);
    }
    return HookFailure{HookFailure::Kind::Error, std::move(reason)};
  }

  // Where what `path` names at action `step` was before the renames ahead of it (itself
  // included, as it may have held a value a rename overwrote). A rename brings what is at or
  // under its `to` from its `from`, and renaming a list element away moves the later ones up:
  // index k was k + 1. (Removals between two renames are applied in turn by failed(), not
  // mapped here.)
  std::vector<std::string> before_renames(const std::string& path, size_t step) const {
    std::vector<std::string> paths{path};
    for (size_t j = step; j-- > 0;) {
      if (actions_[j].op != ActionStep::Op::Rename) continue;
      const auto& moves = actions_[j].moves;
      for (auto move = moves.rbegin(); move != moves.rend(); ++move) {
        const auto& [from, to] = *move;
        const size_t dot = from.rfind('.');
        const std::string_view list = std::string_view(from).substr(0, dot);
        const std::string_view index = std::string_view(from).substr(dot + 1);
        std::vector<std::string> before;
        for (const auto& p : paths) {
          if (p == to || is_under(p, to)) before.push_back(from + p.substr(to.size()));
          if (is_under(to, p)) before.push_back(from);  // the renamed value sits inside it
          std::string q = p;
          if (dot != std::string::npos && is_index(index) && is_under(p, list)) {
            const size_t begin = list.size() + 1;
            const size_t end = std::min(p.find('.', begin), p.size());
            const std::string_view k = std::string_view(p).substr(begin, end - begin);
            if (is_index(k) && !removal_order(index, k) && k.size() < 19)
              q = p.substr(0, begin) + std::to_string(std::stoull(std::string(k)) + 1) +
                  p.substr(end);
          }
          before.push_back(std::move(q));
        }
        paths = std::move(before);
      }
    }
    return paths;
  }

  // `changed` (when given) is set when an action changed the event: a remove that found its
  // field, a rename whose source is there, a set or copy that wrote another value.
  Status apply(Event& ev, bool* changed = nullptr) const {
    bool ignored = false;
    bool& any = changed ? *changed : ignored;
    for (const auto& a : actions_) {
      switch (a.op) {
        case ActionStep::Op::Remove:
          for (const auto& p : a.paths)
            if (ev.remove(p)) any = true;  // absent already: nothing to do
          break;
        case ActionStep::Op::Set:
          for (size_t i = 0; i < a.paths.size(); ++i) {
            bool differs = false;
            if (!ev.set(a.paths[i], (*a.values)[static_cast<rapidjson::SizeType>(i)], &differs))
              return make_error("set " + a.paths[i] + ": a non-object value is in the way");
            any |= differs;
          }
          break;
        case ActionStep::Op::Rename:
          for (const auto& [from, to] : a.moves) {
            if (!ev.find(from)) continue;  // nothing to rename
            any = true;
            if (!ev.rename(from, to))
              return make_error("rename " + from + " to " + to +
                                ": a non-object value is in the way");
          }
          break;
        case ActionStep::Op::Copy:
          for (const auto& [from, to] : a.moves) {
            const JsonValue* src = ev.find(from);
            if (!src) continue;
            // Copy first: setting `to` may reallocate the member storage `src` points into.
            JsonValue copy(*src, ev.allocator());
            bool differs = false;
            if (!ev.set(to, copy, &differs))
              return make_error("copy " + from + " to " + to +
                                ": a non-object value is in the way");
            any |= differs;
          }
          break;
        case ActionStep::Op::Log:
          spdlog::info("hook {}: {} (event {} {})", spec().name, a.text, ev.id(), ev.type());
          break;
      }
    }
    return {};
  }

  // Editing the event in place (no clone, no normalize) is safe when nothing can fail half-way
  // and no envelope rule can break. Decided once here for the hook's paths, then per event by
  // can_apply_in_place():
  // - no touched path is a proper prefix of another, so no action adds, replaces or removes a
  //   node that another action's destination walks through: checking every destination up front
  //   against the unchanged event is then the same as checking each when its turn comes;
  // - no path is in a top-level envelope attribute normalize() checks or fills (`data.x` is
  //   fine; `data`, `type`, `time` or `time.tz` is not), so the event stays valid;
  // - no path has an array index: `items.0` and `items.00` name the same element, which the
  //   prefix test on path text would miss.
  // In-place and clone paths give the same result; this only skips the copy (docs/performance.md).
  void plan_in_place() {
    static constexpr std::string_view kEnvelope[] = {
        "specversion", "id",   "source",     "type",           "time",
        "subject",     "data", "dataschema", "datacontenttype"};
    std::vector<std::string_view> touched;
    for (const auto& a : actions_) {
      for (const auto& p : a.paths) {
        touched.push_back(p);
        if (a.op == ActionStep::Op::Set) destinations_.push_back(p);
      }
      for (const auto& [from, to] : a.moves) {
        if (a.op == ActionStep::Op::Rename) touched.push_back(from);
        touched.push_back(to);
        destinations_.push_back(to);
      }
    }
    for (std::string_view p : touched) {
      const std::string_view first = p.substr(0, p.find('.'));
      const bool under_data = first == "data" && first.size() < p.size();
      for (std::string_view attribute : kEnvelope)
        if (first == attribute && !under_data) return;
      if (under_data) data_paths_ = true;
      for (std::string_view rest = p; !rest.empty();) {
        const std::string_view segment = rest.substr(0, rest.find('.'));
        if (is_index(segment)) return;
        rest.remove_prefix(std::min(rest.size(), segment.size() + 1));
      }
      for (std::string_view q : touched) {
        if (is_under(q, p)) return;
      }
    }
    in_place_ = true;
  }

  bool can_apply_in_place(const Event& event) const {
    // Creating `data` would also need normalize() to add datacontenttype.
    if (data_paths_ && event.find("data") == nullptr) return false;
    for (std::string_view p : destinations_)
      if (!event.can_set(p)) return false;
    return true;
  }

  std::optional<Condition> when_;
  std::vector<ActionStep> actions_;
  std::string reason_;
  bool copy_on_write_ = false;
  bool in_place_ = false;
  bool data_paths_ = false;
  std::vector<std::string_view> destinations_;  // views into actions_, which never change
};

}  // namespace

std::optional<std::string> yaml_to_json_text(const YAML::Node& node, const std::string& file,
                                             Diagnostics& errors) {
  JsonDocument doc;
  if (!yaml_to_json(node, doc, doc.GetAllocator(), file, errors)) return std::nullopt;
  return to_json(doc);
}

LoadResult read_declarative_hook(HookSpec spec, std::optional<HookKind> kind, MapReader& r,
                                 const std::string& path, Diagnostics& errors) {
  const size_t before = errors.size();
  if (!r.has("kind")) r.error(r.pos(), "hook.kind: missing (veto, transform or observe)");
  std::optional<Condition> when;
  if (r.has("when")) when = parse_condition(r.node("when"), path, "when", errors);
  std::vector<ActionStep> actions;
  std::string reason;
  if (kind == HookKind::Veto) {
    if (!r.has("when"))
      r.error(r.pos(),
              "hook.when: a veto hook needs when: (without it every event it sees would "
              "be dropped)");
    if (r.has("actions")) r.error(r.pos("actions"), "hook.actions: veto hooks have no actions");
    r.get("reason", reason);
    if (reason.empty()) reason = "vetoed by hook " + spec.name;
  } else if (kind) {
    if (r.has("reason")) r.error(r.pos("reason"), "hook.reason: only veto hooks have a reason");
    YAML::Node list = r.node("actions");
    if (!list.IsDefined() || list.IsNull()) {
      r.error(r.pos(), std::string("hook.actions: ") + (*kind == HookKind::Observe ? "an " : "a ") +
                           to_string(*kind) + " hook needs a list of actions");
    } else if (!list.IsSequence() || list.size() == 0) {
      r.error(r.pos("actions"), "hook.actions: expected a non-empty list of actions");
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        if (auto a =
                parse_action(list[i], path, "actions[" + std::to_string(i) + "]", *kind, errors))
          actions.push_back(std::move(*a));
      }
    }
  }
  r.finish();
  if (errors.size() != before || !kind) return std::string("invalid hook file");
  spec.form = HookForm::Declarative;
  spec.kind = *kind;
  return HookPtr(std::make_shared<DeclarativeHook>(std::move(spec), std::move(when),
                                                   std::move(actions), std::move(reason)));
}

}  // namespace hookgate::hooks
