#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "config/loader.hpp"
#include "config/yaml_reader.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"

namespace hookgate::cli {

void Args::note_repeat(const std::string& name) {
  // Found in an exploratory run: `--type a --type b` sent b without a word.
  if (options_.count(name) &&
      std::find(repeated_.begin(), repeated_.end(), name) == repeated_.end())
    repeated_.push_back(name);
}

Args::Args(std::vector<std::string> args, std::vector<std::string> flags_without_value) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h") {  // what Fluent Bit's and Envoy's users type
      options_["help"] = "";
      continue;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    if (auto eq = name.find('='); eq != std::string::npos) {
      std::string value = name.substr(eq + 1);
      name.resize(eq);
      // `--force=false` would otherwise mean --force: an on/off flag takes no value at all.
      if (name == "help" || name == "version" ||
          std::find(flags_without_value.begin(), flags_without_value.end(), name) !=
              flags_without_value.end())
        flags_given_values_.push_back(name);
      if (value.empty()) missing_values_.push_back(name);
      note_repeat(name);
      options_[name] = std::move(value);
      continue;
    }
    // --help and --version never take a value: `hookgate check --help --config x` must not
    // read "--config" as one.
    bool is_flag = name == "help" || name == "version" ||
                   std::find(flags_without_value.begin(), flags_without_value.end(), name) !=
                       flags_without_value.end();
    if (is_flag) {
      options_[name] = "";
    } else if (i + 1 < args.size() && !args[i + 1].empty() && args[i + 1].rfind("--", 0) != 0) {
      note_repeat(name);
      options_[name] = args[++i];
    } else {
      // Last, followed by another option, or "": `--webhook $UNSET` must not mean "every
      // webhook" (for a replay, every dead letter).
      if (i + 1 < args.size() && args[i + 1].empty()) ++i;
      missing_values_.push_back(name);
      options_[name] = "";
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

bool Args::has(const std::string& name) const {
  return options_.count(name) > 0;
}

std::vector<std::string> Args::unknown(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : options_)
    if (k != "help" && std::find(known.begin(), known.end(), k) == known.end())
      out.push_back("--" + k);
  return out;
}

std::optional<int64_t> positive_option(const Args& args, const std::string& name,
                                       const std::string& fallback) {
  const std::string text = args.get_or(name, fallback);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

std::optional<int64_t> max_message_bytes_option(const Args& args) {
  const std::string text =
      args.get_or("max-message-bytes", std::to_string(config::BusConfig{}.max_message_bytes));
  // The config key's spellings ("4MiB"), and its limit: twice the value is the socket's hard cap.
  auto bytes = config::parse_byte_size(text);
  // The config key's bounds too: a proxy bound below the gateway's least would be a typo.
  if (!bytes || *bytes < config::kMinMessageBytes || *bytes > config::kMaxMessageBytesLimit) {
    fail("--max-message-bytes: expected " + std::to_string(config::kMinMessageBytes) + " up to " +
             std::to_string(config::kMaxMessageBytesLimit) +
             " bytes (or a size such as 4MiB), got '" + text + "'",
         2);
    return std::nullopt;
  }
  return *bytes;
}

std::optional<int> check_log_level(const Args& args) {
  auto level = args.get("log-level");
  if (!level || is_log_level(*level)) return std::nullopt;
  return fail("--log-level: expected trace, debug, info, warn (or warning), error or off, got '" +
                  *level + "'",
              2);
}

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "hookgate: error: %s\n", message.c_str());
  return code;
}

std::optional<int> check_usage(const Args& args, const std::vector<std::string>& known,
                               const char* usage, bool takes_arguments) {
  if (args.has("help")) {
    std::printf("%s", usage);
    return 0;
  }
  if (args.has("version")) {  // PRODUCT.md: --version and --help on every verb
    std::printf("hookgate %s\n", HOOKGATE_VERSION);
    return 0;
  }
  auto bad = args.unknown(known);
  if (!bad.empty()) {
    std::fprintf(stderr, "hookgate: unknown option %s\n%s", bad.front().c_str(), usage);
    return 2;
  }
  if (!args.flags_given_values().empty()) {
    std::fprintf(stderr, "hookgate: --%s takes no value (give it alone to turn it on)\n%s",
                 args.flags_given_values().front().c_str(), usage);
    return 2;
  }
  if (!args.repeated().empty()) {
    std::fprintf(stderr, "hookgate: --%s is given more than once (it takes one value)\n%s",
                 args.repeated().front().c_str(), usage);
    return 2;
  }
  if (!args.missing_values().empty()) {
    std::fprintf(stderr, "hookgate: --%s needs a value\n%s", args.missing_values().front().c_str(),
                 usage);
    return 2;
  }
  if (!takes_arguments && !args.positional().empty()) {
    std::fprintf(stderr, "hookgate: unexpected argument '%s' (options start with --)\n%s",
                 args.positional().front().c_str(), usage);
    return 2;
  }
  return std::nullopt;
}

std::optional<config::Config> load_config_or_report(const Args& args, size_t* problems) {
  auto path = args.get("config");
  if (!path) return config::default_config(std::filesystem::current_path().string());
  auto cfg = config::load_config_file(*path);
  if (!cfg) {
    for (const auto& d : cfg.error()) std::fprintf(stderr, "%s\n", d.str().c_str());
    if (problems) *problems = cfg.error().size();
    return std::nullopt;
  }
  return std::move(cfg).value();
}

namespace {

Result<std::ifstream> open_input_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return make_error(path + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read " + path + ": " + std::strerror(errno));
  return in;
}

std::string read_at_most(std::istream& in, size_t max_bytes) {
  std::string text;
  std::array<char, 65536> chunk{};
  while (text.size() <= max_bytes) {
    const size_t want = std::min(chunk.size(), max_bytes + 1 - text.size());
    in.read(chunk.data(), static_cast<std::streamsize>(want));
    const auto got = static_cast<size_t>(in.gcount());
    text.append(chunk.data(), got);
    if (got < want) break;  // the end, or an error (the caller asks bad())
  }
  return text;
}

}  // namespace

Result<std::string> read_input_file(const std::string& path, size_t max_bytes) {
  if (path == "-") {  // as curl's `-d @-` and jq: a pipe
    std::string text = read_at_most(std::cin, max_bytes);
    if (std::cin.bad()) return make_error("cannot read standard input");
    return text;
  }
  auto in = open_input_file(path);
  if (!in) return std::move(in).error();
  std::string text = read_at_most(*in, max_bytes);
  if (in->bad()) return make_error("cannot read " + path);
  return text;
}

Result<std::string> read_token_file(const std::string& path) {
  auto in = open_input_file(path);
  if (!in) return std::move(in).error();
  // A bounded read: a token is short, and a path such as /dev/zero must not fill the memory.
  constexpr size_t kMaxTokenLine = 4096;
  // Room for a CRLF after the longest line.
  const std::string head = read_at_most(*in, kMaxTokenLine + 1);
  // The first line without its ending, LF or a Windows editor's CRLF.
  size_t line_length = std::min(head.find('\n'), head.size());
  if (line_length > 0 && head[line_length - 1] == '\r') --line_length;
  if (line_length > kMaxTokenLine)
    return make_error(path + ": its first line is longer than " + std::to_string(kMaxTokenLine) +
                      " bytes; a token is one short word");
  std::string token = head.substr(0, line_length);
  // And the byte-order mark such an editor may put first.
  if (token.rfind("\xEF\xBB\xBF", 0) == 0) token.erase(0, 3);
  if (token.empty()) return make_error(path + " holds no token on its first line");
  if (const std::string problem = bearer_token_problem(token); !problem.empty())
    return make_error(path + ": the token " + problem);
  return token;
}

std::shared_ptr<const hooks::HookChain> load_hooks_for_tools(const config::HooksConfig& hooks,
                                                             config::Diagnostics& errors,
                                                             config::Diagnostics& warnings) {
  for (auto& w : hooks::missing_hook_directories(hooks)) warnings.push_back(std::move(w));
  return hooks::HookChain::load(hooks, errors, nullptr, &warnings);
}

size_t print_warnings(const config::Diagnostics& warnings) {
  for (const auto& w : warnings)
    std::fprintf(stderr, "%s: warning: %s\n", w.where.str().c_str(),
                 escape_controls(w.message).c_str());
  return warnings.size();
}

std::optional<int> stay_init_if_pid1() {
  // PID 1 inherits every orphan in its namespace: the children of a hook whose process group a
  // timeout killed. The gateway reaps only what it started, so as PID 1 those would stay zombies
  // until the PID limit stopped hooks from starting.
  if (::getpid() != 1) return std::nullopt;
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &before);  // from here no signal is lost: they wait for sigwait
  const pid_t gateway = ::fork();
  if (gateway <= 0) {  // the child, or no child (then run unguarded, as before)
    sigprocmask(SIG_SETMASK, &before, nullptr);
    if (gateway < 0)
      std::fprintf(stderr, "hookgate: cannot fork as PID 1: %s\n", std::strerror(errno));
    return std::nullopt;
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&all, &sig) != 0) continue;
    if (sig != SIGCHLD) {
      ::kill(gateway, sig);  // SIGTERM, SIGINT, SIGHUP: the gateway's to handle
      continue;
    }
    int status = 0;
    for (pid_t done; (done = ::waitpid(-1, &status, WNOHANG)) > 0;)
      if (done == gateway) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

namespace {
sigset_t stop_and_reload_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}
}  // namespace

void block_reload_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void handle_signals(std::function<void(int)> on_signal) {
  sigset_t set = stop_and_reload_signals();
  // Their default ends the process without a word (found in a hostile-environment pass: a
  // logrotate `postrotate kill -USR1` would have stopped the service with no trace). hookgate
  // logs to stderr and has no file to reopen: said and ignored.
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // A file size limit (ulimit -f) is a write error like a full disk, which the spool waits out,
  // not a reason to die with what it holds in memory. Hooks start with default dispositions.
  signal(SIGXFSZ, SIG_IGN);
  std::thread([set, on_signal = std::move(on_signal)] {
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGUSR1 || sig == SIGUSR2)
        spdlog::info(
            "{} ignored: hookgate logs to stderr and has no file to reopen (SIGHUP reloads the "
            "configuration, SIGTERM stops)",
            sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
      else
        on_signal(sig);
    }
  }).detach();
}

}  // namespace hookgate::cli
