#pragma once
// The `hookgate` command line (PRODUCT.md "Command line", pinned verbs). Each verb lives in its own
// cmd_*.cpp and receives the arguments after the verb.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gateway/common/result.hpp"
#include "gateway/hooks/chain.hpp"

namespace hookgate::cli {

// `--name value`, `--name=value` and bare `--flag`; everything else is positional.
class Args {
 public:
  Args(std::vector<std::string> args, std::vector<std::string> flags_without_value);
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  bool has(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Options given that are not in `known`: reported as a usage error.
  std::vector<std::string> unknown(const std::vector<std::string>& known) const;
  // Options that take a value but got none, or an empty one: a usage error (check_usage).
  const std::vector<std::string>& missing_values() const { return missing_values_; }
  // On/off flags given as --flag=VALUE: a usage error (check_usage).
  const std::vector<std::string>& flags_given_values() const { return flags_given_values_; }
  // Options that take a value, given more than once: a usage error (check_usage).
  const std::vector<std::string>& repeated() const { return repeated_; }

 private:
  void note_repeat(const std::string& name);
  std::map<std::string, std::string> options_;
  std::vector<std::string> missing_values_;
  std::vector<std::string> flags_given_values_;
  std::vector<std::string> repeated_;
  std::vector<std::string> positional_;
};

// Loads --config FILE, or the embedded defaults (base dir: the working directory) when absent.
// Prints diagnostics as FILE:LINE:COL: message to stderr, and their count in `*problems`.
std::optional<config::Config> load_config_or_report(const Args& args, size_t* problems = nullptr);
// A file named on the command line (an event, data; `-` is standard input), or why not (errno's
// words). At most max_bytes + 1 bytes are read: a longer result means the input is over
// max_bytes, so /dev/zero or an endless pipe cannot fill the memory.
Result<std::string> read_input_file(const std::string& path, size_t max_bytes);
// A secret token from the first line of a file (kept off the command line, where `ps` shows it),
// or why not; the error never holds the token.
Result<std::string> read_token_file(const std::string& path);
// Loads the hook chain as `run` would, for `check` and `hooks list`; `warnings` gets what `run`
// only logs: a #! script that is not executable, a listed hooks directory that is not there.
std::shared_ptr<const hooks::HookChain> load_hooks_for_tools(const config::HooksConfig& hooks,
                                                             config::Diagnostics& errors,
                                                             config::Diagnostics& warnings);
// Prints each as "FILE:LINE:COL: warning: MESSAGE" on stderr; returns how many.
size_t print_warnings(const config::Diagnostics& warnings);
// The value of --NAME (or `fallback` when absent) as a whole positive number; nullopt when it is
// anything else ("3s", "abc", "0", "-1"), for the caller to report as a usage error.
std::optional<int64_t> positive_option(const Args& args, const std::string& name,
                                       const std::string& fallback);
// --max-message-bytes, defaulting to the gateway's bus.max_message_bytes default, in bytes or with
// the config's units ("4MiB"); nullopt after reporting a usage error (the caller exits 2).
std::optional<int64_t> max_message_bytes_option(const Args& args);
// A usage error (exit 2) when --log-level names no level; nullopt when it is absent or valid.
std::optional<int> check_log_level(const Args& args);
// Prints "hookgate: error: <message>" to stderr and returns exit code 1 (2 for usage errors).
int fail(const std::string& message, int code = 1);
// Returns 2 with a usage line if `args` has unknown options, or arguments that are not options
// where the verb takes none (`hookgate run hookgate.yaml` must not run on the embedded defaults),
// or --help was asked (then 0).
std::optional<int> check_usage(const Args& args, const std::vector<std::string>& known,
                               const char* usage, bool takes_arguments = false);

// As PID 1 (a container's entrypoint without --init), forks: this process stays PID 1, reaps
// every orphan and forwards signals, as tini does, and returns the gateway child's exit code; the
// child (or any process that is not PID 1) gets nullopt and runs the gateway.
std::optional<int> stay_init_if_pid1();
int cmd_run(const std::vector<std::string>& argv);
int cmd_publish(const std::vector<std::string>& argv);
int cmd_check(const std::vector<std::string>& argv);
int cmd_hooks(const std::vector<std::string>& argv);
int cmd_deliveries(const std::vector<std::string>& argv);
int cmd_bus(const std::vector<std::string>& argv);
int cmd_keygen(const std::vector<std::string>& argv);

// Blocks SIGHUP in this thread (and every thread it creates afterwards): until handle_signals()
// waits for it, it stays pending instead of killing the process. main() calls it first for the
// long-running verbs, so a `systemctl reload` right after the start is kept. SIGTERM and SIGINT
// keep their default until then: a start stuck reading its config (a FIFO nobody writes) must
// still stop (found in a config torture pass: only SIGKILL ended it).
void block_reload_signal();
// Blocks SIGINT/SIGTERM/SIGHUP, then runs `on_signal` on a dedicated thread for each one
// received. Call before starting any thread.
void handle_signals(std::function<void(int)> on_signal);

}  // namespace hookgate::cli
