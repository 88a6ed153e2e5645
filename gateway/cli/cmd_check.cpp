#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "bus/curve.hpp"
#include "bus/wire.hpp"
#include "gateway/admin_server.hpp"
#include "gateway/cli/cli.hpp"
#include "gateway/common/file_folder.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"
#include "gateway/hooks/chain.hpp"
#include "webhooks/settings_check.hpp"
#include "webhooks/signing.hpp"
#include "webhooks/sqlite_spool.hpp"

namespace hookgate::cli {

int cmd_check(const std::vector<std::string>& argv) {
  Args args(argv, {"config-only"});
  if (auto code = check_usage(
          args, {"config", "config-only"},
          "Usage: hookgate check --config FILE [--config-only]\n"
          "Validates the config and every hook; prints FILE:LINE:COL: message per problem\n"
          "and exits 1 if there is any.\n"
          "  --config-only  only what `run` refuses to start on (the config with its\n"
          "                webhooks' tls: files readable, the bus key files): a hook\n"
          "                that fails to load is left out and a webhook with a bad URL,\n"
          "                header or TLS file paused, not fatal. For a service's\n"
          "                ExecStartPre.\n"))
    return *code;
  if (!args.has("config")) return fail("--config FILE is required", 2);
  setup_logging("off", "text");  // hook loading must not chatter; problems are printed below
  size_t n = 0;
  auto cfg = load_config_or_report(args, &n);
  if (!cfg) {
    std::fprintf(stderr,
                 "%zu problem%s found (hooks and webhook addresses are checked once the config "
                 "loads)\n",
                 n, n == 1 ? "" : "s");
    return 1;
  }
  int problems = 0;
  int warnings = 0;
  int stop_run_here = 0;  // of the warnings: what `run` refuses to start on, on this machine
  if (auto keys = bus::check_curve_files(cfg->bus.curve); !keys) {
    std::fprintf(stderr, "%s\n", keys.error().str().c_str());
    ++problems;
  } else if (cfg->bus.curve.enabled && !cfg->bus.curve.client_mode()) {
    if (auto allowed = bus::read_allowed_clients(cfg->bus.curve.allowed_clients,
                                                 bus::AllowListWarnings::Quiet);
        allowed && allowed->empty()) {
      ++warnings;
      std::fprintf(stderr,
                   "%s: warning: bus.curve.allowed_clients: %s lists no public key: every "
                   "publisher is refused until one is added (then reload)\n",
                   cfg->bus.curve.allowed_clients_where.str().c_str(),
                   cfg->bus.curve.allowed_clients.c_str());
    }
  }
  // A file cut to nothing by a deploy still loads: on the defaults, with no webhook.
  if (cfg->holds_no_settings) {
    ++warnings;
    std::fprintf(stderr,
                 "%s:1:1: warning: the file holds no settings (empty, or comments and x- keys "
                 "only): the gateway would run on its defaults with no webhook, and every event "
                 "would go nowhere\n",
                 cfg->file.c_str());
  }
  // What `run` refuses to start on but only this machine can tell (a spool folder, a bind
  // host): an error for --config-only (a service's ExecStartPre, on the machine that runs it), a
  // warning for the full check, which also validates configs away from their machine (in CI).
  auto on_this_machine = [&](const config::Position& at, const std::string& what) {
    const bool fatal = args.has("config-only");
    std::fprintf(stderr, "%s: %s%s%s\n", at.str().c_str(),
                 fatal ? "" : "warning: ", escape_controls(what).c_str(),
                 fatal ? "" : " (run refuses to start until it is)");
    ++(fatal ? problems : warnings);
    if (!fatal) ++stop_run_here;
  };
  if (cfg->spool.mode == config::SpoolConfig::Mode::Sqlite) {
    const std::filesystem::path spool(cfg->spool.path);
    std::error_code ec;
    std::string problem = file_folder_problem(spool).value_or("");
    if (problem.empty() && std::filesystem::is_directory(spool, ec)) problem = "it is a folder";
    // A file left by another user (a first start as root) opens read-only, which `run` refuses.
    for (const char* suffix : webhooks::kSpoolFileSuffixes) {
      const std::string file = spool.string() + suffix;
      if (problem.empty() && std::filesystem::exists(file, ec) && ::access(file.c_str(), W_OK) != 0)
        problem = file + " is not writable for this user";
    }
    if (!problem.empty())
      on_this_machine(cfg->spool.path_where, "spool.path " + cfg->spool.path + ": " + problem);
    // A bound past the volume's size is never met: the disk fills first. Not for --config-only
    // (the volume may be mounted after ExecStartPre runs), and a warning: intake still waits on
    // a full disk, and nothing is lost.
    struct statvfs volume {};
    // The file's own volume when it exists (it may be a link to another mount).
    const std::filesystem::path measured =
        std::filesystem::exists(spool, ec) ? spool : spool.parent_path();
    if (problem.empty() && !args.has("config-only") && cfg->spool.max_bytes > 0 &&
        ::statvfs(measured.c_str(), &volume) == 0) {
      const auto size =
          static_cast<int64_t>(volume.f_blocks) * static_cast<int64_t>(volume.f_frsize);
      if (size > 0 && cfg->spool.max_bytes >= size) {
        ++warnings;
        std::fprintf(stderr,
                     "%s: warning: spool.max_bytes (%lld) is not less than the size of the "
                     "volume %s is on (%lld bytes): the disk fills first (intake then waits for "
                     "it)\n",
                     cfg->spool.max_bytes_where.str().c_str(),
                     static_cast<long long>(cfg->spool.max_bytes), measured.c_str(),
                     static_cast<long long>(size));
      }
    }
  }
  if (cfg->bus.bind)
    if (auto why = bus::bind_endpoint_problem(*cfg->bus.bind))
      on_this_machine(cfg->bus.bind_where, "bus.bind: " + *why);
  // A warning, not a problem: the names may resolve otherwise where the gateway runs. Not for
  // --config-only, a service's ExecStartPre, which must not wait on DNS at boot.
  if (auto same = args.has("config-only") ? std::nullopt : bus::same_peer(cfg->bus.connect)) {
    ++warnings;
    std::fprintf(
        stderr,
        "%s: warning: bus.connect: %s and %s reach the same peer (%s) here: the gateway "
        "would receive each of its events twice; list it once\n",
        (same->second < cfg->bus.connect_where.size() ? cfg->bus.connect_where[same->second]
                                                      : config::Position{cfg->file})
            .str()
            .c_str(),
        cfg->bus.connect[same->first].c_str(), cfg->bus.connect[same->second].c_str(),
        same->peer.c_str());
  }
  if (cfg->admin.enabled)
    if (auto why = admin_listen_problem(cfg->admin.listen))
      on_this_machine(cfg->admin.listen_where, "admin.listen: " + *why);
  // What `run` refuses to start on ends here; the rest would leave a hook out or pause a
  // webhook, and a service manager that refused to start for those would lose every event.
  if (args.has("config-only")) {
    if (problems) {
      std::fprintf(stderr, "%d problem%s found\n", problems, problems == 1 ? "" : "s");
      return 1;
    }
    std::printf(
        "%s: ok to run (%zu webhooks; hooks, webhook URLs, headers and TLS file contents not "
        "checked)\n",
        cfg->file.c_str(), cfg->webhooks.size());
    return 0;
  }
  // What would pause a webhook at run time, each problem at its key (all of them, not the first).
  for (const auto& w : cfg->webhooks) {
    for (const auto& problem :
         webhooks::webhook_settings_problems(w, webhooks::LiteralAddresses::Reported)) {
      std::fprintf(stderr, "%s: webhook %s: %s\n", problem.where.str().c_str(), w.name.c_str(),
                   escape_controls(problem.message).c_str());
      ++problems;
    }
    // A plain secret works (it is keyed on its bytes), but the Standard Webhooks libraries
    // base64-decode any secret they are given: say how receivers must pass it. Never the value.
    for (const auto& secret : w.secrets) {
      // A short key can be found offline from one signed delivery (found in a security pass:
      // `whsec_AA==`, one byte, passed without a word). Standard Webhooks asks for 24 to 64.
      constexpr size_t kMinKeyBytes = 16;
      if (auto key = webhooks::standard_webhooks_key(secret); key && key->size() < kMinKeyBytes) {
        ++warnings;
        std::fprintf(stderr,
                     "%s: warning: webhook %s: a secret of %zu key byte%s can be guessed from "
                     "one signed delivery; use 24 random bytes or more (`hookgate keygen "
                     "--webhook-secret`)\n",
                     w.secrets_where.str().c_str(), w.name.c_str(), key->size(),
                     key->size() == 1 ? "" : "s");
      }
      // Found in a config torture pass: `secret: |` keeps its line break, and the gateway signs
      // with it; a receiver whose copy has none (most do) never verifies.
      if (!secret.empty() && (std::isspace(static_cast<unsigned char>(secret.front())) ||
                              std::isspace(static_cast<unsigned char>(secret.back())))) {
        ++warnings;
        std::fprintf(stderr,
                     "%s: warning: webhook %s: a secret begins or ends with white space (a `|` "
                     "block keeps its line break), which the signatures then include: write it "
                     "quoted, or with `|-`\n",
                     w.secrets_where.str().c_str(), w.name.c_str());
      }
      if (secret.starts_with(webhooks::kStandardWebhooksSecretPrefix)) continue;
      ++warnings;
      std::fprintf(stderr,
                   "%s: warning: webhook %s: a secret without the whsec_ prefix is used as raw "
                   "bytes; standardwebhooks/svix receivers must pass it as bytes (Python "
                   "Webhook(secret.encode()), JS {format: \"raw\"}), or use `hookgate keygen "
                   "--webhook-secret`\n",
                   w.secrets_where.str().c_str(), w.name.c_str());
    }
  }
  // Two webhooks whose names differ only in case are two webhooks, each with its spool rows,
  // /status entry and series; `deliveries --webhook siem` leaves SIEM's out. Allowed (a rename
  // would lose neither), but easily taken for one another.
  std::map<std::string, const config::WebhookConfig*> by_lower_name;
  for (const auto& w : cfg->webhooks) {
    auto [first, fresh] = by_lower_name.try_emplace(ascii_lower(w.name), &w);
    if (fresh) continue;
    ++warnings;
    std::fprintf(stderr,
                 "%s: warning: webhook %s: its name differs from webhook %s's (%s) only in case: "
                 "they are two webhooks, which `hookgate deliveries --webhook`, /status and "
                 "/metrics tell apart by case\n",
                 w.where.str().c_str(), w.name.c_str(), first->second->name.c_str(),
                 first->second->where.str().c_str());
  }
  config::Diagnostics errors;
  config::Diagnostics hook_warnings;
  auto chain = load_hooks_for_tools(cfg->hooks, errors, hook_warnings);
  warnings += static_cast<int>(print_warnings(hook_warnings));
  for (const auto& e : errors) {
    std::fprintf(stderr, "%s\n", e.str().c_str());
    ++problems;
  }
  if (problems) {
    std::fprintf(stderr, "%d problem%s found\n", problems, problems == 1 ? "" : "s");
    return 1;
  }
  // "ok" with warnings still exits 0 (`run` starts), but does not read as all clear. Nor is a
  // config `run` would refuse on this machine "ok" (found in review): it is valid, and exits 0
  // since this check also runs away from the config's machine (in CI); --config-only fails it.
  std::string note;
  if (warnings > 0)
    note = "; " + std::to_string(warnings) + (warnings == 1 ? " warning" : " warnings") + " above";
  if (stop_run_here > 0) {
    std::printf(
        "%s: valid (%zu webhooks, %zu hooks%s), but `run` refuses to start on this "
        "machine until the %d marked so above %s fixed (`check --config-only` exits 1 "
        "for them)\n",
        cfg->file.c_str(), cfg->webhooks.size(), chain->loaded_count(), note.c_str(), stop_run_here,
        stop_run_here == 1 ? "is" : "are");
    return 0;
  }
  std::printf("%s: ok (%zu webhooks, %zu hooks%s)\n", cfg->file.c_str(), cfg->webhooks.size(),
              chain->loaded_count(), note.c_str());
  return 0;
}

}  // namespace hookgate::cli
