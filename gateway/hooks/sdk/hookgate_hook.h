/*
 * hookgate native hook ABI, version 1 (PRODUCT.md "Hooks", form 3).
 *
 * A native hook is a shared library (NN_name.so) exporting one C function,
 *
 *     HOOKGATE_HOOK_EXPORT const hookgate_hook_descriptor* HOOKGATE_HOOK_ENTRY(void);
 *
 * that returns a pointer to a descriptor with static storage duration. The gateway dlopen()s the
 * library (RTLD_NOW | RTLD_LOCAL), calls the entry once, checks `abi_version`, then calls `init`
 * once, `handle` per matching event, `snapshot` for status pages and `destroy` when the hook is
 * unloaded.
 *
 * Threading: every call into one loaded hook (init, handle, snapshot, destroy) is made from the
 * same dedicated gateway thread, one call at a time, so a hook needs no locking of its own state.
 * Two loaded instances of the same file (a reload) share the library's globals: keep state in the
 * object `init` returns, not in globals.
 *
 * Timeouts: the gateway cannot safely interrupt code running in its own process. When `handle` (or
 * any call) outlives the hook's timeout_ms, the gateway stops waiting, reports a timeout and
 * QUARANTINES the hook: it is never called again until it is reloaded, and the library is never
 * unloaded (the stuck call may still be running). A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, abort)
 * inside a call is caught on the hook's thread and treated the same way: a hook failure, then
 * quarantine until reload. It cannot contain a bug that corrupts the gateway's memory without
 * faulting first: use a program hook when the code is not trusted.
 *
 * Strings: every `const char*` the gateway passes is NUL-terminated UTF-8 and valid only during
 * the call. Every `char*` the hook hands back (init's error, result strings, snapshot) is owned by
 * the hook's allocator and released by the gateway through `free_string`, after copying it. Each
 * must be a string of its own: one that points into what the gateway passed, or into another
 * returned string, is a garbage answer and is never freed (the hook leaks it).
 *
 * Pure C (C99); usable from C and C++. The C++ wrapper in hookgate_hook.hpp makes a hook a few
 * lines.
 */
#ifndef HOOKGATE_HOOK_H_
#define HOOKGATE_HOOK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. The gateway refuses descriptors with any other version. */
#define HOOKGATE_HOOK_ABI_VERSION 1

/* The exported entry point, versioned by name so a future ABI can coexist in one library. */
#define HOOKGATE_HOOK_ENTRY hookgate_hook_v1
#define HOOKGATE_HOOK_ENTRY_NAME "hookgate_hook_v1"

#if defined(__GNUC__) || defined(__clang__)
#define HOOKGATE_HOOK_VISIBLE __attribute__((visibility("default")))
#else
#define HOOKGATE_HOOK_VISIBLE
#endif
#ifdef __cplusplus
#define HOOKGATE_HOOK_EXPORT extern "C" HOOKGATE_HOOK_VISIBLE
#else
#define HOOKGATE_HOOK_EXPORT HOOKGATE_HOOK_VISIBLE
#endif

/* What a hook decided for one event (hookgate_hook_result.action). */
typedef enum hookgate_action {
  HOOKGATE_CONTINUE = 0, /* go on with the event unchanged */
  HOOKGATE_REPLACE = 1,  /* go on with result.event_json (a JSON object with a non-empty "type") */
  HOOKGATE_VETO = 2,     /* drop the event; result.reason says why */
  HOOKGATE_SKIP = 3      /* nothing to do for this event (not a failure) */
} hookgate_action;

/* Filled by handle(). The gateway zeroes it before each call (action = HOOKGATE_CONTINUE, all
 * strings NULL) and frees every non-NULL string with free_string afterwards, whatever the outcome
 * (except one that points into the event or another result string: see "Strings" above).
 */
typedef struct hookgate_hook_result {
  int32_t action;   /* a hookgate_action value */
  char* event_json; /* HOOKGATE_REPLACE: the whole new CloudEvents envelope, NUL-terminated */
  char* reason;     /* HOOKGATE_VETO: why (may be NULL: the gateway names the hook instead) */
  char* error;      /* when handle() returns nonzero: what went wrong (may be NULL) */
} hookgate_hook_result;

typedef struct hookgate_hook_descriptor {
  /* Must be HOOKGATE_HOOK_ABI_VERSION. Checked before any other field is read. */
  uint32_t abi_version;
  /* For logs only; the gateway names a hook after its file. May be NULL. */
  const char* name;
  /* "veto", "transform" or "observe". Ignored when a YAML descriptor sets the kind. */
  const char* kind;
  /* NULL-terminated list of event-type glob patterns; NULL or empty means {"*"}. At most 1023
   * patterns, each UTF-8 text of at most 1024 bytes (name and kind: 1024 bytes too); the gateway
   * reads no further and refuses a descriptor that runs past these bounds. */
  const char* const* events;

  /* Optional (NULL = stateless, state is NULL). Called once with the hook's `config` map as JSON
   * ("{}" when none). Returns the state passed to the other calls (NULL is a valid state). To fail
   * loading, set *error_out to a message allocated for free_string; the return value is then
   * ignored and destroy is not called. */
  void* (*init)(const char* config_json, char** error_out);

  /* Required. `event_json` is the CloudEvents envelope (`len` bytes, plus a NUL terminator).
   * Return 0 and fill `out`, or return nonzero (a hook failure) with out->error set to a message.
   */
  int (*handle)(void* state, const char* event_json, size_t len, hookgate_hook_result* out);

  /* Optional. Releases the state; called once, never while another call runs. */
  void (*destroy)(void* state);

  /* Optional. Read-only JSON object for status pages, allocated for free_string; NULL means "{}".
   */
  char* (*snapshot)(void* state);

  /* Required. Frees any string the hook handed to the gateway (e.g. `free` if you used malloc). */
  void (*free_string)(char* str);
} hookgate_hook_descriptor;

/* The one symbol a native hook exports. */
typedef const hookgate_hook_descriptor* (*hookgate_hook_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HOOKGATE_HOOK_H_ */
