#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <unordered_set>

#include "gateway/cli/cli.hpp"
#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/text.hpp"
#include "webhooks/sqlite_spool.hpp"

namespace hookgate::cli {
namespace {

const char* state_name(webhooks::DeliveryState s) {
  switch (s) {
    case webhooks::DeliveryState::Pending:
      return "pending";
    case webhooks::DeliveryState::Delivered:
      return "delivered";
    case webhooks::DeliveryState::Dead:
      return "dead";
  }
  return "?";
}

// The spool a `deliveries` sub-verb acts on, and what it needs to say about it.
struct OpenSpool {
  webhooks::SqliteSpool& store;
  const std::string& path;
  const std::optional<config::Config>& config;  // with --config: which webhooks the gateway runs

  // A locked or damaged file reads as nothing: say so rather than print an empty spool.
  std::optional<int> read_failed() const {
    if (auto error = store.take_read_error())
      return fail("spool " + path + ": cannot read: " + *error);
    return std::nullopt;
  }
  bool configures(const std::string& webhook) const {
    return config && std::any_of(config->webhooks.begin(), config->webhooks.end(),
                                 [&](const auto& w) { return w.name == webhook; });
  }
};

// `deliveries list`: a table of at most `limit` rows and the totals.
int list_deliveries(const OpenSpool& spool, std::optional<webhooks::DeliveryState> state,
                    const std::string& webhook, size_t limit) {
  // With no --state, what needs attention comes first: pending, then dead, then the delivered
  // history (found in an operator's test: 100 delivered rows hid the dead letters the footer
  // counted). Oldest first within each.
  // One state of the file for the rows and the totals (found in a spool-at-scale pass: beside a
  // busy gateway, "0 shown; 1 pending in all").
  struct ReadSnapshot {
    webhooks::SqliteSpool& store;
    explicit ReadSnapshot(webhooks::SqliteSpool& s) : store(s) { store.begin_read_snapshot(); }
    ~ReadSnapshot() { store.end_read_snapshot(); }
  } snapshot(spool.store);
  std::vector<webhooks::Delivery> rows;
  for (auto each : {webhooks::DeliveryState::Pending, webhooks::DeliveryState::Dead,
                    webhooks::DeliveryState::Delivered}) {
    if ((state && *state != each) || rows.size() >= limit) continue;
    auto more = spool.store.list(each, webhook, limit - rows.size());
    rows.insert(rows.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  }
  // The total of what was asked for: of its state and webhook, or with no --state (every
  // state listed) of the pending and dead ones, each (it used to count only the pending ones).
  // The delivered history is not counted unless asked for: a day of it may be most of the
  // file, and counting it would take seconds.
  size_t total = 0;
  std::string totals;
  for (auto each : {webhooks::DeliveryState::Pending, webhooks::DeliveryState::Dead,
                    webhooks::DeliveryState::Delivered}) {
    if (state ? *state != each : each == webhooks::DeliveryState::Delivered) continue;
    const size_t n = spool.store.count(each, webhook);
    total += n;
    totals += (totals.empty() ? "" : ", ") + std::to_string(n) + " " + state_name(each);
  }
  if (auto code = spool.read_failed()) return *code;
  std::printf("%-36s %-9s %-16s %-24s %-36s %-8s %-24s %s\n", "ID", "STATE", "WEBHOOK",
              "EVENT TYPE", "EVENT ID", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR");
  for (const auto& d : rows) {
    // Event types, ids and errors come from publishers and receivers: escaped, they cannot
    // move the cursor or fake table rows.
    std::printf("%-36s %-9s %-16s %-24s %-36s %-8d %-24s %s\n", d.id.c_str(), state_name(d.state),
                d.webhook.c_str(), escape_controls(d.event_type).c_str(),
                escape_controls(d.event_id).c_str(), d.attempts,
                d.state == webhooks::DeliveryState::Pending
                    ? format_rfc3339(d.next_attempt_ms).c_str()
                    : "-",
                escape_controls(d.last_error).c_str());
  }
  std::printf("%zu shown; %s in all%s%s\n", rows.size(), totals.c_str(),
              webhook.empty() ? "" : (" for webhook " + escape_controls(webhook)).c_str(),
              state ? "" : ", besides the delivered history");
  // Oldest first: the newest rows are the ones a cut-off listing leaves out.
  if (state ? rows.size() < total : rows.size() == limit)
    std::printf("(%s; --limit N shows more)\n",
                state ? ("the " + std::to_string(rows.size()) + " oldest that match").c_str()
                      : "pending first, then dead, then delivered, the oldest first in each");
  // A mistyped name would read as a webhook with nothing to show (found in an operator's
  // test); `replay --all-dead --webhook` says the same, as an error.
  if (rows.empty() && !webhook.empty() && !spool.configures(webhook) &&
      (!state || spool.store.list(std::nullopt, webhook, 1).empty()))
    std::fprintf(stderr,
                 "hookgate: note: no delivery in %s belongs to webhook '%s' (`hookgate "
                 "deliveries list` without --webhook shows the names)\n",
                 spool.path.c_str(), escape_controls(webhook).c_str());
  return 0;
}

// `deliveries show ID`: every field, the body included.
int show_delivery(const OpenSpool& spool, const std::string& id) {
  auto d = spool.store.get(id);
  if (auto code = spool.read_failed()) return *code;
  if (!d) return fail("no delivery " + id);
  std::printf(
      "id:           %s\nstate:        %s\nwebhook:      %s\nevent:        %s (%s)\nattempts:    "
      " %d\n"
      "created:      %s\nnext attempt: %s\nlast error:   %s\nbody bytes:   %s\nbody:         "
      "%s\n",
      d->id.c_str(), state_name(d->state), d->webhook.c_str(), escape_controls(d->event_id).c_str(),
      escape_controls(d->event_type).c_str(), d->attempts, format_rfc3339(d->created_ms).c_str(),
      d->state == webhooks::DeliveryState::Pending ? format_rfc3339(d->next_attempt_ms).c_str()
                                                   : "-",
      escape_controls(d->last_error).c_str(),
      d->body ? std::to_string(d->body->size()).c_str() : "-",
      // A body holds a publisher's text: a NUL must not cut it short, nor an escape sequence
      // reach the terminal. The escapes are JSON's, and the gateway writes compact JSON (no
      // raw newlines), so a body prints as the JSON it is.
      d->body ? escape_controls(*d->body).c_str() : "(missing from the spool file)");
  return 0;
}

// `deliveries replay|purge`: each acts on dead letters only (replay --delivered on delivered ones
// too), by id or --all-dead [--webhook NAME].
int replay_or_purge(const OpenSpool& spool, const Args& args, bool purge,
                    const std::string& webhook) {
  // --delivered: a delivered id is sent again too (same id; a receiver that deduplicates on
  // webhook-id must forget it first). Only by id: a bulk resend of history is a new publish.
  const bool delivered_too = args.has("delivered");
  const char* which = delivered_too ? "" : "dead ";
  auto done = [&](size_t n) {
    return std::to_string(n) + " " + which + (n == 1 ? "delivery " : "deliveries ") +
           (purge ? "deleted" : "queued again");
  };
  auto act = [&](const std::vector<std::string>& ids) {
    return purge ? spool.store.purge_dead(ids, false) : spool.store.replay_ids(ids, delivered_too);
  };
  // Replayed deliveries of a webhook the config no longer has (renamed, removed) are pending
  // under a name no dispatcher claims: say so, or they wait unseen.
  auto warn_unconfigured = [&] {
    if (!spool.config || purge) return;
    for (const auto& [name, count] : spool.store.pending_by_webhook()) {
      if (!spool.configures(name))
        std::fprintf(stderr,
                     "hookgate: warning: %zu pending deliveries belong to webhook '%s', which "
                     "%s does not configure: they wait until a webhook of that name is "
                     "configured again\n",
                     count, escape_controls(name).c_str(), spool.config->file.c_str());
    }
  };
  size_t moved;
  if (args.has("all-dead")) {
    auto acted =
        purge ? spool.store.purge_dead({}, true, webhook) : spool.store.replay_all_dead(webhook);
    if (!acted) return fail(acted.error().message);
    moved = *acted;
    // A mistyped name would otherwise read as "nothing was dead".
    if (moved == 0 && !webhook.empty() && !spool.configures(webhook) &&
        spool.store.list(std::nullopt, webhook, 1).empty()) {
      if (auto code = spool.read_failed()) return *code;
      return fail("no delivery in " + spool.path + " belongs to webhook '" +
                  escape_controls(webhook) + "' (`hookgate deliveries list` shows the names)");
    }
    std::printf("%s\n", done(moved).c_str());
    if (moved > 0) warn_unconfigured();
    return 0;
  }
  std::vector<std::string> ids(args.positional().begin() + 1, args.positional().end());
  // Every ID that will not be acted on is named (a typo, or not dead), and the dead ones are
  // acted on in one transaction (one commit, one wait for the write lock), not one each.
  std::vector<std::string> dead;
  std::unordered_set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> missed;  // id, why
  for (const auto& id : ids) {
    auto found = spool.store.get_head(id);
    if (auto code = spool.read_failed()) return *code;
    if (!found) {
      missed.emplace_back(id, "no delivery with that id (`hookgate deliveries list` shows them)");
    } else if (found->state == webhooks::DeliveryState::Delivered && delivered_too) {
      if (seen.insert(id).second) dead.push_back(id);
    } else if (found->state != webhooks::DeliveryState::Dead) {
      const bool resendable = !purge && found->state == webhooks::DeliveryState::Delivered;
      missed.emplace_back(id, std::string("it is ") + state_name(found->state) + ", not dead" +
                                  (resendable ? " (--delivered sends it again)" : ""));
    } else if (seen.insert(id).second) {
      dead.push_back(id);
    }
  }
  moved = 0;
  if (!dead.empty()) {
    // A file locked past the busy timeout, or read-only, is not "no such delivery": the cause.
    auto acted = act(dead);
    if (!acted)
      return fail(acted.error().message + " (none of the " + std::to_string(dead.size()) + " " +
                  which + "ids " + (purge ? "deleted" : "replayed") + ")");
    moved = *acted;
  }
  std::printf("%s\n", done(moved).c_str());
  if (moved > 0) warn_unconfigured();
  for (const auto& [id, why] : missed)
    std::fprintf(stderr, "hookgate: %s was not %s: %s\n", escape_controls(id).c_str(),
                 purge ? "deleted" : "replayed", why.c_str());
  // Another process (the gateway's own replay, a second command) may have acted on some
  // between the look and the write.
  if (moved < dead.size())
    std::fprintf(stderr,
                 "hookgate: %zu of the %sids were no longer %s when %s (another process "
                 "replayed or purged them, or spool.%s pruned them, meanwhile)\n",
                 dead.size() - moved, which, delivered_too ? "dead or delivered" : "dead",
                 purge ? "deleted" : "replayed",
                 delivered_too ? "dead_retention_ms or retention_ms" : "dead_retention_ms");
  return missed.empty() && moved == dead.size() ? 0 : 1;
}

}  // namespace

int cmd_deliveries(const std::vector<std::string>& argv) {
  Args args(argv, {"all-dead", "delivered"});
  const char* usage =
      "Usage: hookgate deliveries list [--config FILE | --spool FILE] [--state "
      "pending|dead|delivered] [--webhook NAME] [--limit N]\n"
      "       hookgate deliveries show ID [--config FILE | --spool FILE]\n"
      "       hookgate deliveries replay ID... [--delivered] | --all-dead [--webhook NAME] "
      "[--config FILE | --spool FILE]\n"
      "       hookgate deliveries purge ID... | --all-dead [--webhook NAME] [--config FILE | "
      "--spool FILE]\n"
      "replay queues dead deliveries again (same ids), and with --delivered delivered ones too\n"
      "(a receiver that lost what it acknowledged); purge deletes dead ones for good.\n"
      "Works on the spool file of --config (or ./hookgate-spool.db), also while the gateway "
      "runs.\n"
      "--spool names the file directly: the config is not read, so its ${VAR}s (secrets) need not "
      "be set.\n";
  if (auto code = check_usage(
          args, {"config", "spool", "state", "webhook", "limit", "all-dead", "delivered"}, usage,
          /*takes_arguments=*/true))
    return *code;
  if (args.positional().empty()) return fail(std::string("missing sub-verb\n") + usage, 2);
  // Every usage error before the spool is opened: a typo must not read as a spool problem.
  const std::string& sub = args.positional()[0];
  const size_t operands = args.positional().size() - 1;
  if (sub != "list" && sub != "show" && sub != "replay" && sub != "purge")
    return fail("unknown sub-verb '" + sub + "'\n" + usage, 2);
  if (sub == "list" && operands > 0)
    return fail("list takes no arguments (did you mean --state " + args.positional()[1] + "?)", 2);
  if (sub == "show" && operands != 1) return fail("usage: hookgate deliveries show ID", 2);
  if ((sub == "replay" || sub == "purge") && (operands > 0) == args.has("all-dead"))
    return fail("usage: hookgate deliveries " + sub + " ID... | --all-dead [--webhook NAME]", 2);
  // An option a sub-verb does not read is a usage error: `replay --all-dead --limit 5` replayed
  // every dead letter, not five.
  std::vector<std::string> takes = {"config", "spool"};
  if (sub == "list") takes.insert(takes.end(), {"state", "webhook", "limit"});
  if ((sub == "replay" || sub == "purge") && args.has("all-dead"))
    takes.insert(takes.end(), {"all-dead", "webhook"});
  if (sub == "replay" && !args.has("all-dead")) takes.push_back("delivered");
  if (auto stray = args.unknown(takes); !stray.empty())
    return fail(stray.front() + " is not an option of `deliveries " + sub +
                    (sub == "list" || sub == "show" ? "" : " ID...") + "`\n" + usage,
                2);
  std::optional<webhooks::DeliveryState> state;
  if (auto given = args.get("state")) {
    const std::string s = ascii_lower(*given);  // a keyword, any case, as in the config
    if (s == "pending")
      state = webhooks::DeliveryState::Pending;
    else if (s == "dead")
      state = webhooks::DeliveryState::Dead;
    else if (s == "delivered")
      state = webhooks::DeliveryState::Delivered;
    else
      return fail("--state must be pending, dead or delivered", 2);
  }
  const auto limit_option = positive_option(args, "limit", "100");
  if (!limit_option)
    return fail(
        "--limit: expected a positive number of rows, got '" + args.get_or("limit", "") + "'", 2);
  // The spool's own warnings and errors (a file busy past its timeout) go to stderr, with the
  // redaction every log line gets; stdout stays the listing.
  setup_logging("warn", "text");
  if (args.has("spool") && args.has("config")) return fail("give --config or --spool, not both", 2);
  config::SpoolConfig spool_cfg;
  std::optional<config::Config> config;  // with --config: which webhooks the gateway runs
  if (auto path = args.get("spool")) {
    spool_cfg.path = *path;
  } else {
    auto cfg = load_config_or_report(args);
    if (!cfg) {
      std::fprintf(stderr,
                   "hookgate: (to inspect the spool without the config's variables set, pass "
                   "--spool FILE)\n");
      return 1;
    }
    if (cfg->spool.mode == config::SpoolConfig::Mode::Memory)
      return fail("spool.mode is memory: there is no spool file to inspect");
    spool_cfg = cfg->spool;
    config = std::move(*cfg);
  }
  auto spool = webhooks::SqliteSpool::open(spool_cfg, /*read_only_tools=*/true);
  // Found in a newcomer's run: without --config, "is spool.path right?" sent them looking for a
  // setting they never made.
  if (!spool && !args.has("config") && !args.has("spool"))
    return fail("spool " + spool_cfg.path + ": " + spool.error().message +
                "; no --config given, so the default spool.path was used: pass --config FILE "
                "(the gateway's) or --spool FILE");
  if (!spool) return fail("spool " + spool_cfg.path + ": " + spool.error().message);
  const OpenSpool open{*spool.value(), spool_cfg.path, config};
  const std::string webhook = args.get_or("webhook", "");
  if (sub == "list")
    return list_deliveries(open, state, webhook, static_cast<size_t>(*limit_option));
  if (sub == "show") return show_delivery(open, args.positional()[1]);
  return replay_or_purge(open, args, sub == "purge", webhook);
}

}  // namespace hookgate::cli
