#include "tests/support/gateway_process.hpp"
#include "tests/support/loopback.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

extern char** environ;

namespace hookgate::testing {
namespace fs = std::filesystem;
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

pid_t spawn(const std::vector<std::string>& args, const std::string& out_path,
            const std::string& err_path, const std::string& in_path,
            const std::vector<std::string>& extra_env) {
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  // An added variable replaces the inherited one: getenv() returns the first of two.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('=') + 1);
    if (std::none_of(extra_env.begin(), extra_env.end(),
                     [&](const std::string& added) { return added.starts_with(name); }))
      env.emplace_back(entry);
  }
  for (const auto& e : extra_env) env.push_back(e);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* in = in_path.empty() ? "/dev/null" : in_path.c_str();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;  // the parent (-1 when fork failed)
  // Dies with the test runner (a crash, a ctest timeout) instead of outliving it with its ports.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the runner died before the line above
  const int in_fd = ::open(in, O_RDONLY);
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in_fd < 0 || out_fd < 0 || err_fd < 0 || ::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 ||
      ::dup2(err_fd, 2) < 0)
    ::_exit(127);
  for (const int fd : {in_fd, out_fd, err_fd})
    if (fd > 2) ::close(fd);  // (one the runner had closed among 0-2 is now the right one)
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

int wait_pid(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int free_tcp_port() {
  const LoopbackSocket probe = bind_loopback(0, 0);
  if (probe.fd >= 0) close(probe.fd);
  return probe.port;
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() /
          ("hookgate-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

std::string TempDir::dir(const std::string& name) const {
  const fs::path p = path_ / name;
  fs::create_directories(p);
  return p.string();
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("HOOKGATE_KEEP_TEST_DIRS")) fs::remove_all(path_, ec);
}

size_t count_occurrences(std::string_view text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

std::string TempDir::write(const std::string& rel, const std::string& text, bool executable) const {
  fs::path p = path_ / rel;
  fs::create_directories(p.parent_path());
  // Whole or not at all, as docs/hooks.md tells users to deploy hooks: a hot-reload watcher may
  // read the folder at any moment, and a file caught between truncation and its last byte (or
  // before its chmod) once made a reload test fail under CI load. The temporary name is hidden,
  // which discovery and the watcher skip. A symlink is written through, as before.
  std::error_code ec;
  const bool in_place = fs::is_symlink(p, ec);
  const fs::path target = in_place ? p : p.parent_path() / ("." + p.filename().string() + ".tmp");
  std::ofstream(target, std::ios::binary | std::ios::trunc) << text;
  if (!in_place && fs::exists(p, ec))  // a rewrite keeps the file's mode, as writing in place did
    fs::permissions(target, fs::status(p, ec).permissions(), ec);
  if (executable)
    fs::permissions(target, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  if (!in_place) fs::rename(target, p);
  return p.string();
}

CommandResult run_hookgate(const std::vector<std::string>& args, const std::string& stdin_text,
                           const std::vector<std::string>& env) {
  std::vector<std::string> full = {HOOKGATE_BINARY};
  full.insert(full.end(), args.begin(), args.end());
  return run_program(full, stdin_text, env);
}

CommandResult run_program(const std::vector<std::string>& args, const std::string& stdin_text,
                          const std::vector<std::string>& env) {
  TempDir dir;
  std::string in = stdin_text.empty() ? "" : dir.write("stdin", stdin_text);
  // As for a GatewayProcess: no hooks from this machine's user folder (the caller's env, first,
  // wins: getenv() takes the first of two).
  std::vector<std::string> full_env = env;
  full_env.push_back("XDG_CONFIG_HOME=" + (dir / "no-user-config").string());
  pid_t pid = spawn(args, (dir / "out").string(), (dir / "err").string(), in, full_env);
  CommandResult r;
  if (pid < 0) return r;
  r.exit_code = wait_pid(pid, std::chrono::seconds(60));
  if (r.exit_code < 0) {  // hung: not left running behind the test
    ::kill(pid, SIGKILL);
    wait_pid(pid, std::chrono::seconds(10));
  }
  r.out = read_text((dir / "out").string());
  r.err = read_text((dir / "err").string());
  return r;
}

GatewayProcess::GatewayProcess(const TempDir& dir)
    : dir_(dir), bus_port_(free_tcp_port()), admin_port_(free_tcp_port()) {
  config_path_ = (dir.path() / "hookgate.yaml").string();
  log_path_ = (dir.path() / "gateway.log").string();
}

ChildProcess::ChildProcess(const std::vector<std::string>& args, std::string log_path)
    : log_path_(std::move(log_path)) {
  pid_ = spawn(args, log_path_, log_path_, "", {});
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    wait_pid(pid_, std::chrono::seconds(10));
  }
}

void ChildProcess::signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

int ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const int code = wait_pid(pid_, timeout);
  if (code >= 0) pid_ = -1;
  return code;
}

GatewayProcess::~GatewayProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    wait_pid(pid_, std::chrono::seconds(10));
  }
}

bool GatewayProcess::start(const std::string& config_yaml, std::chrono::milliseconds timeout) {
  dir_.write("hookgate.yaml", config_yaml);
  return launch(timeout);
}

bool GatewayProcess::restart(std::chrono::milliseconds timeout) {
  return launch(timeout);
}

bool GatewayProcess::launch(std::chrono::milliseconds timeout) {
  // free_tcp_port() closes the port it found, so a parallel test can take it before the gateway
  // binds. The ports reach the config through the environment: pick new ones and try again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (launch_once(timeout)) return true;
    std::string log = read_text(log_path_);
    if (log.find("Address already in use", log_offset_) == std::string::npos &&
        log.find("address in use", log_offset_) == std::string::npos)
      return false;
    bus_port_ = free_tcp_port();
    admin_port_ = free_tcp_port();
  }
  return false;
}

bool GatewayProcess::launch_once(std::chrono::milliseconds timeout) {
  log_offset_ = read_text(log_path_).size();
  std::vector<std::string> args{HOOKGATE_BINARY, "run", "--config", config_path_};
  args.insert(args.end(), run_args_.begin(), run_args_.end());
  pid_ = spawn(args, log_path_, log_path_, "", env());
  if (pid_ < 0) return false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = read_text(log_path_);
    if (log.find("listening on", log_offset_) != std::string::npos) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    // Quiet log levels: ask the admin endpoint instead, and make sure this gateway answered (a
    // parallel test's gateway may hold the port this one could not bind).
    const std::string answer = http_get(admin_port_, "/status", &status);
    if (status == 200 &&
        answer.find("\"pid\":" + std::to_string(pid_.load()) + ",") != std::string::npos &&
        answer.find("\"ready\":true") != std::string::npos)
      return true;
    if (status == 401) {  // admin.token set: the open probe, then
      http_get(admin_port_, "/readyz", &status);
      if (status == 200) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void GatewayProcess::signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int GatewayProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  int code = wait_pid(pid_, timeout);
  if (code >= 0) pid_ = -1;
  return code;
}

bool GatewayProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::vector<std::string> GatewayProcess::env() const {
  // The user hook folder is a default hook directory: this machine's user's hooks must not run
  // in a test (it points at a folder no test makes).
  return {"HG_BUS_PORT=" + std::to_string(bus_port_),
          "HG_ADMIN_PORT=" + std::to_string(admin_port_),
          "XDG_CONFIG_HOME=" + (dir_.path() / "no-user-config").string()};
}

std::string GatewayProcess::admin_url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(admin_port_) + path;
}

std::string GatewayProcess::log() const {
  return read_text(log_path_);
}

std::string GatewayProcess::run_log() const {
  std::string all = log();
  return all.size() > log_offset_ ? all.substr(log_offset_) : std::string();
}

bool GatewayProcess::wait_for_log(const std::string& needle,
                                  std::chrono::milliseconds timeout) const {
  return wait_for_log_from(0, needle, timeout);
}

bool GatewayProcess::wait_for_run_log(const std::string& needle,
                                      std::chrono::milliseconds timeout) const {
  return wait_for_log_from(log_offset_, needle, timeout);
}

bool GatewayProcess::wait_for_log_from(size_t offset, const std::string& needle,
                                       std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(needle, offset) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

rapidjson::Document parse_json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str());
  return d;
}

uint64_t metric_value(const std::string& metrics_text, const std::string& series) {
  auto pos = metrics_text.find("\n" + series + " ");
  if (pos == std::string::npos) return UINT64_MAX;
  return std::stoull(metrics_text.substr(pos + series.size() + 2));
}

std::string publish(const std::string& endpoint, const std::string& type,
                    const std::string& data_json) {
  auto r = run_hookgate({"publish", "--endpoint", endpoint, "--type", type, "--data", data_json});
  if (r.exit_code != 0) return "";
  auto end = r.out.find('\n');
  return r.out.substr(0, end);
}

std::string http_get(int port, const std::string& path, int* status,
                     const std::string& bearer_token) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n";
  if (!bearer_token.empty()) req += "Authorization: Bearer " + bearer_token + "\r\n";
  req += "\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  if (status) *status = resp.size() > 12 ? std::atoi(resp.c_str() + 9) : 0;
  auto body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

bool wait_for_readyz(int port, int status, std::chrono::milliseconds timeout) {
  return wait_until(
      [&] {
        int answered = 0;
        http_get(port, "/readyz", &answered);
        return answered == status;
      },
      timeout);
}

}  // namespace hookgate::testing
