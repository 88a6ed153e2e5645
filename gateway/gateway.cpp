#include "gateway/gateway.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "bus/curve.hpp"
#include "bus/sequence_gaps.hpp"
#include "bus/subscriber.hpp"
#include "bus/wire.hpp"
#include "config/loader.hpp"
#include "gateway/admin_server.hpp"
#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"
#include "gateway/hooks/chain.hpp"
#include "gateway/hooks/observer_pool.hpp"
#include "gateway/hooks_watcher.hpp"
#include "gateway/router.hpp"
#include "webhooks/dispatcher.hpp"
#include "webhooks/memory_store.hpp"
#include "webhooks/settings_check.hpp"
#include "webhooks/sqlite_spool.hpp"

namespace hookgate {
namespace {

constexpr size_t kMaxBatch = 512;  // messages drained per spool transaction
// A batch also ends after this long: its deliveries wait for the batch, and the stop and reload
// flags are read between batches, so one slow hook (a one-shot waiting out its timeout per
// event) must not hold a whole burst, and with it a SIGTERM, for minutes.
constexpr int64_t kMaxBatchNs = 50'000'000;
// Deliveries handed to the spool whose commit has not been answered yet. Ingest goes on while
// the spool commits (a slow fsync then delays acceptance, not the next events); past this many
// it waits for the oldest batch, which is the spool's backpressure on the bus. About 1.5 MiB at
// ~0.7 KiB a delivery; at 2,000 events/s, a second of stalled commits.
constexpr size_t kMaxOpenDeliveries = 2048;
// The same two bounds in body bytes, for large events (up to bus.max_message_bytes each, and a
// Splunk HEC body per webhook): a batch ends past kMaxBatchBytes, and ingest waits while more than
// kMaxOpenBytes wait for their commit. Counted per delivery, so a body shared by several webhooks
// counts more than once: the bound errs low.
constexpr size_t kMaxBatchBytes = 16u << 20;
constexpr size_t kMaxOpenBytes = 32u << 20;

// Once per loaded config (start, SIGHUP), not on every hot reload of the hooks.
void log_missing_hook_directories(const config::HooksConfig& hooks) {
  for (const auto& missing : hooks::missing_hook_directories(hooks))
    spdlog::warn("{}", missing.str());
}

// The webhook a diagnostic must not be routed to: a hookgate.delivery.failed is raised on every
// failed attempt, and sent to the failing webhook itself it would queue behind the failure it
// reports, once per attempt. Its hookgate.delivery.dead (once per delivery) still goes to it, so
// a receiver on `*` or hookgate.* learns about its own dead letters once it is back.
std::string_view own_failure_skips(const DiagnosticEvent& d) {
  return d.type == diag::kDeliveryFailed ? std::string_view(d.webhook) : std::string_view();
}

}  // namespace

struct Gateway::Impl {
  config::Config cfg;
  zmq::context_t ctx{1};
  bus::ZapAuthenticatorStopper zap_stopper{ctx};  // after the sockets close, before ctx ends
  std::unique_ptr<bus::Subscriber> sub;
  std::string bus_endpoint;  // what sub bound to; /status reads it while sub may be closing
  std::atomic<bool> bus_open{false};  // bus_endpoint is set (the admin listener starts first)
  // A gateway that only connects: how many bus.connect peers it has now (nullptr when it binds).
  // Set before bus_open, like bus_endpoint.
  std::shared_ptr<const std::atomic<int>> bus_links;
  metrics::Gauge* bus_links_gauge = nullptr;  // with bus_links
  std::unique_ptr<webhooks::DeliveryStore> store;
  struct AddInFlight {  // ingest thread only
    std::future<Status> accepted;
    size_t events = 0;  // all decoded events of the batch (vetoed and unrouted ones too)
    size_t deliveries = 0;
    size_t bytes = 0;          // the deliveries' body sizes
    size_t routed_events = 0;  // those with a delivery of their own in it: what a refused add loses
    uint64_t router_generation = 0;  // of the webhooks that routed it (read before the snapshot)
  };
  uint64_t backlogs_reported_generation = 0;  // ingest thread only
  std::set<std::string> reshaped_webhooks;    // ingest thread only: body:/hec: changed by a reload
  uint64_t external_changes_seen = 0;         // ingest thread only: store->external_changes()
  std::map<std::string, size_t> unconfigured_named;  // backlogs last named (ingest thread)
  std::deque<AddInFlight> adds;
  size_t open_deliveries = 0;  // sum over `adds`
  size_t open_bytes = 0;       // sum over `adds`
  std::unique_ptr<webhooks::Dispatcher> dispatcher;
  std::unique_ptr<hooks::ObserverPool> observers;
  std::unique_ptr<AdminServer> admin;
  // The admin listener's threads render /status from most members here: it stops first on every
  // path, a start that fails after it started (the bus port taken) included.
  ~Impl() { admin.reset(); }

  mutable std::mutex mu;  // guards chain, router, cfg.webhooks
  // Bumped (under mu) whenever `router` is replaced: settled adds compare it without the lock.
  std::atomic<uint64_t> router_generation{0};
  std::shared_ptr<const hooks::HookChain> chain;
  std::shared_ptr<const Router> router;

  bool subscribes_to_everything = true;  // bus.topics holds "" (sequence gaps mean loss)
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
  std::atomic<bool> reload_config{false};
  std::atomic<bool> reload_hooks{false};
  // After reload_hooks, which its thread sets: destroyed (and its thread joined) first on every
  // path, a start that fails after the watcher started included.
  std::unique_ptr<HooksWatcher> watcher;

  LogLimiter reject_log{20, "bus: rejected-message lines"};
  LogLimiter gap_log{20, "bus: sequence-gap lines"};
  LogLimiter refused_log{5, "spool: refused-batch lines"};
  bus::SequenceGaps sequence_gaps;  // ingest thread only
  metrics::Counter& dropped = metrics::counter(
      "hookgate_bus_messages_dropped_total",
      "Bus messages that never arrived: gaps in the hookgateseq numbers publishers stamp");
  metrics::Counter& received =
      metrics::counter("hookgate_events_received_total", "Messages received from the bus");
  metrics::Counter& rejected =
      metrics::counter("hookgate_events_rejected_total", "Bus messages refused as malformed");
  metrics::Counter& accepted =
      metrics::counter("hookgate_events_accepted_total",
                       "Messages decoded into events and taken in: deliveries spooled, vetoed, or "
                       "routed to no webhook");
  metrics::Counter& refused =
      metrics::counter("hookgate_events_refused_total",
                       "Events lost because the spool refused them (disk full, I/O error)");
  metrics::Counter& routed =
      metrics::counter("hookgate_deliveries_created_total", "Deliveries created by routing");
  metrics::Counter& diagnostic_deliveries =
      metrics::counter("hookgate_diagnostic_deliveries_created_total",
                       "Deliveries created for hookgate.* diagnostic events");
  metrics::Counter& unrouted =
      metrics::counter("hookgate_events_unrouted_total", "Events that matched no webhook");
  metrics::Counter& reloads =
      metrics::counter("hookgate_hooks_reloads_total", "Hook chain reloads");
  // Found in an exploratory run: a renamed webhook's backlog left /metrics with its name, and
  // only the spool's total depth still counted it.
  metrics::Gauge& unconfigured_pending = metrics::gauge(
      "hookgate_spool_unconfigured_pending",
      "Pending deliveries of webhooks the config no longer has (renamed or removed): they wait "
      "until a webhook of that name is configured again, or are purged");
  // A refused reload is said only in the log otherwise (found in an exploratory run: nothing an
  // alert could see, and `systemctl reload` had succeeded).
  metrics::Counter& config_reloads_refused = metrics::counter(
      "hookgate_config_reloads_refused_total",
      "SIGHUP reloads whose config file had errors: the running configuration was kept");
  // An alert's hold on a hook file that does not load: the log line and the diagnostic come once.
  metrics::Gauge& hooks_not_loaded = metrics::gauge(
      "hookgate_hooks_failed_to_load",
      "Hook files that did not load at the last (re)load: left out, standing in closed, or "
      "running the version from before the reload");
  // Set here for either store, from its pending_count(), on every turn of the ingest loop.
  metrics::Gauge& spool_depth = metrics::gauge(
      "hookgate_spool_depth", "Pending deliveries in the spool, including those in flight");
  // One counter per diagnostic type, found once (and shown at 0 from the start): a lookup takes
  // the registry's lock, which a /metrics render holds while it writes the whole page, and
  // rejected bus messages raise a diagnostic each on the ingest thread.
  const std::map<std::string, metrics::Counter*, std::less<>> diagnostics_by_type = [] {
    std::map<std::string, metrics::Counter*, std::less<>> by_type;
    for (const char* type : diag::kAllTypes)
      by_type.emplace(type, &metrics::counter("hookgate_diagnostics_total",
                                              "Diagnostic events raised", {{"type", type}}));
    return by_type;
  }();

  std::pair<std::shared_ptr<const hooks::HookChain>, std::shared_ptr<const Router>> snapshot()
      const {
    std::lock_guard lock(mu);
    return {chain, router};
  }

  // Diagnostics raised outside the ingest thread (dispatcher, observers): routed and queued for
  // the spool without waiting for the commit, so a burst of failed attempts never holds the
  // dispatcher (and every other webhook) on the disk. A failed commit is logged by the spool.
  void emit_async(DiagnosticEvent d) {
    std::shared_ptr<const Router> r;
    {
      std::lock_guard lock(mu);
      r = router;
    }
    std::vector<webhooks::Delivery> out;
    if (route_diagnostic(r.get(), d, out) == 0) return;
    (void)store->add_async(std::move(out));
  }

  // Counts a diagnostic and appends the deliveries it routes to; returns how many.
  size_t route_diagnostic(const Router* r, const DiagnosticEvent& d,
                          std::vector<webhooks::Delivery>& out) {
    if (auto it = diagnostics_by_type.find(d.type); it != diagnostics_by_type.end())
      it->second->inc();
    else
      metrics::counter("hookgate_diagnostics_total", "Diagnostic events raised", {{"type", d.type}})
          .inc();
    if (!r || r->empty()) return 0;
    Event ev = make_diagnostic_event(d, now_unix_ms());
    const size_t n = r->route(ev, schedule_now_ms(), out, own_failure_skips(d));
    diagnostic_deliveries.inc(n);
    return n;
  }

  // Reloads build the next chain on their own thread (hg-hook-loader): a program hook's
  // handshake may take up to its timeout_ms, and stopping the old chain's co-processes up to
  // 300 ms each, while the ingest thread goes on reading the bus with the running chain. Requests
  // made during a load coalesce into one more load with the latest settings.
  std::mutex loader_mu;
  std::condition_variable loader_cv;
  struct LoadRequest {
    config::HooksConfig hooks;
    // Set by a config reload: swapped in together with the new chain, so no event meets the new
    // webhooks with the old hooks (a new SIEM webhook before its redaction hook).
    std::optional<std::vector<config::WebhookConfig>> webhooks;
  };
  std::optional<LoadRequest> loader_request;  // guarded by loader_mu
  bool loader_stopping = false;               // guarded by loader_mu
  // Set with loader_stopping: a load under way stops before its next hook, and nothing waits
  // for the old chain's users (stopping must not wait out a reload's handshakes).
  std::atomic<bool> loader_cancel{false};
  std::thread loader;
  // Replaced chains someone (an event in a slow hook, /status) still holds: the loader stops
  // them once it holds the last reference, so their co-processes (up to ~300 ms each to stop)
  // are not stopped on the ingest thread. Observe hooks with runs still queued are held by
  // those runs, not the chain: the observer thread that finishes the last one stops them.
  // Loader thread only.
  std::vector<std::shared_ptr<const hooks::HookChain>> retiring;

  void request_chain_load(const config::HooksConfig& hooks,
                          std::optional<std::vector<config::WebhookConfig>> webhooks = {}) {
    {
      std::lock_guard lock(loader_mu);
      if (!webhooks && loader_request) webhooks = std::move(loader_request->webhooks);
      loader_request = LoadRequest{hooks, std::move(webhooks)};
    }
    loader_cv.notify_one();
  }

  void loader_loop() {
    name_this_thread("hg-hook-loader");
    std::unique_lock lock(loader_mu);
    for (;;) {
      auto woken = [this] { return loader_stopping || loader_request.has_value(); };
      if (retiring.empty()) {
        loader_cv.wait(lock, woken);
      } else {  // look at the retiring chains' users again soon
        loader_cv.wait_for(lock, std::chrono::milliseconds(10), woken);
      }
      if (loader_stopping) break;
      std::optional<LoadRequest> request = std::exchange(loader_request, std::nullopt);
      lock.unlock();
      // Unlocked: stopping co-processes takes a while, and request_chain_load() takes the lock.
      // A waiting load goes first: the new hooks matter more than the old ones' exit.
      if (request) {
        spdlog::info("hooks: reloading (events flow through the running chain meanwhile)");
        load_chain(request->hooks, true, request->webhooks ? &*request->webhooks : nullptr);
      }
      std::erase_if(retiring, [](const auto& old) { return old.use_count() == 1; });
      lock.lock();
    }
    lock.unlock();
    // Stopping: nobody waits for the users of a replaced chain; the last one stops it.
    retiring.clear();
  }

  // Idempotent. A load in progress finishes first (bounded by the hooks' timeouts).
  void stop_loader() {
    {
      std::lock_guard lock(loader_mu);
      loader_stopping = true;
    }
    loader_cancel = true;
    loader_cv.notify_all();
    if (loader.joinable()) loader.join();
  }

  // The stop after intake: the socket, hot reload and the chain loader go, observers get 2 s and
  // requests in flight the grace. Idempotent (run() and the destructor both call it).
  void stop_components() {
    sub.reset();
    watcher.reset();
    stop_loader();
    if (observers) observers->stop(std::chrono::seconds(2));
    if (dispatcher) dispatcher->stop(std::chrono::milliseconds(cfg.spool.shutdown_grace_ms));
  }

  // With `webhooks`, the router for them is swapped in with the chain, under one lock.
  void load_chain(const config::HooksConfig& hooks_config, bool announce,
                  const std::vector<config::WebhookConfig>* webhooks = nullptr) {
    config::Diagnostics errors;
    std::shared_ptr<const hooks::HookChain> running;
    {
      std::lock_guard lock(mu);
      running = chain;
    }
    auto next =
        hooks::HookChain::load(hooks_config, errors, &loader_cancel, nullptr, running.get());
    if (!next) {
      spdlog::info("hooks: reload abandoned, the gateway is stopping");
      return;
    }
    for (const auto& e : errors) spdlog::warn("hooks: {}", e.str());
    auto next_router = webhooks ? std::make_shared<const Router>(*webhooks) : nullptr;
    std::shared_ptr<const hooks::HookChain> old;
    {
      std::lock_guard lock(mu);
      old = std::move(chain);
      chain = next;
      if (next_router) {
        router = next_router;
        router_generation.fetch_add(1, std::memory_order_release);
      }
    }
    // A removed hook's series leave /metrics with it, as a removed webhook's do (found in an
    // exploratory run: they stayed, frozen); a hook of that name loaded again brings them back.
    if (old) {
      std::set<std::string> kept;
      for (const auto& e : next->entries()) kept.insert(e.file.name);
      for (const auto& e : old->entries())
        if (kept.count(e.file.name) == 0)
          metrics::Registry::global().hide_label("hook", e.file.name);
    }
    if (webhooks) {
      dispatcher->set_webhooks(*webhooks);
      spdlog::info("reload: configuration reloaded from {} ({} webhooks)", cfg.file,
                   webhooks->size());
      // The backlogs of webhooks it removed are reported by the ingest thread, once the batches
      // the old webhooks routed are spooled (report_backlogs_after_reload).
    }
    // A hook that failed to load is left out, stands in closed or runs its version from before;
    // say so where operators look (diagnostics too, and a gauge to alert on).
    hooks_not_loaded.set(static_cast<int64_t>(next->failed_count()));
    for (const auto& e : next->entries()) {
      if (e.error.empty()) continue;
      emit_async(DiagnosticEvent{
          .type = diag::kHookFailed,
          .hook = e.file.name,
          .reason = "failed to load " + display_text(e.file.path) + ": " + e.error});
    }
    if (announce) {
      reloads.inc();
      DiagnosticEvent d{.type = diag::kHooksReloaded};
      d.reason = std::to_string(next->loaded_count()) + " hooks loaded, " +
                 std::to_string(next->failed_count()) + " failed to load";
      emit_async(std::move(d));
    }
    // Stopping the old chain's co-processes takes up to ~300 ms per hook: done on the loader
    // thread (loader_loop, once nobody else holds it), not on the ingest thread, which may still
    // hold the old chain for the batch it is in, however long its hooks take.
    if (old && old.use_count() > 1) retiring.push_back(std::move(old));
    old.reset();
  }

  // (Re)starts the inotify watcher on cfg.hooks' directories, or stops it without hot_reload.
  // A directory created since is watched from here on.
  void start_watcher() {
    watcher.reset();
    if (cfg.hooks.hot_reload && cfg.hooks.enabled)
      watcher =
          std::make_unique<HooksWatcher>(cfg.hooks.directories, [this] { reload_hooks = true; });
  }

  // Deliveries stay with the webhook name they were made for; after a rename or a removal they
  // wait in the spool for that name to come back, which an operator must hear about. With
  // `only_growth`, a backlog already named is named again only when it grew.
  void report_unconfigured_backlogs(const Router& configured,
                                    const std::map<std::string, size_t>& pending,
                                    bool only_growth = false) {
    std::map<std::string, size_t> unconfigured;
    for (const auto& [name, count] : pending) {
      if (configured.has_webhook(name)) continue;
      unconfigured[name] = count;
      if (only_growth) {
        auto named = unconfigured_named.find(name);
        if (named != unconfigured_named.end() && named->second >= count) continue;
      }
      spdlog::warn(
          "spool holds {} pending deliveries for webhook '{}', which is not configured: they "
          "wait there until a webhook of that name is configured again (hookgate deliveries "
          "list --webhook {})",
          count, name, name);
    }
    size_t total = 0;
    for (const auto& [name, count] : unconfigured) total += count;
    unconfigured_pending.set(static_cast<int64_t>(total));
    unconfigured_named = std::move(unconfigured);
  }

  // After a reload replaced the webhooks, says once which pending deliveries no configured
  // webhook takes: on this thread and only when every batch the old webhooks routed has settled,
  // since one still open may yet spool deliveries for a webhook the reload removed.
  void report_backlogs_after_reload() {
    const uint64_t current = router_generation.load(std::memory_order_acquire);
    if (current == backlogs_reported_generation) return;
    for (const auto& add : adds)
      if (add.router_generation != current) return;
    backlogs_reported_generation = current;
    const auto pending = store->pending_by_webhook();
    report_unconfigured_backlogs(*snapshot().second, pending);
    for (const auto& name : reshaped_webhooks)
      if (auto it = pending.find(name); it != pending.end() && it->second > 0)
        spdlog::warn(
            "reload: webhook {} sends a body of another shape now (body:/hec: changed); its {} "
            "pending deliveries were made before and go out in the old shape",
            name, it->second);
    reshaped_webhooks.clear();
  }

  // A replay from the command line (`--spool FILE`: it cannot know the config) may have made
  // deliveries of a removed webhook pending again: the gateway names them, as at start, from the
  // counts the spool read anyway (a purge, which adds nothing, says nothing).
  void report_backlogs_after_external_change() {
    const uint64_t changes = store->external_changes();
    if (changes == external_changes_seen) return;
    external_changes_seen = changes;
    report_unconfigured_backlogs(*snapshot().second,
                                 store->pending_by_webhook_after_external_change(),
                                 /*only_growth=*/true);
  }

  // Whether the reloaded config `n` must not replace the running one; each reason is logged.
  bool refuses_reload(const config::Config& n) {
    if (n.holds_no_settings) {
      spdlog::error(
          "reload: {} holds no settings (empty, comments or x- keys only: caught while being "
          "written?); keeping the running configuration",
          cfg.file);
      config_reloads_refused.inc();
      return true;
    }
    // What `run` would refuse to start on: the next restart must not find it first.
    if (auto keys = bus::check_curve_files(n.bus.curve); !keys) {
      spdlog::error("reload: {}; keeping the running configuration", keys.error().str());
      config_reloads_refused.inc();
      return true;
    }
    // Settings a webhook cannot be sent with would pause it, and the running config sends (found
    // in an exploratory run: a mistyped rotation secret stopped a SIEM feed). At start there is
    // no running config, so such a webhook is paused there and the others go on.
    // Only new problems: a webhook paused at start for the same ones must not block every later
    // reload (a revoked publisher key, a hook fix).
    auto problems_of = [](const config::WebhookConfig& w) {
      std::set<std::string> messages;
      for (const auto& problem :
           webhooks::webhook_settings_problems(w, webhooks::LiteralAddresses::RefusedPerAttempt))
        messages.insert(problem.message);
      return messages;
    };
    bool unusable = false;
    for (const auto& w : n.webhooks) {
      const auto running = std::find_if(cfg.webhooks.begin(), cfg.webhooks.end(),
                                        [&](const auto& r) { return r.name == w.name; });
      const auto before =
          running == cfg.webhooks.end() ? std::set<std::string>() : problems_of(*running);
      for (const auto& problem :
           webhooks::webhook_settings_problems(w, webhooks::LiteralAddresses::RefusedPerAttempt)) {
        if (before.count(problem.message) > 0) continue;
        spdlog::error("reload: {}: webhook {}: {}", problem.where.str(), w.name, problem.message);
        unusable = true;
      }
    }
    if (unusable) {
      spdlog::error("reload: {} has errors, keeping the running configuration", cfg.file);
      config_reloads_refused.inc();
    }
    return unusable;
  }

  // Says which settings of the reloaded config `n` take effect only on restart: a reload applies
  // none of them, and an operator must know what still waits.
  void warn_restart_only_changes(const config::Config& n) const {
    const auto& cur_curve = cfg.bus.curve;
    const auto& new_curve = n.bus.curve;
    {
      std::vector<std::string> changed;  // named, so the operator knows what waits for a restart
      if (n.bus.bind != cfg.bus.bind) changed.push_back("bus.bind");
      if (n.bus.connect != cfg.bus.connect) changed.push_back("bus.connect");
      if (n.bus.topics != cfg.bus.topics) changed.push_back("bus.topics");
      if (new_curve.enabled != cur_curve.enabled) changed.push_back("bus.curve.enabled");
      if (new_curve.secret_key_file != cur_curve.secret_key_file)
        changed.push_back("bus.curve.secret_key_file");
      if (new_curve.server_key != cur_curve.server_key) changed.push_back("bus.curve.server_key");
      if (!changed.empty())
        spdlog::warn("reload: {} changed; {} effect on restart", join(changed, ", "),
                     changed.size() == 1 ? "it takes" : "they take");
    }
    if (n.spool.path != cfg.spool.path || n.spool.mode != cfg.spool.mode ||
        n.spool.memory_max_pending != cfg.spool.memory_max_pending ||
        n.spool.synchronous != cfg.spool.synchronous ||
        n.spool.retention_ms != cfg.spool.retention_ms ||
        n.spool.dead_retention_ms != cfg.spool.dead_retention_ms ||
        n.spool.retention_max_bytes != cfg.spool.retention_max_bytes)
      spdlog::warn(
          "reload: spool settings (path, mode, synchronous, memory_max_pending, retention_ms, "
          "dead_retention_ms, retention_max_bytes) changed; they take effect on restart");
    if (n.admin.enabled != cfg.admin.enabled)
      spdlog::warn("reload: admin.enabled changed; it takes effect on restart");
    if (n.admin.listen != cfg.admin.listen)
      spdlog::warn("reload: admin.listen changed; it takes effect on restart");
    if (n.admin.token != cfg.admin.token)  // never log either token
      spdlog::warn(
          "reload: admin.token changed; it takes effect on restart (the old one is "
          "still accepted until then)");
    if (n.bus.max_message_bytes != cfg.bus.max_message_bytes ||
        n.bus.receive_hwm != cfg.bus.receive_hwm)
      spdlog::warn(
          "reload: bus.max_message_bytes/receive_hwm changed; they take effect on restart");
    if (n.hooks.observer_queue != cfg.hooks.observer_queue ||
        n.hooks.observer_threads != cfg.hooks.observer_threads)
      spdlog::warn(
          "reload: hooks.observer_queue/observer_threads changed; they take effect on "
          "restart");
    if (n.log.format != cfg.log.format)
      spdlog::warn("reload: log.format changed; it takes effect on restart");
  }

  // A reload that finds a hook directory of the running chain missing waits for it to come back,
  // as hot reload does (HooksWatcher's grace): loading now would run events through a chain
  // without that directory's hooks, a redactor among them (found in an operator's test: a SIGHUP
  // while a deploy had moved the folder away sent 216 events unredacted). The ingest loop tries
  // the reload again every 250 ms; after the grace it goes on without them.
  bool waits_for_vanished_hook_directory(const config::Config& n) {
    std::vector<std::string> missing;
    if (n.hooks.enabled) {
      std::set<std::string> running_directories;
      if (const auto ch = snapshot().first)
        for (const auto& e : ch->entries())
          if (e.hook) running_directories.insert(e.file.directory);
      for (const auto& configured : n.hooks.directories) {
        const auto directory = hooks::normalized_directory(configured);
        if (running_directories.count(directory.string()) && !directory_exists(directory))
          missing.push_back(directory.string());
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (missing.empty()) {
      reload_waits_since.reset();
      return false;
    }
    if (!reload_waits_since) {
      reload_waits_since = now;
      spdlog::warn(
          "reload: hook directory {} is missing; the reload waits up to {} s for it to come back "
          "(a deploy copying it anew), and the running hooks and webhooks stay meanwhile",
          join(missing, ", "), kVanishedDirectoryGrace.count());
    }
    if (now - *reload_waits_since < kVanishedDirectoryGrace) {
      reload_retry_at = now + std::chrono::milliseconds(250);
      return true;
    }
    spdlog::warn("reload: hook directory {} is still missing; reloading without its hooks",
                 join(missing, ", "));
    reload_waits_since.reset();
    return false;
  }

  void do_reload_config() {
    if (cfg.file.empty()) {
      spdlog::info("reload: running on embedded defaults, reloading hooks only");
      request_chain_load(cfg.hooks);  // the watcher follows new directories by itself
      return;
    }
    auto next = config::load_config_file(cfg.file);
    if (!next) {
      for (const auto& e : next.error()) spdlog::error("reload: {}", e.str());
      spdlog::error("reload: {} has errors, keeping the running configuration", cfg.file);
      config_reloads_refused.inc();
      reload_waits_since.reset();  // a refused reload waits for nothing: no retry, no log flood
      return;
    }
    config::Config& n = next.value();
    if (refuses_reload(n)) {
      reload_waits_since.reset();
      return;
    }
    if (waits_for_vanished_hook_directory(n)) return;
    warn_restart_only_changes(n);
    const auto& cur_curve = cfg.bus.curve;
    const auto& new_curve = n.bus.curve;
    // The allow-list is re-read on every reload: removing a compromised publisher's key must not
    // wait for a restart. A list that cannot be read keeps the running one.
    if (cur_curve.enabled && !cur_curve.client_mode() && new_curve.enabled &&
        !new_curve.client_mode()) {
      if (auto st = bus::ensure_zap_authenticator(ctx, new_curve); !st) {
        spdlog::error("reload: bus allowed_clients {}: {}; keeping the running allow-list",
                      new_curve.allowed_clients, st.error().message);
      } else {
        cfg.bus.curve.allowed_clients = new_curve.allowed_clients;
        spdlog::info("reload: bus allow-list re-read from {}", new_curve.allowed_clients);
      }
    }
    // Read only when stopping, on this thread: the next stop uses the new grace.
    cfg.spool.shutdown_grace_ms = n.spool.shutdown_grace_ms;
    // So a full spool's bound can be raised without a restart (the bus keeps what waits).
    if (n.spool.max_bytes != cfg.spool.max_bytes && n.spool.mode == cfg.spool.mode) {
      cfg.spool.max_bytes = n.spool.max_bytes;
      store->set_max_bytes(n.spool.max_bytes);
      spdlog::info("reload: spool.max_bytes is {} now", n.spool.max_bytes);
    }
    n.log.level_override = cfg.log.level_override;
    // Set first: "warn" → "debug" must show the line (the other way round it is not wanted).
    spdlog::default_logger()->set_level(spdlog::level::from_str(n.log.effective_level()));
    if (n.log.effective_level() != cfg.log.effective_level())
      spdlog::info("reload: log level {} (was {})", n.log.effective_level(),
                   cfg.log.effective_level());
    n.log.format = cfg.log.format;
    // Bodies are made when an event is routed: a webhook whose body changes shape keeps its
    // spooled backlog in the old one. Said once the new webhooks take over, with the count.
    for (const auto& w : n.webhooks)
      for (const auto& old : cfg.webhooks)
        if (old.name == w.name &&
            (old.body != w.body || old.hec_sourcetype != w.hec_sourcetype ||
             old.hec_index != w.hec_index || old.hec_host_field != w.hec_host_field))
          reshaped_webhooks.insert(w.name);
    // Which webhooks come, change and go, by name (how many alone said little).
    std::vector<std::string> added;
    std::vector<std::string> changed;
    std::vector<std::string> removed;
    for (const auto& w : n.webhooks) {
      const auto old = std::find_if(cfg.webhooks.begin(), cfg.webhooks.end(),
                                    [&](const auto& o) { return o.name == w.name; });
      if (old == cfg.webhooks.end()) {
        added.push_back(w.name);
        continue;
      }
      // Which keys, by name (found in an operator's test: "changes wa" said nothing of what);
      // never their values, which may be secrets.
      auto keys = webhooks::changed_delivery_settings(*old, w);
      if (old->events != w.events) keys.emplace_back("events");
      if (old->hec_sourcetype != w.hec_sourcetype || old->hec_index != w.hec_index ||
          old->hec_host_field != w.hec_host_field)
        keys.emplace_back("hec");
      if (!keys.empty()) changed.push_back(w.name + " (" + join(keys, ", ") + ")");
    }
    for (const auto& old : cfg.webhooks)
      if (std::none_of(n.webhooks.begin(), n.webhooks.end(),
                       [&](const auto& w) { return w.name == old.name; }))
        removed.push_back(old.name);
    std::string comings;
    if (!added.empty()) comings += "; adds " + join(added, ", ");
    if (!changed.empty()) comings += "; changes " + join(changed, ", ");
    if (!removed.empty()) comings += "; removes " + join(removed, ", ");
    cfg.webhooks = n.webhooks;
    log_missing_hook_directories(n.hooks);
    n.hooks.max_event_bytes = cfg.hooks.max_event_bytes;  // the running bus limit, as above
    // Restart-only, so the running values stay what the next reload compares with (found in an
    // operator's test: a second reload of the same file said nothing, and going back to the
    // running value warned that it "changed").
    n.hooks.observer_queue = cfg.hooks.observer_queue;
    n.hooks.observer_threads = cfg.hooks.observer_threads;
    cfg.hooks = n.hooks;
    cfg.log = n.log;
    start_watcher();  // the directories, or hot_reload, may have changed
    // Said before the load starts: its "configuration reloaded" line comes from another thread.
    spdlog::info("reload: {} read; its webhooks take over with its hooks once those have loaded{}",
                 cfg.file, comings);
    request_chain_load(cfg.hooks, cfg.webhooks);
  }

  // Decodes, runs the chain and routes one message; deliveries (and diagnostics raised on this
  // thread) go into `batch`. The number of deliveries made for the event itself (0 when vetoed
  // or unrouted; its diagnostics' deliveries do not count), or nullopt when the message was
  // rejected (it is not an accepted event).
  std::optional<size_t> process(std::vector<zmq::message_t>& frames, const hooks::HookChain& ch,
                                const Router& rt, bool observers_on,
                                std::vector<webhooks::Delivery>& batch,
                                const DiagnosticSink& sink) {
    received.inc();
    const ClockReading now = read_clocks();  // the intake moment: event time and due time
    auto decoded =
        bus::decode_message(frames, static_cast<size_t>(cfg.bus.max_message_bytes), now.wall_ms);
    if (!decoded) {
      rejected.inc();
      const auto& rej = decoded.error();
      if (reject_log.allow())
        spdlog::warn("bus: rejected message{}: {}",
                     rej.event_type.empty() ? "" : " of type '" + rej.event_type + "'", rej.reason);
      if (rej.sequence) count_sequence_gap(rej.stream, *rej.sequence, "?");
      sink(DiagnosticEvent{.type = diag::kEventRejected,
                           .event_id = rej.event_id,
                           .event_type = rej.event_type,
                           .reason = rej.reason});
      return std::nullopt;
    }
    Event& ev = decoded.value();
    count_sequence_gap(ev);
    auto outcome = ch.run(ev, sink);
    if (outcome.vetoed) return 0;
    size_t n = rt.route(ev, now.schedule_ms, batch);
    routed.inc(n);
    if (n == 0) unrouted.inc();
    if (observers_on)
      ch.dispatch_observers(std::make_shared<const Event>(std::move(ev)), *observers);
    return n;
  }

  // Before the chain runs: a hook may rewrite or remove the attributes. Only when this gateway
  // subscribes to every topic: with a topic filter, the numbers it skips were filtered out on
  // purpose (a publisher's XPUB never sends them), not lost.
  void count_sequence_gap(const Event& ev) {
    if (auto stamp = bus::stream_stamp(ev))
      count_sequence_gap(stamp->stream, stamp->sequence, ev.source());
  }

  // `source` is "?" for a rejected message (its envelope is not trusted).
  void count_sequence_gap(std::string_view stream, uint64_t seq, std::string_view source) {
    if (!subscribes_to_everything) return;
    const uint64_t lost = sequence_gaps.observe(stream, seq);
    if (lost == 0) return;
    dropped.inc(lost);
    if (gap_log.allow())
      spdlog::warn(
          "bus: {} message(s) from publisher stream {} (source '{}') never arrived: "
          "hookgateseq jumped to {}",
          lost, stream, printable_prefix(source, 200), seq);
  }

  // Processes `frames` and whatever else is queued (up to kMaxBatch messages) as one batch:
  // one spool transaction for all their deliveries and diagnostics.
  void ingest_batch(std::vector<zmq::message_t>& frames, std::vector<webhooks::Delivery>& batch) {
    std::shared_ptr<const hooks::HookChain> ch;
    std::shared_ptr<const Router> rt;
    // Read before the snapshot: a swap in between makes it look stale, never current.
    const uint64_t routing_generation = router_generation.load(std::memory_order_acquire);
    std::tie(ch, rt) = snapshot();  // not a structured binding: lambdas below capture rt
    // From the same snapshot as the chain: a flag read apart could belong to the next chain.
    const bool observers_on = ch->has_observers();
    DiagnosticSink sink = [&](DiagnosticEvent d) { route_diagnostic(rt.get(), d, batch); };
    size_t messages = 0;
    size_t events = 0;  // messages that decoded into events (vetoed ones included)
    size_t routed_events = 0;
    const int64_t batch_end_ns = now_steady_ns() + kMaxBatchNs;
    size_t bytes = 0;
    size_t counted = 0;  // deliveries of `batch` already in `bytes`
    do {
      if (auto deliveries = process(frames, *ch, *rt, observers_on, batch, sink)) {
        ++events;
        if (*deliveries > 0) ++routed_events;
      }
      ++messages;
      for (; counted < batch.size(); ++counted)
        if (batch[counted].body) bytes += batch[counted].body->size();
    } while (messages < kMaxBatch && bytes < kMaxBatchBytes && now_steady_ns() < batch_end_ns &&
             sub->try_receive(frames));

    // The streams' marks go with what these messages made (docs/spool.md "Stream marks").
    StreamMarks marks =
        subscribes_to_everything ? sequence_gaps.take_changed(now_unix_ms()) : StreamMarks{};
    if (batch.empty()) {
      store->write_stream_marks(std::move(marks));
      accepted.inc(events);
      return;
    }
    const size_t count = batch.size();
    adds.push_back({store->add_async_with_marks(std::move(batch), std::move(marks)), events, count,
                    bytes, routed_events, routing_generation});
    open_deliveries += count;
    open_bytes += bytes;
    batch.clear();
    settle_adds(false);
  }

  // Counts answered adds, oldest first; waits for the oldest while too many deliveries are open,
  // or for all of them when `all`.
  void settle_adds(bool all) {
    while (!adds.empty()) {
      AddInFlight& add = adds.front();
      const bool wait = all || open_deliveries > kMaxOpenDeliveries || open_bytes > kMaxOpenBytes;
      if (!wait && add.accepted.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return;
      // A disk wait can hold this for minutes: a burst's last count is still said each second
      // (this thread is the one that says them).
      while (add.accepted.valid() &&
             add.accepted.wait_for(std::chrono::seconds(1)) == std::future_status::timeout)
        LogLimiter::report_suppressed();
      Status st;
      try {
        st = add.accepted.get();
      } catch (const std::future_error& e) {  // a store that dropped the batch unanswered: a bug
        st = make_error(std::string("no answer from the spool: ") + e.what());
      }
      if (!st) {
        // Only the events with a delivery in the batch are lost; vetoed and unrouted ones were
        // handled in full.
        refused.inc(add.routed_events);
        accepted.inc(add.events - add.routed_events);
        if (refused_log.allow())
          spdlog::error("spool refused {} deliveries of {} events: {}", add.deliveries,
                        add.routed_events, st.error().message);
      } else {
        accepted.inc(add.events);
      }
      open_deliveries -= add.deliveries;
      open_bytes -= add.bytes;
      adds.pop_front();
    }
  }

  int64_t last_log_report_ns = 0;  // ingest thread only
  // A reload waiting for a vanished hook directory (waits_for_vanished_hook_directory): since
  // when, and when to try again. Ingest thread only.
  std::optional<std::chrono::steady_clock::time_point> reload_waits_since;
  std::chrono::steady_clock::time_point reload_retry_at;

  void ingest_loop() {
    std::vector<zmq::message_t> frames;
    std::vector<webhooks::Delivery> batch;
    batch.reserve(kMaxBatch);
    running = true;
    while (!stop.load(std::memory_order_relaxed)) {
      if (reload_config.exchange(false) ||
          (reload_waits_since && std::chrono::steady_clock::now() >= reload_retry_at))
        do_reload_config();
      if (reload_hooks.exchange(false)) request_chain_load(cfg.hooks);
      report_backlogs_after_reload();
      report_backlogs_after_external_change();
      spool_depth.set(static_cast<int64_t>(store->pending_count()));
      if (bus_links_gauge) bus_links_gauge->set(bus_links->load());
      if (const int64_t now = now_steady_ns(); now - last_log_report_ns >= 1'000'000'000) {
        last_log_report_ns = now;
        LogLimiter::report_suppressed();  // a burst's last count, without waiting for its next line
      }
      // A full spool (spool.max_bytes), or one whose files are gone: what is not taken stays with
      // the bus (our queue, then the publishers'), where it waits as on a full disk.
      if (store->full() || store->file_missing()) {
        settle_adds(false);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      // While adds are open, look at them every millisecond even if the bus is quiet, so the
      // accepted/refused counters follow the commits closely.
      const auto wait =
          adds.empty() ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1);
      if (sub->receive(frames, wait)) {
        ingest_batch(frames, batch);
      } else {
        settle_adds(false);
      }
    }
    running = false;
    drain_on_stop(frames, batch);
    sub->stop_keeper();
    settle_adds(true);
  }

  // Messages ZeroMQ already queued inside this process were sent to us; dropping them at
  // shutdown would lose events a publisher rightly thinks were delivered. Spool what arrives
  // until the socket stays quiet for kQuiet, at most kDrainMax so a publisher that never pauses
  // cannot hold the exit. (Unsubscribing first would not help: a SUB socket filters its own
  // queue by its subscriptions, so it would discard exactly these messages.)
  void drain_on_stop(std::vector<zmq::message_t>& frames, std::vector<webhooks::Delivery>& batch) {
    // Not into a spool that cannot write: it would refuse them all, and every message taken
    // from the bus now is one the publishers no longer hold for the next start (found in an
    // exploratory run: 4,797 taken in and refused at a stop on a full disk). What ZeroMQ
    // already queued in this process is lost with the socket either way.
    // Nor into a file spool.path no longer names: the stop loses what goes into it, while the
    // publishers would keep it for the next start (found in review).
    if (store->database_missing()) {
      spdlog::error(
          "shutting down: the spool file is missing, so the bus messages queued in this process "
          "(up to bus.receive_hwm) are not taken in and are lost with the socket; publishers "
          "keep what they have not sent for the next start");
      return;
    }
    if (store->failing_to_write()) {  // set with (and before) !writable()
      spdlog::error(
          "shutting down: the spool cannot write, so the bus messages queued in this process "
          "(up to bus.receive_hwm) are not taken in and are lost with the socket; publishers "
          "keep what they have not sent for the next start");
      return;
    }
    // The drain's time includes the chain's: hooks of 50 ms an event took in 40 of 200 queued
    // messages in a fixed 2 s (found in a hook author's test), so it gets the grace, 2 s at
    // least. Past twice receive_hwm messages (the socket held at most that many at the stop, and
    // TCP's buffers some more) a publisher is still sending: what it sends now is its to resend.
    constexpr auto kQuiet = std::chrono::milliseconds(100);
    const int64_t drain_max_ns =
        std::max<int64_t>(2'000, cfg.spool.shutdown_grace_ms) * int64_t{1'000'000};
    const int64_t started = now_steady_ns();
    const uint64_t before = received.value();
    bool quiet = false;
    while (now_steady_ns() - started < drain_max_ns &&
           received.value() - before < 2 * static_cast<uint64_t>(cfg.bus.receive_hwm)) {
      if (sub->receive(frames, kQuiet)) {
        ingest_batch(frames, batch);
      } else if (!sub->stopped_at_denials()) {
        quiet = true;
        break;
      }
    }
    const uint64_t drained = received.value() - before;
    if (!quiet)
      spdlog::error(
          "shutting down: took in {} queued bus messages in {} ms and the socket was still not "
          "quiet (a slow hook chain, or a publisher that keeps sending): what it still holds is "
          "lost with it; spool.shutdown_grace_ms ({} ms, 2 s at least) bounds this drain",
          drained, (now_steady_ns() - started) / 1'000'000, cfg.spool.shutdown_grace_ms);
    else if (drained > 0)
      spdlog::info("shutting down: {} queued bus messages taken in before closing the socket",
                   drained);
  }

  // /readyz and /status "ready": taking events, not stopping, and the spool can write and is not
  // full (while it cannot or is, intake waits: a load balancer should send publishers
  // elsewhere). A gateway that only connects takes no events until a peer is connected.
  bool ready() const {
    return running.load() && !stop.load() &&
           (!store || (store->writable() && !store->full() && !store->file_missing())) &&
           (!bus_links || bus_links->load() > 0);
  }

  std::string status_json() const {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    auto [ch, rt] = snapshot();
    w.StartObject();
    w.Key("version");
    w.String(HOOKGATE_VERSION);
    w.Key("pid");  // which process answers: two gateways on one host are told apart
    w.Int64(static_cast<int64_t>(::getpid()));
    w.Key("ready");
    w.Bool(ready());
    // "bus" is the endpoint bound (null while none is: a gateway that only connects, or one still
    // starting); "bus_connect" is the peers it dials, as configured.
    const bool bus_is_open = bus_open.load(std::memory_order_acquire);
    w.Key("bus");
    if (bus_is_open && !bus_endpoint.empty())
      w.String(bus_endpoint.c_str());
    else
      w.Null();
    w.Key("bus_connect");
    w.StartArray();
    for (const auto& peer : cfg.bus.connect) w.String(peer.c_str());
    w.EndArray();
    w.Key("bus_connections");  // live bus.connect peers; null for a gateway that binds
    if (bus_is_open && bus_links)
      w.Int(bus_links->load());
    else
      w.Null();
    w.Key("spool");
    w.StartObject();
    w.Key("mode");
    w.String(cfg.spool.mode == config::SpoolConfig::Mode::Memory ? "memory" : "sqlite");
    w.Key("path");
    w.String(cfg.spool.mode == config::SpoolConfig::Mode::Memory ? "" : cfg.spool.path.c_str());
    w.Key("depth");
    w.Uint64(store ? store->pending_count() : 0);
    w.Key("writable");
    w.Bool(!store || store->writable());
    w.Key("full");  // spool.max_bytes reached: intake waits
    w.Bool(store && store->full());
    w.Key("file_missing");  // spool.path no longer names the open file
    w.Bool(store && store->file_missing());
    w.EndObject();
    w.Key("hooks");
    w.StartArray();
    int order = 0;
    // No chain yet while the first load runs (the listener opens before it): no hooks to show.
    static const std::vector<hooks::HookEntry> kNoHooks;
    for (const auto& e : ch ? ch->entries() : kNoHooks) {
      w.StartObject();
      w.Key("order");
      w.Int(++order);
      w.Key("file");
      w.String(display_text(e.file.path).c_str());
      w.Key("directory");
      w.String(display_text(e.file.directory).c_str());
      if (e.hook) {
        const auto& s = e.hook->spec();
        w.Key("name");
        w.String(s.name.c_str());
        w.Key("kind");
        w.String(hooks::to_string(s.kind));
        w.Key("form");
        w.String(hooks::to_string(s.form));
        w.Key("events");
        w.StartArray();
        for (const auto& p : s.events) w.String(p.c_str());
        w.EndArray();
        std::string snap = e.hook->snapshot();
        w.Key("snapshot");
        w.RawValue(snap.c_str(), snap.size(), rapidjson::kObjectType);
        if (!e.error.empty()) {  // its file does not load: the version from before runs on
          w.Key("error");
          w.String(display_text(e.error).c_str());
        }
      } else {
        w.Key("name");
        w.String(display_text(e.file.name).c_str());
        w.Key("error");
        w.String(display_text(e.error).c_str());
      }
      w.EndObject();
    }
    w.EndArray();
    w.Key("webhooks");
    w.StartArray();
    for (const auto& s : dispatcher->status()) {
      w.StartObject();
      w.Key("name");
      w.String(s.name.c_str());
      w.Key("healthy");
      w.Bool(s.healthy());
      w.Key("paused");
      w.Bool(s.paused);
      if (s.paused) {
        w.Key("pause_reason");
        w.String(s.pause_reason.c_str());
      }
      w.Key("delivered");
      w.Uint64(s.delivered);
      w.Key("failed_attempts");
      w.Uint64(s.failed_attempts);
      w.Key("dead");
      w.Uint64(s.dead);
      w.Key("in_flight");
      w.Int(s.in_flight);
      w.Key("pending");
      w.Uint64(s.pending);
      w.Key("last_success_ms");
      w.Int64(s.last_success_ms);
      w.Key("last_error");
      w.String(redact_secrets(s.last_error).c_str());
      w.Key("last_error_ms");
      w.Int64(s.last_error_ms);
      if (s.held_until_ms > now_unix_ms()) {
        w.Key("held_until_ms");
        w.Int64(s.held_until_ms);
      }
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    return {buf.GetString(), buf.GetSize()};
  }
};

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Gateway>> Gateway::create(config::Config cfg) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(cfg);
  Impl& g = *impl;
  // Before the spool opens: a key file that cannot be read fails the start at its setting, as
  // `hookgate check` reports it, instead of as a socket error after the spool's recovery.
  if (auto keys = bus::check_curve_files(g.cfg.bus.curve); !keys)
    return make_error(keys.error().str());

  if (g.cfg.spool.mode == config::SpoolConfig::Mode::Memory) {
    // No retained history: `hookgate deliveries` cannot reach a memory store (it lives in this
    // process), so delivered and dead deliveries would only hold their bodies in memory.
    g.store = std::make_unique<webhooks::MemoryDeliveryStore>(
        0, 0, static_cast<size_t>(g.cfg.spool.memory_max_pending));
    spdlog::warn(
        "spool: memory mode: deliveries are lost if the gateway stops before they are sent");
  } else {
    auto spool = webhooks::SqliteSpool::open(g.cfg.spool);
    if (!spool) return make_error("spool " + g.cfg.spool.path + ": " + spool.error().message);
    schedule_clock().not_before(spool.value()->latest_recorded_ms());
    g.store = std::move(spool.value());
    size_t pending = g.store->pending_count();
    spdlog::info("spool: {} (synchronous={}), {} pending deliveries to resume", g.cfg.spool.path,
                 g.cfg.spool.synchronous, pending);
  }
  Impl* raw = &g;
  g.dispatcher = std::make_unique<webhooks::Dispatcher>(
      *g.store, [raw](DiagnosticEvent d) { raw->emit_async(std::move(d)); });
  g.observers = std::make_unique<hooks::ObserverPool>(
      g.cfg.hooks.observer_threads, g.cfg.hooks.observer_queue,
      [raw](DiagnosticEvent d) { raw->emit_async(std::move(d)); });
  g.router = std::make_shared<const Router>(g.cfg.webhooks);
  g.dispatcher->set_webhooks(g.cfg.webhooks);
  g.report_unconfigured_backlogs(*g.router, g.store->pending_by_webhook());
  // The admin listener before the hooks load and before the bus. Before the hooks: program hooks'
  // handshakes can take seconds, and meanwhile /healthz answers 200 and /readyz 503, where a
  // listener not yet open would fail a liveness probe (found in an SRE pass: 4 s of refused
  // connections behind a slow hook). Before the bus: a start that fails on its port (an old
  // instance still draining; with the durable spool its lock refuses that start earlier, a
  // memory-spool one gets this far) must not have subscribed first, taking events from
  // publishers and exiting.
  if (g.cfg.admin.enabled) {
    AdminHandlers handlers{
        .ready = [raw] { return raw->ready(); },
        .metrics = [] { return metrics::Registry::global().render_prometheus(); },
        .status_json = [raw] { return raw->status_json(); },
    };
    auto admin = AdminServer::start(g.cfg.admin.listen, g.cfg.admin.token, std::move(handlers));
    if (!admin) return admin.error();
    g.admin = std::move(admin.value());
  }
  // The watcher first: a hook changed while the chain loads (program hooks' handshakes can take
  // seconds) then reloads it once the ingest loop runs.
  g.start_watcher();
  log_missing_hook_directories(g.cfg.hooks);
  g.load_chain(g.cfg.hooks, false);  // before the bus opens: the first event sees the hooks

  const auto& topics = g.cfg.bus.topics;
  g.subscribes_to_everything =
      topics.empty() || std::find(topics.begin(), topics.end(), "") != topics.end();
  if (!g.subscribes_to_everything)
    spdlog::info(
        "bus: topics filter the bus, so gaps in publishers' sequence numbers are not "
        "counted as dropped messages");
  // Numbers published while the gateway was down and never received count as dropped: the
  // streams go on from where the last run left them (the durable spool keeps them).
  if (auto marks = g.store->take_stream_marks(); !marks.empty() && g.subscribes_to_everything) {
    g.sequence_gaps.restore(marks);
    // Back into the file at once: the open took them out, and a crash before these streams'
    // next messages must not lose them.
    g.store->write_stream_marks(g.sequence_gaps.take_changed(now_unix_ms()));
    spdlog::info(
        "bus: {} publisher streams go on from the last stop: numbers they sent meanwhile that "
        "never arrive count as dropped",
        g.sequence_gaps.streams());
  }
  auto sub = bus::Subscriber::open(g.ctx, g.cfg.bus);
  if (!sub) return sub.error();
  g.sub = std::move(sub.value());
  g.bus_endpoint = g.sub->bound_endpoint();
  g.bus_links = g.sub->live_connections();
  if (g.bus_links)
    g.bus_links_gauge = &metrics::gauge(
        "hookgate_bus_connections",
        "bus.connect peers with a live connection (a gateway that binds has no such gauge)");
  const std::string& bound = g.bus_endpoint;
  if (!g.cfg.bus.curve.enabled && bound.rfind("tcp://", 0) == 0 &&
      bound.rfind("tcp://127.", 0) != 0 && bound.rfind("tcp://[::1]:", 0) != 0)
    spdlog::warn(
        "bus: {} takes publishers from the network without CURVE: any peer may publish, and one "
        "that sends a message of endless frames makes ZeroMQ buffer it all in memory; enable "
        "bus.curve (docs/operations.md)",
        bound);
  g.bus_open.store(true, std::memory_order_release);
  g.dispatcher->start();
  g.loader = std::thread([raw] { raw->loader_loop(); });
  spdlog::info("hookgate {} listening on {}{}{}", HOOKGATE_VERSION,
               g.bus_endpoint.empty()
                   ? "(no bind; connecting to " + join(g.cfg.bus.connect, ", ") + ")"
                   : g.bus_endpoint,
               g.admin ? ", admin on port " + std::to_string(g.admin->port()) : std::string(),
               ", " + std::to_string(g.cfg.webhooks.size()) + " webhooks");
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

Gateway::~Gateway() {
  if (!impl_) return;
  impl_->stop_components();
  impl_->admin.reset();
  impl_->dispatcher.reset();
  impl_->store.reset();
}

void Gateway::run() {
  impl_->ingest_loop();
  // After the last message the ingest thread took in: what comes later is lost with the socket.
  // A gateway that filters topics counts no gaps, and keeps no marks (its own would be stale).
  impl_->store->keep_stream_marks(
      impl_->subscribes_to_everything ? impl_->sequence_gaps.marks(now_unix_ms()) : StreamMarks{});
  spdlog::info("shutting down: intake stopped, waiting up to {} ms for {}",
               impl_->cfg.spool.shutdown_grace_ms,
               impl_->store->keeps_pending_across_restarts() ? "in-flight deliveries"
                                                             : "the memory queue to drain");
  impl_->stop_components();
  // After the outcomes still queued are written: counted before, they were pending too (found
  // in an exploratory run: "5514 remain spooled", and the restart resumed 5418).
  impl_->store->close();
  const size_t left = impl_->store->pending_count();
  LogLimiter::report_suppressed(/*final=*/true);  // this second's counts: no later call comes
  // One line with the total: the refusals' own lines are rate-limited (found in an exploratory
  // run: a stop on a full disk refused 7,000 events over 40 lines and "N more not logged").
  if (const uint64_t lost = impl_->refused.value(); lost > 0)
    spdlog::error(
        "stopped; {} events taken from the bus since the start were refused by the spool and "
        "are lost (hookgate_events_refused_total; the lines above say why)",
        lost);
  if (impl_->store->database_missing() && left > 0)
    spdlog::error(
        "stopped; {} deliveries were left in a spool file that spool.path no longer names "
        "(deleted or replaced while running): they are lost",
        left);
  else if (impl_->store->keeps_pending_across_restarts())
    spdlog::info("stopped; {} deliveries remain spooled", left);
  else if (left > 0)
    spdlog::warn(
        "stopped; {} deliveries not delivered within the grace are dropped (spool.mode: "
        "memory)",
        left);
  else
    // Not "sent": some may have been dead-lettered (found in a receivers pass).
    spdlog::info(
        "stopped; no delivery was left pending (spool.mode: memory, whose dead letters go with "
        "the process)");
}

void Gateway::request_stop() {
  impl_->stop = true;
  if (impl_->store) impl_->store->begin_stop();
}
void Gateway::request_reload() {
  impl_->reload_config = true;
}
std::string Gateway::bus_endpoint() const {
  return impl_->bus_endpoint;
}
int Gateway::admin_port() const {
  return impl_->admin ? impl_->admin->port() : 0;
}
std::string Gateway::status_json() const {
  return impl_->status_json();
}

}  // namespace hookgate
