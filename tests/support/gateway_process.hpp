#pragma once
// Runs the real `hookgate` binary as a child process for integration tests: writes the config into
// a temporary folder, captures the log, waits for readiness, stops it with a signal.
#include <rapidjson/document.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hookgate::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close).
int free_tcp_port();

// The whole file, or "" when it cannot be read.
std::string read_text(const std::filesystem::path& path);

// A temporary folder removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }
  // A sub-folder, created; its full path.
  std::string dir(const std::string& name) const;
  // Writes `text` to path()/rel (creating folders) by renaming a hidden temporary file into place,
  // so a watcher never reads it half written; returns the full path.
  std::string write(const std::string& rel, const std::string& text, bool executable = false) const;

 private:
  std::filesystem::path path_;
};

// How many times `needle` occurs in `text` (log lines a test waits to see repeated).
size_t count_occurrences(std::string_view text, std::string_view needle);

// Runs `hookgate` with `args`; the exit code (or 128+signal).
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult run_hookgate(const std::vector<std::string>& args, const std::string& stdin_text = "",
                           const std::vector<std::string>& env = {});
// Runs any program (`args[0]` is its path) the same way, with `env` added to this environment.
CommandResult run_program(const std::vector<std::string>& args, const std::string& stdin_text = "",
                          const std::vector<std::string>& env = {});

class GatewayProcess {
 public:
  // Picks free ports for the bus and the admin listener; they are available to configs as
  // ${HG_BUS_PORT} and ${HG_ADMIN_PORT} (exported into the child's environment).
  explicit GatewayProcess(const TempDir& dir);
  ~GatewayProcess();  // SIGKILL if still running

  // Writes `config_yaml` to dir/hookgate.yaml and starts `hookgate run --config` on it. Waits
  // for the "listening on" log line or a 200 from /readyz; false (with the log kept) if it exits or
  // times out.
  bool start(const std::string& config_yaml,
             std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Arguments added after `run --config FILE` on every later start (e.g. {"--log-level", "debug"}).
  void set_run_args(std::vector<std::string> args) { run_args_ = std::move(args); }
  // Starts again with the config already written (after a crash or a stop).
  bool restart(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  void signal(int sig);
  // Waits for the process to exit; its exit code (128+signal if killed), or -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout);
  bool running();

  std::string bus_endpoint() const { return "tcp://127.0.0.1:" + std::to_string(bus_port_); }
  std::string admin_url(const std::string& path) const;
  int bus_port() const { return bus_port_; }
  // The variables the gateway's config may use (HG_BUS_PORT=..., HG_ADMIN_PORT=...), for running
  // other verbs on the same config.
  std::vector<std::string> env() const;
  int admin_port() const { return admin_port_; }
  pid_t pid() const { return pid_.load(); }
  std::string config_path() const { return config_path_; }
  // Everything the gateway logged so far (all runs).
  std::string log() const;
  // What the current run (the last start() or restart()) logged so far.
  std::string run_log() const;
  // Waits until the log of any run contains `needle`.
  bool wait_for_log(const std::string& needle, std::chrono::milliseconds timeout) const;
  // Waits until the current run's log contains `needle`: after a restart, a line the earlier run
  // logged does not count.
  bool wait_for_run_log(const std::string& needle, std::chrono::milliseconds timeout) const;

 private:
  bool launch(std::chrono::milliseconds timeout);
  bool launch_once(std::chrono::milliseconds timeout);
  bool wait_for_log_from(size_t offset, const std::string& needle,
                         std::chrono::milliseconds timeout) const;
  const TempDir& dir_;
  std::string config_path_;
  std::string log_path_;
  int bus_port_;
  int admin_port_;
  std::atomic<pid_t> pid_{-1};  // a test's helper thread may signal() while start() retries
  size_t log_offset_ = 0;       // where the current run's log begins
  std::vector<std::string> run_args_;
};

// Another verb of the real binary running in the background (`hookgate bus`), its stdout and
// stderr in `log_path`. SIGKILLed and reaped when destroyed while still running, so a failed
// assertion never leaves it behind holding ports (nor the test's own output pipe).
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& args, std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  bool started() const { return pid_ > 0; }
  void signal(int sig) const;
  // Its exit code (128+signal if killed), or -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout);
  std::string log() const { return read_text(log_path_); }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// Polls `cond` every 5 ms until it holds or `timeout` passes; its last value.
bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout);
// A JSON document from text (a request body); IsObject() is false when it did not parse.
rapidjson::Document parse_json(const std::string& text);
// The value of one Prometheus series ("name" or "name{labels}") in a /metrics text; UINT64_MAX
// when absent.
uint64_t metric_value(const std::string& metrics_text, const std::string& series);

// Publishes one event through `hookgate publish`; returns the event id ("" on failure).
std::string publish(const std::string& endpoint, const std::string& type,
                    const std::string& data_json);

// A blocking HTTP GET on 127.0.0.1 (admin endpoint); the body, or "" on error. Status in *status.
std::string http_get(int port, const std::string& path, int* status = nullptr,
                     const std::string& bearer_token = "");
// Polls the admin endpoint on `port` until /readyz answers `status` (200 or 503), or `timeout`.
bool wait_for_readyz(int port, int status, std::chrono::milliseconds timeout);

}  // namespace hookgate::testing
