// C++17 header-only wrapper over the native hook C ABI (hookgate_hook.h).
//
//   #include "hookgate_hook.hpp"
//
//   class Tag : public hookgate::sdk::HookBase {
//    public:
//     std::string init(std::string_view config_json) override { ...; return {}; }  // "" = ok
//     hookgate::sdk::Result handle(std::string_view event_json) override {
//       if (event_json.find("\"mallory\"") != std::string_view::npos)
//         return hookgate::sdk::Result::Veto("banned user");
//       return hookgate::sdk::Result::Continue();
//     }
//   };
//   HOOKGATE_DEFINE_HOOK(Tag, "veto", {"auth.*"})
//
// JSON parsing inside the hook is the author's business: events come in and go out as strings,
// so any JSON library (or none) will do. Exceptions never cross the C ABI: the trampolines below
// turn them into a load error (init) or a hook failure (handle), and a snapshot that throws is
// "{}".
#ifndef HOOKGATE_HOOK_HPP_
#define HOOKGATE_HOOK_HPP_

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hookgate_hook.h"

namespace hookgate::sdk {

// What handle() decided. Build one with the static functions.
class Result {
 public:
  static Result Continue() { return Result(HOOKGATE_CONTINUE, {}, false); }
  // `event_json`: the whole new CloudEvents envelope (a JSON object with a non-empty "type").
  static Result Replace(std::string event_json) {
    return Result(HOOKGATE_REPLACE, std::move(event_json), false);
  }
  static Result Veto(std::string reason) { return Result(HOOKGATE_VETO, std::move(reason), false); }
  static Result Skip() { return Result(HOOKGATE_SKIP, {}, false); }
  // A hook failure (counted, logged; the hook's on_error policy decides what happens to the event).
  static Result Error(std::string message) {
    return Result(HOOKGATE_CONTINUE, std::move(message), true);
  }

  hookgate_action action() const { return action_; }
  bool is_error() const { return error_; }
  // The replacement JSON, the veto reason or the error message, depending on the action.
  const std::string& text() const { return text_; }

 private:
  Result(hookgate_action action, std::string text, bool error)
      : action_(action), text_(std::move(text)), error_(error) {}
  hookgate_action action_;
  std::string text_;
  bool error_;
};

// Derive from this, override handle() (and init()/snapshot() when needed), then name the class in
// HOOKGATE_DEFINE_HOOK. One instance is created per loaded hook; all calls come from one thread.
class HookBase {
 public:
  virtual ~HookBase() = default;
  // Called once with the hook's `config` map as JSON. Return "" on success, else the load error.
  virtual std::string init(std::string_view config_json) {
    (void)config_json;
    return {};
  }
  virtual Result handle(std::string_view event_json) = 0;
  // Read-only JSON object for status pages; "" means "{}".
  virtual std::string snapshot() { return {}; }
};

namespace detail {

// malloc()ed copy for the gateway, released through free_string (= std::free). NULL if out of
// memory.
inline char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

inline std::string describe_current_exception(const char* where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string(where) + " threw: " + e.what();
  } catch (...) {
    return std::string(where) + " threw a non-standard exception";
  }
}

// The C trampolines for one hook class. Every entry catches everything: unwinding into the
// gateway's C call site would be undefined behaviour.
template <class T>
struct Adapter {
  static void* init(const char* config_json, char** error_out) noexcept {
    try {
      auto hook = std::make_unique<T>();
      std::string err = hook->init(config_json != nullptr ? config_json : "{}");
      if (!err.empty()) {
        *error_out = dup_string(err);
        return nullptr;
      }
      return static_cast<HookBase*>(hook.release());
    } catch (...) {
      *error_out = dup_string(describe_current_exception("init"));
      return nullptr;
    }
  }

  static int handle(void* state, const char* event_json, size_t len,
                    hookgate_hook_result* out) noexcept {
    try {
      Result r = static_cast<HookBase*>(state)->handle(std::string_view(event_json, len));
      if (r.is_error()) {
        out->error = dup_string(r.text().empty() ? std::string("hook failed") : r.text());
        return 1;
      }
      out->action = r.action();
      if (r.action() == HOOKGATE_REPLACE) out->event_json = dup_string(r.text());
      if (r.action() == HOOKGATE_VETO && !r.text().empty()) out->reason = dup_string(r.text());
      return 0;
    } catch (...) {
      out->error = dup_string(describe_current_exception("handle"));
      return 1;
    }
  }

  static void destroy(void* state) noexcept {
    try {
      delete static_cast<HookBase*>(state);
    } catch (...) {  // a throwing destructor must not unwind into C either
    }
  }

  static char* snapshot(void* state) noexcept {
    try {
      std::string s = static_cast<HookBase*>(state)->snapshot();
      return s.empty() ? nullptr : dup_string(s);
    } catch (...) {
      return nullptr;
    }
  }

  static void free_string(char* s) noexcept { std::free(s); }
};

// Keeps the pattern list alive and NULL-terminated for the descriptor.
inline const char* const* terminated_patterns(std::vector<const char*>& patterns) {
  if (patterns.empty() || patterns.back() != nullptr) patterns.push_back(nullptr);
  return patterns.data();
}

}  // namespace detail
}  // namespace hookgate::sdk

// Defines the descriptor and the exported entry point for `Class` (derived from HookBase).
// `kind`: "veto", "transform" or "observe"; the rest: a braced list of event patterns, e.g.
// HOOKGATE_DEFINE_HOOK(Redact, "transform", {"auth.*", "user.*"}). Use once per library.
#define HOOKGATE_DEFINE_HOOK(Class, kind, ...)                                                 \
  HOOKGATE_HOOK_EXPORT const hookgate_hook_descriptor* HOOKGATE_HOOK_ENTRY(void) {             \
    static std::vector<const char*> hookgate_patterns_ = std::vector<const char*> __VA_ARGS__; \
    static const hookgate_hook_descriptor hookgate_descriptor_ = {                             \
        HOOKGATE_HOOK_ABI_VERSION,                                                             \
        #Class,                                                                                \
        kind,                                                                                  \
        ::hookgate::sdk::detail::terminated_patterns(hookgate_patterns_),                      \
        &::hookgate::sdk::detail::Adapter<Class>::init,                                        \
        &::hookgate::sdk::detail::Adapter<Class>::handle,                                      \
        &::hookgate::sdk::detail::Adapter<Class>::destroy,                                     \
        &::hookgate::sdk::detail::Adapter<Class>::snapshot,                                    \
        &::hookgate::sdk::detail::Adapter<Class>::free_string,                                 \
    };                                                                                         \
    return &hookgate_descriptor_;                                                              \
  }

#endif  // HOOKGATE_HOOK_HPP_
