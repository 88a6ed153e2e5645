#include <fcntl.h>
#include <langinfo.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "gateway/cli/cli.hpp"
#include "gateway/hooks/native_hook.hpp"

namespace {

constexpr const char* kUsage = R"(hookgate — event-bus and webhook fan-out gateway

Usage: hookgate <verb> [options]

Verbs:
  run [--config FILE] [--log-level L] run the gateway in the foreground (embedded defaults without --config)
  publish --endpoint EP --type TYPE [--data JSON | --data-file FILE|-] [--source S]
  check --config FILE [--config-only] validate config and hooks (FILE:LINE:COL: message; exit 1 on error)
  hooks list --config FILE            the resolved hook chain in run order
  hooks test --config FILE --event EVENT.json|-
                                      dry-run one event through the chain; nothing is delivered
  hooks new NAME --form yaml|program|oneshot|native [--kind veto|transform|observe] [--dir DIR]
  deliveries list [--state pending|dead|delivered] [--webhook NAME] [--limit N]
  deliveries show ID
  deliveries replay ID... [--delivered] | --all-dead [--webhook NAME]
  deliveries purge ID... | --all-dead [--webhook NAME]
                                      (purge deletes dead deliveries for good)
                                      (deliveries: --config FILE or --spool FILE names the spool)
  bus --frontend EP --backend EP      XSUB/XPUB proxy for many publishers and subscribers
  keygen [--out FILE [--force]]       CURVE keypair for the bus
  keygen --webhook-secret             a whsec_ webhook secret

Every verb takes --help, which lists all of its options; `hookgate --version` prints the version.
)";

}  // namespace

int main(int argc, char** argv) {
  // Started with stdin, stdout or stderr closed, the process would hand those numbers to the next
  // files it opens: libzmq's wake-up eventfd became descriptor 2, and every log line was written
  // into it (found in a hostile-environment pass). /dev/null takes any that is missing.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0 && null != fd) {
      ::dup2(null, fd);
      ::close(null);
    }
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    if (args.size() > 1) {
      std::fprintf(stderr, "hookgate: %s takes no arguments\n", args[0].c_str());
      return 2;
    }
    std::printf("hookgate %s\n", HOOKGATE_VERSION);
    return 0;
  }
  // Text is UTF-8 throughout (configs, events). libcurl turns a non-ASCII host name into its
  // ASCII form (IDNA) through the locale's character set, and a process starts in the "C"
  // locale: found in a security pass, every delivery to http://bücher.example/ was dead-lettered
  // as a malformed URL. The character type only: numbers and messages stay as they were. The
  // environment's locale only when it is UTF-8 too: a Latin-1 one would make bytes 0xC0-0xFF
  // letters to <cctype>, which name and header checks use (glibc's C.UTF-8 keeps them apart).
  if (std::setlocale(LC_CTYPE, "C.UTF-8") == nullptr &&
      (std::setlocale(LC_CTYPE, "") == nullptr || std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0))
    std::setlocale(LC_CTYPE, "C");  // non-ASCII host names then fail, as they did before
  std::string verb = args[0];
  // Found by an operator's test: a SIGHUP in the first ~50 ms (a reload right after the start)
  // killed the gateway while it loaded its config, and systemd counts that as a clean exit.
  if (verb == "run" || verb == "bus") hookgate::cli::block_reload_signal();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  // Not a user verb: the child side of a native hook's load probe (gateway/hooks/native_hook.hpp).
  if (verb == "__probe-native" && rest.size() == 1) hookgate::hooks::run_native_load_probe(rest[0]);
  // Every verb that loads hooks (run, check, hooks) opens native libraries in a probe first.
  hookgate::hooks::set_native_load_probe("/proc/self/exe");
  // An ignored SIGCHLD survives exec and makes waitpid() fail: children (hooks, probes) could
  // then not be reaped, and a probe's crash would read as a pass.
  std::signal(SIGCHLD, SIG_DFL);
  // Hooks (and the probe) run as this user: without this, one could read the secrets the
  // environment filter keeps from it in /proc/<gateway>/environ, or ptrace the gateway. execve
  // resets it, so hooks are unaffected; this process still reads its own /proc/self. It also
  // means no core dumps of the gateway.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    std::fprintf(stderr, "hookgate: cannot mark the process not dumpable: %s\n",
                 std::strerror(errno));
  using namespace hookgate::cli;
  // What escapes a verb is a resource the process could not get (a thread under `ulimit -u`, memory
  // under `ulimit -v`): said in one line, not as "terminate called after throwing" and an abort
  // (found in a hostile-environment pass). _Exit: other threads may still run, and what the spool
  // committed is on disk already.
  try {
    if (verb == "run") {
      if (auto code = stay_init_if_pid1()) return *code;
      return cmd_run(rest);
    }
    if (verb == "publish") return cmd_publish(rest);
    if (verb == "check") return cmd_check(rest);
    if (verb == "hooks") return cmd_hooks(rest);
    if (verb == "deliveries") return cmd_deliveries(rest);
    if (verb == "bus") return cmd_bus(rest);
    if (verb == "keygen") return cmd_keygen(rest);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "hookgate %s: cannot go on: %s (a process, thread or memory limit? ulimit -u, "
                 "ulimit -v)\n",
                 verb.c_str(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
  std::fprintf(stderr, "hookgate: unknown verb '%s'\n\n%s", verb.c_str(), kUsage);
  return 2;
}
