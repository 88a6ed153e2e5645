#include "webhooks/dispatcher.hpp"

#include <curl/curl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "gateway/common/clock.hpp"
#include "gateway/common/log.hpp"
#include "gateway/common/metrics.hpp"
#include "gateway/common/text.hpp"
#include "gateway/common/thread_name.hpp"
#include "webhooks/plain_http.hpp"
#include "webhooks/retry_policy.hpp"
#include "webhooks/settings_check.hpp"
#include "webhooks/signing.hpp"
#include "webhooks/ssrf_guard.hpp"

namespace hookgate::webhooks {
namespace {

// The longest the loop sleeps with nothing to do; bounds how late a stop or a clock jump is seen.
constexpr int kMaxPollMs = 1000;
// Deliveries made claimable behind our back (another process replaying into the durable spool)
// raise no on_ready here; a periodic rescan picks them up.
constexpr int64_t kRescanIntervalMs = 5000;
// How often each webhook's pending count is read from the store for /metrics and /status.
constexpr int64_t kPendingRefreshMs = 1000;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

std::vector<std::string> changed_delivery_settings(const config::WebhookConfig& a,
                                                   const config::WebhookConfig& b) {
  std::vector<std::string> changed;
  const auto differs = [&](bool same, const char* key) {
    if (!same) changed.emplace_back(key);
  };
  differs(a.url == b.url, "url");
  differs(a.secrets == b.secrets, "secrets");
  differs(a.timeout_ms == b.timeout_ms, "timeout_ms");
  differs(a.headers == b.headers, "headers");
  differs(a.retry.max_attempts == b.retry.max_attempts &&
              a.retry.initial_backoff_ms == b.retry.initial_backoff_ms &&
              a.retry.max_backoff_ms == b.retry.max_backoff_ms &&
              a.retry.max_retry_after_ms == b.retry.max_retry_after_ms,
          "retry");
  differs(a.max_in_flight == b.max_in_flight, "max_in_flight");
  differs(a.rate_limit_per_s == b.rate_limit_per_s, "rate_limit_per_s");
  differs(a.body == b.body, "body");
  differs(a.sign_github == b.sign_github, "signatures");
  differs(a.allow_cidrs == b.allow_cidrs, "allow_cidrs");
  differs(a.deny_cidrs == b.deny_cidrs, "deny_cidrs");
  differs(a.http_client == b.http_client, "http_client");
  differs(a.tls == b.tls, "tls");
  return changed;
}

bool same_delivery_settings(const config::WebhookConfig& a, const config::WebhookConfig& b) {
  return changed_delivery_settings(a, b).empty();
}

namespace {

// The built-in client serves plain http:// unless told not to. (A custom framing header, which
// it could not honour, pauses the webhook: check_custom_header refuses it.)
std::shared_ptr<const PlainHttpClient::Target> plain_http_target(
    const config::WebhookConfig& webhook) {
  if (webhook.http_client != config::WebhookConfig::HttpClient::Auto) return nullptr;
  auto target = PlainHttpClient::target_for(webhook.url);
  if (!target) return nullptr;
  return std::make_shared<const PlainHttpClient::Target>(std::move(*target));
}

// Everything about a webhook that would make every attempt fail the same way: all of it, so a
// paused webhook's reason lists what to fix at once.
Status validate_settings(const config::WebhookConfig& webhook) {
  // A literal address the SSRF policy refuses is refused per attempt, as one a name resolves
  // to would be.
  auto problems = webhook_settings_problems(webhook, LiteralAddresses::RefusedPerAttempt);
  if (problems.empty()) return {};
  std::string reason;
  for (const auto& problem : problems) reason += (reason.empty() ? "" : "; ") + problem.message;
  return make_error(std::move(reason));
}

// The labels of hookgate_delivery_attempts_total's `result`, each registered at 0 for every
// webhook; attempt_result() gives an index into them (no string built per attempt).
constexpr const char* kAttemptResults[] = {"2xx",           "3xx", "4xx",     "5xx",  "timeout",
                                           "connect_error", "tls", "refused", "error"};
enum AttemptResultIndex : size_t { k2xx = 0, kTimeout = 4, kConnectError, kTls, kRefused, kError };

size_t attempt_result(const AttemptResult& result) {
  if (!result.final_error.empty()) return kRefused;
  switch (result.curl_code) {
    case CURLE_OK:
      break;
    case CURLE_OPERATION_TIMEDOUT:
      return kTimeout;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      return kConnectError;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      return kTls;
    default:
      return kError;
  }
  if (result.http_status >= 200 && result.http_status < 600)
    return k2xx + static_cast<size_t>(result.http_status / 100 - 2);
  return kError;
}

// Requests per second with a one-second burst.
class TokenBucket {
 public:
  void configure(double rate_per_s) {
    rate_ = rate_per_s;
    capacity_ = std::max(1.0, rate_per_s);
    tokens_ = std::min(tokens_, capacity_);
  }
  bool limited() const { return rate_ > 0; }
  size_t available(int64_t now_ns) {
    refill(now_ns);
    return static_cast<size_t>(tokens_);
  }
  void take() { tokens_ -= 1; }
  int64_t ms_until_token(int64_t now_ns) {
    refill(now_ns);
    if (tokens_ >= 1) return 0;
    return static_cast<int64_t>((1 - tokens_) / rate_ * 1000) + 1;
  }

 private:
  void refill(int64_t now_ns) {
    if (last_ns_ != 0) tokens_ = std::min(capacity_, tokens_ + (now_ns - last_ns_) / 1e9 * rate_);
    last_ns_ = now_ns;
  }
  double rate_ = 0;
  double capacity_ = 1;
  double tokens_ = 1e18;  // clamped to capacity by configure()
  int64_t last_ns_ = 0;
};

// curl_multi_wakeup() from any thread, never after the multi handle is gone. Shared with the
// store's on_ready callback, which may still be running when the dispatcher is destroyed.
class Waker {
 public:
  explicit Waker(CURLM* multi) : multi_(multi) {}
  void wake() {
    std::lock_guard lock(mu_);
    if (multi_) curl_multi_wakeup(multi_);
  }
  // The store has new claimable deliveries.
  void mark_store_ready() {
    store_ready_.store(true);
    wake();
  }
  bool take_store_ready() { return store_ready_.exchange(false); }
  bool store_ready() const { return store_ready_.load(); }
  void detach() {
    std::lock_guard lock(mu_);
    multi_ = nullptr;
  }

 private:
  std::mutex mu_;
  CURLM* multi_;
  std::atomic<bool> store_ready_{true};
};

}  // namespace

struct Dispatcher::Impl {
  struct Transfer;

  // A libcurl easy handle configured once with one webhook's constant options (URL, timeout,
  // SSRF open-socket callback, protocols, callbacks, connection cache): an attempt only sets its
  // header list and body, instead of curl_easy_reset plus ~20 setopts. Pooled per webhook and
  // per settings generation, so a handle never carries another configuration's options or
  // another SSRF policy's connection cache. The callbacks' data is the Handle itself.
  struct Handle {
    CURL* easy = nullptr;
    uint64_t generation = 0;       // the Webhook::generation it was configured for
    Transfer* transfer = nullptr;  // the attempt it runs, while it runs one
    char error[CURL_ERROR_SIZE] = {};
    // The attempt's header list, as list nodes over strings owned here: refilled in place, so
    // an attempt allocates no list nodes or strdup'ed lines. libcurl only reads the list.
    std::vector<std::string> lines;
    std::vector<curl_slist> nodes;
    bool resend_options = false;  // FRESH_CONNECT and a shorter TIMEOUT_MS, for one resend

    Handle() = default;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() {
      if (easy != nullptr) curl_easy_cleanup(easy);
    }
  };

  struct Webhook {
    std::string name;
    std::shared_ptr<const config::WebhookConfig> config;
    std::optional<int64_t> failed_notice_ns;  // of the last hookgate.delivery.failed (steady)
    uint64_t failed_notices_left_out = 0;     // failed attempts since, not reported one by one
    std::shared_ptr<const AddressPolicy> policy;
    // Derived from config->secrets when the config changes, not per attempt; null when a secret
    // cannot be decoded (the webhook is then paused).
    std::shared_ptr<const SigningKeys> keys;
    CURLSH* share = nullptr;  // connection cache for a non-default policy; null = the multi's
    // Set when the built-in client sends this webhook's requests (plain http://), in its
    // connection pool `plain_pool`, one per settings generation.
    std::shared_ptr<const PlainHttpClient::Target> plain_target;
    uint64_t plain_pool = 0;
    uint64_t generation = 0;  // bumped when the settings change: pooled handles are stale
    std::vector<std::unique_ptr<Handle>> idle_handles;
    bool removed = false;
    bool paused = false;
    std::string pause_reason;
    // A Retry-After holds the whole webhook, not only the delivery it came with: a receiver that
    // asks for a pause gets one. Schedule clock; 0 = not held.
    int64_t held_until_ms = 0;
    // The last claim filled every slot it asked for, or something new may be due: claim again
    // when a slot is free. Cleared when a claim comes back short.
    bool maybe_ready = true;
    std::optional<int64_t> next_due_ms;  // from the store, when nothing was ready
    int in_flight = 0;
    TokenBucket bucket;
    metrics::Counter* delivered = nullptr;
    metrics::Counter* retried = nullptr;
    metrics::Counter* failed = nullptr;
    metrics::Counter* dead = nullptr;
    metrics::Histogram* duration = nullptr;
    metrics::Gauge* paused_gauge = nullptr;  // 1 while paused, for an alert (update_status sets it)
    metrics::Gauge* pending_gauge = nullptr;  // refresh_pending() sets it
    std::array<metrics::Counter*, std::size(kAttemptResults)> attempt_results{};

    int max_in_flight() const { return std::max(config->max_in_flight, 1); }
  };

  struct Transfer {
    Webhook* webhook = nullptr;  // outlives the transfer: removed webhooks wait for in_flight 0
    std::shared_ptr<const config::WebhookConfig> config;  // as of the attempt's start
    std::shared_ptr<const AddressPolicy> policy;
    Delivery delivery;
    std::unique_ptr<Handle> handle;  // null until the attempt is handed to libcurl
    bool in_multi = false;
    bool plain = false;  // sent by the built-in client, not libcurl
    std::string retry_after;
    bool answered = false;  // a final response's head has arrived (libcurl)
    size_t head_bytes = 0;  // of the response head arriving (libcurl); past the limit: stopped
    uint64_t response_body_bytes = 0;   // read and thrown away (libcurl)
    std::string refused_reason;         // the SSRF refusal of an address libcurl wanted to use
    bool used_allowed_address = false;  // libcurl opened a socket to an address the policy allows
    bool resent = false;  // sent again on a new connection after the keep-alive race (libcurl)
    int64_t started_ns = 0;
  };

  Impl(DeliveryStore& store_in, DiagnosticSink diagnostics_in)
      : store(store_in),
        restored_holds(store_in.take_webhook_holds()),
        drain_on_stop(!store_in.keeps_pending_across_restarts()),
        diagnostics(std::move(diagnostics_in)),
        rng(std::random_device{}()) {
    init_curl_once();
    multi = curl_multi_init();
    // Per-webhook max_in_flight is the isolation; a per-host cap would let one webhook's hung
    // transfers queue another webhook's behind them on a shared host.
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    waker = std::make_shared<Waker>(multi);
    plain.set_max_idle(max_idle_per_client);
  }

  // Sockets for webhooks: the open-file limit less the reserve. Half of them for requests in
  // flight, across all webhooks, and a quarter for each client's idle keep-alive connections
  // (found in a scale pass: 1,000 webhooks under a limit of 1,024 took every descriptor, and the
  // spool then refused events and the admin port hung). Read once: `run` sets the limit first.
  static size_t socket_budget() {
    rlimit limit{};
    const rlim_t open_files = ::getrlimit(RLIMIT_NOFILE, &limit) == 0
                                  ? std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 30)
                                  : 1024;
    return static_cast<size_t>(
        std::max<int64_t>(static_cast<int64_t>(open_files) - kOpenFilesReserve, 64));
  }
  const size_t sockets_for_webhooks = socket_budget();
  const size_t max_total_in_flight = sockets_for_webhooks / 2;
  const size_t max_idle_per_client = sockets_for_webhooks / 4;

  ~Impl() {
    waker->detach();
    // Pooled handles reference the share objects: clean them up before the shares go.
    webhooks.clear();
    curl_multi_cleanup(multi);
    for (auto& [key, share] : shares) curl_share_cleanup(share);
  }

  // ---- cross-thread requests -------------------------------------------------------------

  // Applies directly while no loop runs; otherwise hands the config to the loop and waits until
  // it is applied, so status() reflects it when set_webhooks() returns.
  void post_config(std::vector<config::WebhookConfig> webhooks) {
    std::unique_lock lock(control_mu);
    if (!loop_running) {
      apply_config(std::move(webhooks));
      return;
    }
    pending_config = std::move(webhooks);
    const uint64_t generation = ++config_requested;
    waker->wake();
    if (std::this_thread::get_id() == loop_thread) return;  // from a diagnostics callback
    config_applied_cv.wait(lock, [&] { return config_applied >= generation || !loop_running; });
  }

  // ---- the loop --------------------------------------------------------------------------

  void run() {
    int64_t last_rescan_ms = schedule_now_ms();
    int64_t last_pending_ms = 0;
    for (;;) {
      bool stopping = false;
      int64_t stop_deadline_ns = 0;
      {
        std::lock_guard lock(control_mu);
        if (pending_config) {
          apply_config(std::move(*pending_config));
          pending_config.reset();
          config_applied = config_requested;
          config_applied_cv.notify_all();
        }
        stopping = stop_requested;
        stop_deadline_ns = stop_deadline;
      }
      const int64_t now_ms = schedule_now_ms();
      if (now_ms - last_pending_ms >= kPendingRefreshMs || now_ms < last_pending_ms) {
        last_pending_ms = now_ms;
        refresh_pending();
      }
      // Only the webhooks the store names: a pass that claims from every webhook after each
      // answer kept the thread busy at a thousand webhooks.
      if (waker->take_store_ready()) {
        if (auto ready = store.take_ready_webhooks()) {
          for (const auto& name : *ready)
            if (auto it = webhooks.find(name); it != webhooks.end()) it->second->maybe_ready = true;
        } else {
          for (auto& [name, webhook] : webhooks) webhook->maybe_ready = true;
        }
      }
      if (now_ms - last_rescan_ms >= kRescanIntervalMs) {
        last_rescan_ms = now_ms;
        for (auto& [name, webhook] : webhooks) webhook->maybe_ready = true;
      }
      // Answers first: they free in-flight slots for the starts below, and the pass lets those
      // starts reuse the connections it just saw idle without peeking at them again.
      drain_plain_completions();
      // A store that keeps nothing across a restart (memory mode) is drained within the grace:
      // what is not sent now is gone. A durable store keeps the rest for the next start.
      if (!stopping || drain_on_stop) start_due_transfers(now_ms);

      int running = 0;
      curl_multi_perform(multi, &running);
      drain_completions();
      purge_removed();

      // Draining also waits for what the last answers queued (a dead letter's diagnostic): the
      // store flags it for the next pass.
      if (stopping && (now_steady_ns() >= stop_deadline_ns ||
                       (transfers.empty() && !(drain_on_stop && (waker->store_ready() ||
                                                                 due_before(stop_deadline_ns))))))
        break;

      int timeout_ms = poll_timeout_ms(schedule_now_ms());
      if (stopping) {
        const int64_t until_deadline_ms = (stop_deadline_ns - now_steady_ns()) / 1000000 + 1;
        const int64_t limit = drain_on_stop ? timeout_ms : kMaxPollMs;  // only draining starts more
        timeout_ms = static_cast<int>(std::clamp<int64_t>(until_deadline_ms, 0, limit));
      }
      if (auto deadline = plain.next_deadline_ns()) {
        const int64_t until_ms = (*deadline - now_steady_ns() + 999999) / 1000000;
        timeout_ms = static_cast<int>(std::clamp<int64_t>(until_ms, 0, timeout_ms));
      }
      curl_waitfd plain_fd{plain.fd(), CURL_WAIT_POLLIN, 0};
      curl_multi_poll(multi, &plain_fd, 1, timeout_ms, nullptr);
    }
    abort_transfers();
    std::lock_guard lock(control_mu);
    loop_running = false;
    config_applied_cv.notify_all();
  }

  void apply_config(std::vector<config::WebhookConfig> configs) {
    order.clear();
    std::vector<std::string> names;
    std::map<std::string, bool> seen;
    long total_slots = 0;
    for (auto& cfg : configs) {
      const std::string name = cfg.name;
      if (seen.count(name) > 0) continue;  // the loader rejects duplicates; never run one twice
      seen[name] = true;
      names.push_back(name);
      auto& slot = webhooks[name];
      const bool is_new = slot == nullptr;
      if (is_new) {
        slot = std::make_unique<Webhook>();
        slot->name = name;
        const metrics::Labels labels{{"webhook", name}};
        auto outcome = [&](const char* value) {
          return &metrics::counter("hookgate_deliveries_total",
                                   "Delivery attempts by outcome: delivered, retry, failed "
                                   "(final answer), dead (attempts exhausted)",
                                   {{"webhook", name}, {"outcome", value}});
        };
        slot->delivered = outcome("delivered");
        slot->retried = outcome("retry");
        slot->failed = outcome("failed");
        slot->dead = outcome("dead");
        slot->duration = &metrics::histogram("hookgate_delivery_duration_seconds",
                                             "Webhook delivery attempt round trip", labels);
        slot->paused_gauge = &metrics::gauge(
            "hookgate_webhook_paused",
            "1 while the webhook is paused (a 410 Gone, or settings it cannot be sent with): its "
            "deliveries wait until a reload or restart",
            labels);
        slot->pending_gauge = &metrics::gauge(
            "hookgate_webhook_pending",
            "Deliveries of the webhook not delivered or dead yet, in flight included (read from "
            "a durable spool every 5 s)",
            labels);
        // Shown at 0 from the start, as the series above (found in an exploratory run: they
        // appeared with their first rise, which increase() misses).
        for (size_t i = 0; i < std::size(kAttemptResults); ++i)
          slot->attempt_results[i] = &metrics::counter(
              "hookgate_delivery_attempts_total", "Webhook delivery attempts by result",
              {{"webhook", name}, {"result", kAttemptResults[i]}});
        store.register_webhook_metrics(name);
      }
      Webhook& webhook = *slot;
      order.push_back(&webhook);
      // The loader registers these too; a config built in code must not leak them either.
      for (const auto& secret : cfg.secrets) register_secret(secret);
      const bool changed =
          is_new || webhook.removed || !same_delivery_settings(*webhook.config, cfg);
      webhook.removed = false;
      if (changed) {
        Status valid = validate_settings(cfg);
        auto policy = AddressPolicy::for_webhook(cfg);
        webhook.policy = std::make_shared<const AddressPolicy>(policy ? std::move(policy).value()
                                                                      : AddressPolicy());
        webhook.share = share_for(*webhook.policy);
        ++webhook.generation;
        webhook.idle_handles.clear();
        if (webhook.plain_pool != 0) plain.close_pool(webhook.plain_pool);
        webhook.plain_pool = next_plain_pool++;
        webhook.plain_target = plain_http_target(cfg);
        auto keys = SigningKeys::make(cfg.secrets);
        webhook.keys = keys ? std::move(keys).value() : nullptr;
        webhook.bucket.configure(cfg.rate_limit_per_s);
        webhook.paused = !valid.ok();
        webhook.pause_reason = valid.ok() ? "" : "configuration error: " + valid.error().message;
        if (!valid.ok())
          spdlog::error("webhook {} paused: {}", name, redact_secrets(webhook.pause_reason));
        webhook.maybe_ready = true;
        // A Retry-After was the old settings' receiver asking (the URL may now be another's).
        if (webhook.held_until_ms != 0) store.keep_webhook_hold(name, {});
        if (webhook.held_until_ms > schedule_now_ms())
          spdlog::info(
              "webhook {}: its settings changed (or it was configured again), which ends the "
              "receiver's pause (Retry-After)",
              name);
        webhook.held_until_ms = 0;
        std::lock_guard lock(status_mu);
        if (auto status = statuses.find(name); status != statuses.end())
          status->second.held_until_ms = 0;
      }
      if (is_new) restore_hold(webhook, name, cfg);
      // An unchanged webhook keeps its snapshot, so a transfer can tell whether the settings it
      // ran under are still current (a 410 from a URL since replaced must not pause the new one).
      if (changed) webhook.config = std::make_shared<const config::WebhookConfig>(std::move(cfg));
      // A reload is how an operator says "the receiver is back": a webhook paused by 410 with
      // unchanged settings tries again (one still misconfigured stays paused with its reason).
      if (!changed && webhook.paused) resume_paused(name);
      total_slots += webhook.max_in_flight();
      update_status(webhook, name);
    }
    for (auto& [name, webhook] : webhooks) {
      if (seen.count(name) == 0 && !webhook->removed) {
        webhook->removed = true;
        any_removed = true;
        webhook->paused_gauge->set(0);   // a removed webhook is not waiting for anyone
        webhook->pending_gauge->set(0);  // nor counted: a re-add starts at 0, not the old count
        // Its status stays, out of status_order: added back, its counts go on, as its
        // /metrics series do (Registry::hide_label).
      }
    }
    {
      std::lock_guard lock(status_mu);
      status_order = std::move(names);
    }
    // Enough cached connections for every slot to keep its connection alive between attempts.
    // libcurl counts busy connections in this cap too: the requests in flight plus the idle ones.
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS,
                      std::clamp<long>(total_slots, 8,
                                       static_cast<long>(std::min<size_t>(
                                           4096, max_total_in_flight + max_idle_per_client))));
  }

  // Connections opened under one SSRF policy must never be reused under a laxer one, so each
  // non-default policy gets its own connection cache (a share object) inside the one multi.
  CURLSH* share_for(const AddressPolicy& policy) {
    if (policy.is_default()) return nullptr;
    auto& share = shares[policy.key()];
    if (share == nullptr) {
      share = curl_share_init();
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    }
    return share;
  }

  void resume_paused(const std::string& name) {
    auto it = webhooks.find(name);
    if (it == webhooks.end() || it->second->removed) return;
    auto& webhook = *it->second;
    if (!webhook.paused) return;
    Status valid = validate_settings(*webhook.config);
    if (!valid.ok()) return;  // still unusable: stays paused with its reason
    webhook.paused = false;
    webhook.pause_reason.clear();
    webhook.maybe_ready = true;
    spdlog::info("webhook {} resumed", name);
    update_status(webhook, name);
  }

  void start_due_transfers(int64_t now_ms) {
    // When the socket budget binds, the next pass begins after the last webhook that got a
    // socket, so webhooks take turns: the first in the config must not take every socket.
    const size_t count = order.size();
    if (count == 0) return;
    first_to_start %= count;  // a reload may have shortened the list
    size_t after_last_started = first_to_start;
    bool bound = false;
    for (size_t i = 0; i < count; ++i) {
      const size_t index = (first_to_start + i) % count;
      Webhook& webhook = *order[index];
      const std::string& name = webhook.name;
      if (webhook.removed || webhook.paused || webhook.held_until_ms > now_ms) continue;
      if (!webhook.maybe_ready) {
        if (!webhook.next_due_ms || *webhook.next_due_ms > now_ms) continue;
        webhook.maybe_ready = true;
      }
      const int free_slots = webhook.max_in_flight() - webhook.in_flight;
      if (free_slots <= 0) continue;
      if (total_in_flight >= max_total_in_flight) {
        bound = true;
        if (!budget_bound) budget_waits->inc();
        if (const int64_t now_ns = now_steady_ns(); now_ns - budget_said_ns >= 60'000'000'000) {
          budget_said_ns = now_ns;
          spdlog::warn(
              "webhooks: {} requests are in flight across all webhooks, the most this process's "
              "open-file limit leaves for them: due deliveries wait for a socket (raise the limit, "
              "LimitNOFILE= or ulimit -n, or lower max_in_flight; "
              "hookgate_webhook_socket_budget_waits_total)",
              total_in_flight);
        }
        break;  // a completion wakes the loop
      }
      size_t limit =
          std::min(static_cast<size_t>(free_slots), max_total_in_flight - total_in_flight);
      if (webhook.bucket.limited())
        limit = std::min(limit, webhook.bucket.available(now_steady_ns()));
      if (limit == 0) continue;

      std::vector<Delivery> batch = store.claim_due(name, now_ms, limit);
      if (batch.size() < limit) {
        webhook.maybe_ready = false;
        webhook.next_due_ms = store.next_due(name);
        // The store says something is due yet handed nothing out: look again shortly rather
        // than spin.
        if (webhook.next_due_ms && *webhook.next_due_ms <= now_ms)
          webhook.next_due_ms = now_ms + 50;
      }
      if (!batch.empty()) after_last_started = (index + 1) % count;
      for (auto& delivery : batch) {
        if (webhook.bucket.limited()) webhook.bucket.take();
        start_transfer(webhook, std::move(delivery));
      }
    }
    if (bound) first_to_start = after_last_started;
    budget_bound = bound;
  }

  // Whether some webhook may have a delivery to start before the steady-clock `deadline_ns`.
  bool due_before(int64_t deadline_ns) {
    const int64_t now_ns = now_steady_ns();
    const int64_t deadline_ms = schedule_now_ms() + (deadline_ns - now_ns) / 1000000;
    for (Webhook* entry : order) {
      Webhook& webhook = *entry;
      if (webhook.removed || webhook.paused || webhook.held_until_ms > deadline_ms) continue;
      if (webhook.bucket.limited()) {
        // It may sit maybe_ready without claiming while it waits for a token: ask the store,
        // and count it only if a token comes in time.
        const auto next = store.next_due(webhook.name);
        if (next && *next <= deadline_ms &&
            now_ns + webhook.bucket.ms_until_token(now_ns) * 1000000 <= deadline_ns)
          return true;
        continue;
      }
      if (webhook.maybe_ready || (webhook.next_due_ms && *webhook.next_due_ms <= deadline_ms))
        return true;
    }
    return false;
  }

  int poll_timeout_ms(int64_t now_ms) {
    int64_t timeout = kMaxPollMs;
    for (Webhook* entry : order) {
      Webhook& webhook = *entry;
      if (webhook.removed || webhook.paused) continue;
      if (webhook.in_flight >= webhook.max_in_flight()) continue;  // a completion wakes us
      if (total_in_flight >= max_total_in_flight) continue;        // so it does here
      if (webhook.held_until_ms > now_ms) {
        timeout = std::min(timeout, webhook.held_until_ms - now_ms);
        continue;
      }
      if (webhook.maybe_ready) {
        timeout = std::min(timeout, webhook.bucket.limited()
                                        ? webhook.bucket.ms_until_token(now_steady_ns())
                                        : int64_t{0});
      } else if (webhook.next_due_ms) {
        timeout = std::min(timeout, std::max<int64_t>(*webhook.next_due_ms - now_ms, 0));
      }
    }
    return static_cast<int>(timeout);
  }

  // ---- one attempt -----------------------------------------------------------------------

  static curl_socket_t open_socket(void* clientp, curlsocktype purpose, curl_sockaddr* address) {
    auto* transfer = static_cast<Handle*>(clientp)->transfer;
    if (purpose == CURLSOCKTYPE_IPCXN) {
      Status allowed = transfer->policy->check(&address->addr);
      if (!allowed.ok()) {
        if (transfer->refused_reason.empty()) transfer->refused_reason = allowed.error().message;
        return CURL_SOCKET_BAD;
      }
      transfer->used_allowed_address = true;
    }
    return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
  }

  static size_t on_header(char* data, size_t size, size_t count, void* userp) {
    auto* transfer = static_cast<Handle*>(userp)->transfer;
    const size_t length = size * count;
    std::string_view line(data, length);
    constexpr std::string_view kRetryAfter = "retry-after:";
    const bool status_line = line.substr(0, 5) == "HTTP/";
    if (status_line) {
      transfer->retry_after.clear();  // a new response (after 100 Continue, say)
      transfer->answered = false;
      transfer->head_bytes = 0;
    }
    // Not trailers, which libcurl also hands here after the final head's body: they neither
    // count nor hold the webhook with a Retry-After (found in a receivers pass: a 503's chunked
    // trailer `Retry-After: 3600` held it an hour; the built-in client ignores trailers).
    if (!transfer->answered) transfer->head_bytes += length;
    if (transfer->head_bytes > kMaxResponseHeadBytes)
      return 0;  // libcurl stops the transfer (CURLE_WRITE_ERROR)
    // (The status line's status comes from CURLINFO_RESPONSE_CODE.)
    if (status_line) return length;
    if (line == "\r\n" || line == "\n") {  // the end of a head: final unless 1xx
      long status = 0;
      curl_easy_getinfo(static_cast<Handle*>(userp)->easy, CURLINFO_RESPONSE_CODE, &status);
      transfer->answered = status >= 200;
    } else if (!transfer->answered && line.size() > kRetryAfter.size() &&
               std::equal(kRetryAfter.begin(), kRetryAfter.end(), line.begin(), [](char a, char b) {
                 return a == std::tolower(static_cast<unsigned char>(b));
               })) {
      line.remove_prefix(kRetryAfter.size());
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
        line.remove_prefix(1);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.remove_suffix(1);
      transfer->retry_after = std::string(line);
    }
    return length;
  }

  // Bodies are not kept; past kMaxResponseBytes the transfer stops (CURLE_WRITE_ERROR), and
  // drain_completions() takes the status that arrived, as the built-in client does.
  static size_t discard_body(char*, size_t size, size_t count, void* userp) {
    auto* transfer = static_cast<Handle*>(userp)->transfer;
    transfer->response_body_bytes += size * count;
    return transfer->response_body_bytes > kMaxResponseBytes ? 0 : size * count;
  }

  // A pooled handle of the webhook's current settings, or a new one configured for them.
  std::unique_ptr<Handle> acquire_handle(Webhook& webhook) {
    if (!webhook.idle_handles.empty()) {
      auto handle = std::move(webhook.idle_handles.back());
      webhook.idle_handles.pop_back();
      return handle;
    }
    auto handle = std::make_unique<Handle>();
    handle->easy = curl_easy_init();
    if (handle->easy == nullptr) return nullptr;
    handle->generation = webhook.generation;
    CURL* easy = handle->easy;
    const config::WebhookConfig& cfg = *webhook.config;
    curl_easy_setopt(easy, CURLOPT_PRIVATE, handle.get());
    curl_easy_setopt(easy, CURLOPT_URL, cfg.url.c_str());
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max(cfg.timeout_ms, 1)));
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075700  // 7.87.0
    // A lookup that outlives the timeout (a black-holed DNS server) must not hold the one
    // dispatcher thread until getaddrinfo gives up: without this, libcurl joins its resolver
    // thread when the transfer ends, stalling every other webhook meanwhile.
    curl_easy_setopt(easy, CURLOPT_QUICK_EXIT, 1L);
#endif
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85.0
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS,
                     static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    // HTTP/1.1, never HTTP/2: libcurl would multiplex every webhook to one host onto one
    // connection, so a slow handler's streams, a GOAWAY or a lost packet would reach the other
    // webhooks there too (isolation is per webhook: max_in_flight connections each).
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(easy, CURLOPT_PROXY, "");  // ignore *_proxy variables: see the header
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &Impl::open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, handle.get());
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &Impl::on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, handle.get());
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Impl::discard_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, handle.get());
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, handle->error);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_SHARE, webhook.share);
    // Verification stays on (libcurl's default); these only say what to trust and who we are.
    // A CA file replaces the system's store, as documented: libcurl also reads its built-in CA
    // folder (Debian's: /etc/ssl/certs) unless told not to, which would trust every public CA
    // for a receiver pinned to a private one (found in a security pass).
    if (!cfg.tls.ca_file.empty()) {
      curl_easy_setopt(easy, CURLOPT_CAINFO, cfg.tls.ca_file.c_str());
      curl_easy_setopt(easy, CURLOPT_CAPATH, nullptr);
    }
    if (!cfg.tls.cert_file.empty()) {
      curl_easy_setopt(easy, CURLOPT_SSLCERT, cfg.tls.cert_file.c_str());
      curl_easy_setopt(easy, CURLOPT_SSLKEY, cfg.tls.key_file.c_str());
      if (!cfg.tls.key_password.empty())
        curl_easy_setopt(easy, CURLOPT_KEYPASSWD, cfg.tls.key_password.c_str());
    }
#if LIBCURL_VERSION_NUM >= 0x075700
    // libcurl keeps a parsed CA store for 24 h by default: a CA file replaced in place would be
    // ignored that long. A minute bounds it, at one parse a minute on new connections.
    curl_easy_setopt(easy, CURLOPT_CA_CACHE_TIMEOUT, 60L);
#endif
    return handle;
  }

  // Back to the webhook's pool, unless its settings changed meanwhile (the handle is configured
  // for the old ones) or the pool already holds a handle per slot.
  void release_handle(Webhook& webhook, std::unique_ptr<Handle> handle) {
    if (!handle) return;
    handle->transfer = nullptr;
    if (handle->resend_options) {  // resend_after_keep_alive_race()
      handle->resend_options = false;
      curl_easy_setopt(handle->easy, CURLOPT_FRESH_CONNECT, 0L);
      if (handle->generation == webhook.generation)
        curl_easy_setopt(handle->easy, CURLOPT_TIMEOUT_MS,
                         static_cast<long>(std::max(webhook.config->timeout_ms, 1)));
    }
    if (!webhook.removed && handle->generation == webhook.generation &&
        webhook.idle_handles.size() < static_cast<size_t>(webhook.max_in_flight())) {
      webhook.idle_handles.push_back(std::move(handle));
    }
  }

  void start_transfer(Webhook& webhook, Delivery delivery) {
    auto transfer = std::make_unique<Transfer>();
    transfer->webhook = &webhook;
    transfer->config = webhook.config;
    transfer->policy = webhook.policy;
    transfer->delivery = std::move(delivery);
    transfer->started_ns = now_steady_ns();
    ++webhook.in_flight;
    ++total_in_flight;

    // The spool found no body for it (its payload row is gone: the file was edited or damaged).
    // Sending an empty body would be wrong; a dead letter says what happened.
    if (!transfer->delivery.body) {
      AttemptResult result;
      result.final_error = "the body of this delivery is missing from the spool file";
      finish(std::move(transfer), result);
      return;
    }
    // Fresh timestamp and signatures on every attempt; the delivery id never changes.
    const int64_t timestamp_s = now_unix_ms() / 1000;
    // validate_settings pauses a webhook whose secrets do not decode, so one that sends has keys.
    auto headers =
        build_attempt_headers(*transfer->config, *webhook.keys, transfer->delivery, timestamp_s);
    if (!headers) {
      AttemptResult result;
      result.final_error = headers.error().message;
      finish(std::move(transfer), result);
      return;
    }
    if (webhook.plain_target) {
      start_plain_transfer(webhook, std::move(transfer), *headers);
      return;
    }
    std::unique_ptr<Handle> handle = acquire_handle(webhook);
    if (!handle) {
      AttemptResult result;
      result.curl_code = CURLE_FAILED_INIT;
      result.transport_error = "cannot start transfer: curl_easy_init failed";
      finish(std::move(transfer), result);
      return;
    }
    handle->lines.resize(headers->size() + 1);
    size_t n = 0;
    for (const auto& [name, value] : *headers) {
      // "Name:" would make curl drop the header; "Name;" sends it with an empty value.
      std::string& line = handle->lines[n++];
      line.assign(name).append(value.empty() ? ";" : ": ").append(value);
    }
    // No "Expect: 100-continue" round trip before larger bodies.
    handle->lines[n++].assign("Expect:");
    handle->nodes.resize(n);
    for (size_t i = 0; i < n; ++i) {
      handle->nodes[i].data = handle->lines[i].data();
      handle->nodes[i].next = i + 1 < n ? &handle->nodes[i + 1] : nullptr;
    }

    handle->transfer = transfer.get();
    handle->error[0] = '\0';
    CURL* easy = handle->easy;
    transfer->handle = std::move(handle);
    const std::string* body = transfer->delivery.body.get();
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body ? body->data() : "");
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body ? body->size() : 0));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer->handle->nodes.data());

    if (CURLMcode rc = curl_multi_add_handle(multi, easy); rc != CURLM_OK) {
      AttemptResult result;
      result.curl_code = CURLE_FAILED_INIT;
      result.transport_error = std::string("cannot start transfer: ") + curl_multi_strerror(rc);
      finish(std::move(transfer), result);
      return;
    }
    transfer->in_multi = true;
    Transfer* raw = transfer.get();
    transfers.emplace(raw, std::move(transfer));
    update_status(webhook, raw->config->name);
  }

  void start_plain_transfer(Webhook& webhook, std::unique_ptr<Transfer> transfer,
                            const HeaderList& headers) {
    PlainHttpClient::Request request;
    request.user = transfer.get();
    request.pool = webhook.plain_pool;
    request.max_idle = static_cast<size_t>(webhook.max_in_flight());
    request.target = webhook.plain_target;
    request.policy = transfer->policy;
    size_t length = 0;
    for (const auto& [name, value] : headers) length += name.size() + value.size() + 4;
    request.headers.reserve(length);
    for (const auto& [name, value] : headers)
      request.headers.append(name).append(": ").append(value).append("\r\n");
    request.body = transfer->delivery.body;
    request.deadline_ns =
        transfer->started_ns + int64_t{std::max(transfer->config->timeout_ms, 1)} * 1000000;
    transfer->plain = true;
    Transfer* raw = transfer.get();
    transfers.emplace(raw, std::move(transfer));
    plain.start(std::move(request));
    update_status(webhook, raw->config->name);
  }

  void drain_plain_completions() {
    plain_done.clear();
    plain.poll(now_steady_ns(), plain_done);
    for (auto& completion : plain_done) {
      auto it = transfers.find(static_cast<Transfer*>(completion.user));
      if (it == transfers.end()) continue;
      std::unique_ptr<Transfer> transfer = std::move(it->second);
      transfers.erase(it);
      finish(std::move(transfer), completion.result);
    }
  }

  void drain_completions() {
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(multi, &queued)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* easy = message->easy_handle;
      const CURLcode code = message->data.result;
      Handle* handle = nullptr;
      curl_easy_getinfo(easy, CURLINFO_PRIVATE, &handle);
      if (handle == nullptr) continue;
      auto it = transfers.find(handle->transfer);
      if (it == transfers.end()) continue;
      if (resend_after_keep_alive_race(*it->second, code)) continue;
      std::unique_ptr<Transfer> transfer = std::move(it->second);
      transfers.erase(it);

      AttemptResult result;
      result.curl_code = code;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &result.http_status);
      result.retry_after = transfer->retry_after;
      if (code != CURLE_OK && transfer->answered) {
        // Only the body was late, too long or cut short: the receiver has answered.
        curl_off_t sent = 0;
        curl_easy_getinfo(easy, CURLINFO_SIZE_UPLOAD_T, &sent);
        const std::string* body = transfer->delivery.body.get();
        const auto size = static_cast<curl_off_t>(body ? body->size() : 0);
        if (status_stands(result.http_status, sent >= size)) result.curl_code = CURLE_OK;
      }
      if (code == CURLE_OK && !transfer->answered) {
        // libcurl ends a connection closed inside the response head ("HTTP/1.1 200 OK\r\n", then
        // nothing) with CURLE_OK and that status: the receiver never finished answering, and the
        // built-in client retries it too.
        const char* ip = nullptr;
        long port = 0;
        curl_easy_getinfo(easy, CURLINFO_PRIMARY_IP, &ip);
        curl_easy_getinfo(easy, CURLINFO_PRIMARY_PORT, &port);
        result.curl_code = CURLE_RECV_ERROR;
        result.http_status = 0;
        result.transport_error = "Connection to " + std::string(ip ? ip : "?") + " port " +
                                 std::to_string(port) + " closed before the response was complete";
      } else if (result.curl_code != CURLE_OK) {
        const char* error = transfer->handle->error;
        result.transport_error = transfer->head_bytes > kMaxResponseHeadBytes ? kHeadTooLarge
                                 : error[0] != '\0'                           ? std::string(error)
                                                    : curl_easy_strerror(code);
        // A refusal is final only when it left no address to try: if the host also has an
        // allowed one, its failure (a receiver restarting, a timeout) is retried as usual.
        if (!transfer->used_allowed_address) result.final_error = transfer->refused_reason;
      }
      finish(std::move(transfer), result);
    }
  }

  // The keep-alive race: a receiver closes an idle connection just as a request goes out on it,
  // and the request fails before any byte of an answer. libcurl (7.88) does not send a POST again
  // then, so it is sent once more here on a new connection, as the built-in client does, without
  // counting an attempt (found in a receivers pass: 2 deliveries in 90 dead-lettered at
  // max_attempts 1, never seen by the receiver). True when the transfer is under way again.
  // (libcurl retries a reused connection's empty reply by itself, but not a failed send, nor
  // always a reset seen while reading: in a loaded test run it reported "Recv failure" instead.
  // When libcurl did retry, its new connection makes NUM_CONNECTS 1 and nothing is done here.)
  // As in the built-in client, a receiver that took the whole body and then died may get it
  // twice: at least once. The resend keeps the attempt's deadline: timeout_ms bounds the whole
  // attempt, as in the built-in client.
  bool resend_after_keep_alive_race(Transfer& transfer, CURLcode code) {
    if (transfer.resent || transfer.answered || transfer.head_bytes > 0 ||
        (code != CURLE_SEND_ERROR && code != CURLE_RECV_ERROR && code != CURLE_GOT_NOTHING))
      return false;
    CURL* easy = transfer.handle->easy;
    long new_connections = 0;
    if (curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &new_connections) != CURLE_OK ||
        new_connections != 0)
      return false;  // a new connection failed: no race, an ordinary failure
    const int64_t left_ms =
        transfer.config->timeout_ms - (now_steady_ns() - transfer.started_ns) / 1'000'000;
    if (left_ms <= 0) return false;
    curl_multi_remove_handle(multi, easy);
    transfer.in_multi = false;
    // Both undone in release_handle().
    transfer.handle->resend_options = true;
    curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(left_ms));
    if (curl_multi_add_handle(multi, easy) != CURLM_OK) return false;  // fails as it was
    transfer.in_multi = true;
    transfer.resent = true;
    transfer.retry_after.clear();
    transfer.response_body_bytes = 0;
    transfer.refused_reason.clear();
    transfer.used_allowed_address = false;
    transfer.handle->error[0] = '\0';
    return true;
  }

  void finish(std::unique_ptr<Transfer> transfer, const AttemptResult& result) {
    Webhook& webhook = *transfer->webhook;
    const config::WebhookConfig& cfg = *transfer->config;
    const Delivery& delivery = transfer->delivery;
    // Retry-After dates and /status are wall-clock; the retry's due time is on the schedule clock.
    const auto [now_ms, schedule_ms] = read_clocks();

    Classification classification = classify_attempt(result, now_ms, cfg.retry);
    RetryDecision decision = decide_outcome(delivery, classification, schedule_ms, cfg.retry, rng);
    // Redacted before the spool keeps it: `deliveries list/show` print it in a process that knows
    // no secret to redact.
    if (!decision.outcome.error.empty())
      decision.outcome.error = redact_secrets(decision.outcome.error);
    store.complete(delivery, decision.outcome);
    --webhook.in_flight;
    --total_in_flight;

    webhook.duration->observe_ns(now_steady_ns() - transfer->started_ns);
    webhook.attempt_results[attempt_result(result)]->inc();

    const int attempt = delivery.attempts + 1;
    std::optional<DiagnosticEvent> diagnostic;
    using Kind = AttemptOutcome::Kind;
    {
      std::lock_guard lock(status_mu);
      auto status = statuses.find(cfg.name);
      switch (decision.outcome.kind) {
        case Kind::Delivered:
          webhook.delivered->inc();
          if (status != statuses.end()) {
            status->second.delivered++;
            status->second.last_success_ms = now_ms;
          }
          break;
        case Kind::Retry:
        case Kind::Dead:
          if (decision.outcome.kind == Kind::Retry) {
            webhook.retried->inc();
          } else {
            (decision.exhausted ? webhook.dead : webhook.failed)->inc();
          }
          if (status != statuses.end()) {
            status->second.failed_attempts++;
            if (decision.outcome.kind == Kind::Dead) status->second.dead++;
            status->second.last_error = decision.outcome.error;
            status->second.last_error_ms = now_ms;
          }
          break;
      }
    }

    if (decision.outcome.kind != Kind::Delivered) {
      const std::string& reason = decision.outcome.error;
      // Limited, as the other per-event lines are (found in an exploratory run: one receiver
      // down wrote 174 lines a second); the counters and diagnostics still see every one.
      static LogLimiter retry_lines{20, "webhook retry lines"};
      static LogLimiter dead_lines{50, "webhook dead-letter lines"};
      if (decision.outcome.kind == Kind::Retry) {
        if (retry_lines.allow())
          spdlog::warn(
              "webhook {}: delivery {} of event {} failed (attempt {}/{}): {}; retrying in {} ms",
              cfg.name, delivery.id, delivery.event_id, attempt,
              std::max(cfg.retry.max_attempts, 1), reason,
              std::max<int64_t>(decision.outcome.next_attempt_ms - schedule_ms, 0));
        if (!webhook.next_due_ms || decision.outcome.next_attempt_ms < *webhook.next_due_ms)
          webhook.next_due_ms = decision.outcome.next_attempt_ms;
      } else if (dead_lines.allow()) {
        spdlog::warn(
            "webhook {}: delivery {} of event {} failed (attempt {}/{}): {}; dead-lettered",
            cfg.name, delivery.id, delivery.event_id, attempt, std::max(cfg.retry.max_attempts, 1),
            reason);
      }
      // One hookgate.delivery.failed a second per webhook, the next one saying how many were
      // left out (found in a scale pass: 200 webhooks down sent 1,200 a second to each webhook
      // on "*", a multiple of the event rate). Every dead letter is said: it needs acting on.
      const bool failed_notice = decision.outcome.kind == Kind::Retry && !delivery.is_diagnostic();
      // A second since the last one, not a clock second: two failures 90 ms apart across a
      // second's boundary were both said (found in an operator's test).
      const int64_t now_ns = now_steady_ns();
      const bool said_this_second = failed_notice && webhook.failed_notice_ns &&
                                    now_ns - *webhook.failed_notice_ns < 1'000'000'000;
      if (said_this_second) {
        ++webhook.failed_notices_left_out;
        failed_notices_left_out->inc();
      }
      if (!delivery.is_diagnostic() && !said_this_second) {
        diagnostic = DiagnosticEvent{};
        diagnostic->type = failed_notice ? diag::kDeliveryFailed : diag::kDeliveryDead;
        diagnostic->webhook = cfg.name;
        diagnostic->event_id = delivery.event_id;
        diagnostic->event_type = delivery.event_type;
        diagnostic->reason = reason;
        // The count goes with the next notice, a dead letter's too, so a burst's is not held
        // back until the webhook's next failure.
        if (failed_notice) webhook.failed_notice_ns = now_ns;
        if (webhook.failed_notices_left_out > 0)
          diagnostic->reason += " (and " + std::to_string(webhook.failed_notices_left_out) +
                                " more failed attempts of this webhook since the last notice)";
        webhook.failed_notices_left_out = 0;
        diagnostic->delivery_id = delivery.id;
        diagnostic->attempts = attempt;
      }
    }

    // Not from settings since replaced: the URL may be another receiver's.
    if (classification.verdict == Verdict::Retry && classification.retry_after_ms.value_or(0) > 0 &&
        webhook.config == transfer->config) {
      const int64_t until = schedule_ms + *classification.retry_after_ms;
      if (webhook.held_until_ms <= schedule_ms)
        spdlog::warn(
            "webhook {}: the receiver asked for a pause (Retry-After: {} ms); none of its "
            "deliveries is sent before then",
            cfg.name, *classification.retry_after_ms);
      if (until > webhook.held_until_ms) {  // kept as held, so a restart honours it too
        webhook.held_until_ms = until;
        store.keep_webhook_hold(cfg.name, {webhook_hold_receiver(cfg.url), until});
      }
      std::lock_guard lock(status_mu);
      if (auto status = statuses.find(cfg.name); status != statuses.end())
        status->second.held_until_ms =
            std::max(status->second.held_until_ms, now_ms + *classification.retry_after_ms);
    }
    if (decision.pause_webhook && !webhook.paused && !webhook.removed &&
        webhook.config == transfer->config) {
      webhook.paused = true;
      webhook.pause_reason = "endpoint answered 410 Gone";
      spdlog::warn(
          "webhook {} paused: endpoint answered 410 Gone; its deliveries wait in the spool until "
          "a reload (SIGHUP) or restart",
          cfg.name);
    }
    update_status(webhook, cfg.name);

    if (transfer->handle) {
      // Only once it has been added: a failed add leaves the handle outside the multi.
      if (transfer->in_multi) curl_multi_remove_handle(multi, transfer->handle->easy);
      release_handle(webhook, std::move(transfer->handle));
    }
    transfer.reset();

    if (diagnostic && diagnostics) diagnostics(std::move(*diagnostic));
  }

  // Removed webhooks go once their last transfer has finished, and so do their series from
  // /metrics (a dashboard would otherwise show them forever; added back, they continue).
  void purge_removed() {
    if (!any_removed) return;
    any_removed = false;
    for (auto it = webhooks.begin(); it != webhooks.end();) {
      if (it->second->removed && it->second->in_flight == 0) {
        plain.close_pool(it->second->plain_pool);
        metrics::Registry::global().hide_label("webhook", it->first);
        it = webhooks.erase(it);
      } else {
        any_removed |= it->second->removed;  // until its last answer arrives
        ++it;
      }
    }
  }

  // Shutdown: whatever is still in flight goes back to the store untouched.
  void abort_transfers() {
    for (auto& [raw, transfer] : transfers) {
      if (transfer->plain) {
        plain.cancel(transfer.get());
      } else {
        curl_multi_remove_handle(multi, transfer->handle->easy);
        release_handle(*transfer->webhook, std::move(transfer->handle));
      }
      store.release(transfer->delivery);
      --transfer->webhook->in_flight;
      --total_in_flight;
      // Memory mode keeps nothing for a next start (found in an exploratory run: "it stays
      // pending", then "dropped" on the next line).
      if (drain_on_stop)
        spdlog::info(
            "webhook {}: delivery {} cut off at shutdown; memory mode keeps nothing, so it is "
            "dropped (the receiver may have got it)",
            transfer->config->name, transfer->delivery.id);
      else
        spdlog::info("webhook {}: delivery {} released at shutdown; it stays pending",
                     transfer->config->name, transfer->delivery.id);
    }
    transfers.clear();
    std::lock_guard lock(status_mu);
    for (auto& [name, status] : statuses) status.in_flight = 0;
  }

  // Each configured webhook's backlog, for an alert on one endpoint falling behind (the spool's
  // depth sums them all). A removed webhook's series is hidden (Registry::hide_label).
  void refresh_pending() {
    const auto pending = store.pending_by_webhook_snapshot();
    std::lock_guard lock(status_mu);
    for (const auto& [name, webhook] : webhooks) {
      if (webhook->removed) continue;
      const auto it = pending.find(name);
      const uint64_t n = it == pending.end() ? 0 : it->second;
      webhook->pending_gauge->set(static_cast<int64_t>(n));
      if (auto status = statuses.find(name); status != statuses.end()) status->second.pending = n;
    }
  }

  // A Retry-After hold from before the restart, when the same receiver asked for it; no longer
  // than the webhook's max_retry_after_ms now allows.
  void restore_hold(Webhook& webhook, const std::string& name, const config::WebhookConfig& cfg) {
    const auto found = restored_holds.find(name);
    if (found == restored_holds.end()) return;
    const WebhookHold hold = std::move(found->second);
    restored_holds.erase(found);
    const auto [now_ms, schedule_ms] = read_clocks();
    const int64_t until = std::min(hold.until_ms, schedule_ms + cfg.retry.max_retry_after_ms);
    if (hold.receiver != webhook_hold_receiver(cfg.url) || until <= schedule_ms) {
      store.keep_webhook_hold(name, {});  // another receiver's, or run out: not kept either
      return;
    }
    if (until < hold.until_ms) store.keep_webhook_hold(name, {hold.receiver, until});
    webhook.held_until_ms = until;
    spdlog::warn(
        "webhook {}: the receiver's pause (Retry-After) from before the restart holds its "
        "deliveries for {} ms more",
        name, until - schedule_ms);
    std::lock_guard lock(status_mu);
    statuses[name].held_until_ms = now_ms + (until - schedule_ms);
  }

  void update_status(const Webhook& webhook, const std::string& name) {
    if (webhook.removed) return;
    webhook.paused_gauge->set(webhook.paused ? 1 : 0);
    std::lock_guard lock(status_mu);
    auto& status = statuses[name];
    status.name = name;
    status.paused = webhook.paused;
    status.pause_reason = webhook.pause_reason;
    status.in_flight = webhook.in_flight;
  }

  DeliveryStore& store;
  std::map<std::string, WebhookHold> restored_holds;  // until each webhook's first config
  const bool drain_on_stop;
  DiagnosticSink diagnostics;
  std::mt19937_64 rng;
  CURLM* multi = nullptr;
  std::shared_ptr<Waker> waker;
  PlainHttpClient plain;
  uint64_t next_plain_pool = 1;
  size_t total_in_flight = 0;              // requests of every webhook, against max_total_in_flight
  size_t first_to_start = 0;               // where start_due_transfers() begins (see there)
  bool budget_bound = false;               // the last pass stopped at the socket budget
  int64_t budget_said_ns = INT64_MIN / 2;  // the last "wait for a socket" line (steady clock)
  metrics::Counter* failed_notices_left_out = &metrics::counter(
      "hookgate_diagnostics_left_out_total",
      "hookgate.delivery.failed notices not raised: one a second per webhook, the next saying "
      "how many were left out");
  metrics::Counter* budget_waits = &metrics::counter(
      "hookgate_webhook_socket_budget_waits_total",
      "Times due deliveries began waiting for a socket: the requests in flight across all "
      "webhooks reached half the open-file limit left after the reserve");
  std::vector<PlainHttpClient::Completion> plain_done;
  std::thread thread;
  std::mutex stop_mu;

  // Requests from other threads, applied by the loop.
  std::mutex control_mu;
  std::condition_variable config_applied_cv;
  std::optional<std::vector<config::WebhookConfig>> pending_config;
  uint64_t config_requested = 0;
  uint64_t config_applied = 0;
  bool started = false;
  bool loop_running = false;
  std::thread::id loop_thread;
  bool stop_requested = false;
  int64_t stop_deadline = 0;  // steady ns

  // Loop-thread state.
  std::map<std::string, std::unique_ptr<Webhook>> webhooks;
  std::vector<Webhook*> order;  // the configured ones, in config order (into `webhooks`)
  bool any_removed = false;     // some webhook waits for its last answer to be purged
  std::map<Transfer*, std::unique_ptr<Transfer>> transfers;
  std::map<std::string, CURLSH*> shares;

  // What status() reads.
  mutable std::mutex status_mu;
  std::map<std::string, WebhookStatus> statuses;
  std::vector<std::string> status_order;
};

Dispatcher::Dispatcher(DeliveryStore& store, DiagnosticSink diagnostics)
    : impl_(std::make_unique<Impl>(store, std::move(diagnostics))) {}

Dispatcher::~Dispatcher() {
  stop(std::chrono::milliseconds(0));
}

void Dispatcher::set_webhooks(std::vector<config::WebhookConfig> webhooks) {
  impl_->post_config(std::move(webhooks));
}

void Dispatcher::start() {
  std::lock_guard lock(impl_->control_mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->loop_running = true;
  impl_->store.set_on_ready([waker = impl_->waker] { waker->mark_store_ready(); });
  impl_->thread = std::thread([impl = impl_.get()] {
    name_this_thread("hg-dispatcher");
    impl->run();
  });
  impl_->loop_thread = impl_->thread.get_id();
}

void Dispatcher::stop(std::chrono::milliseconds grace) {
  std::lock_guard stop_lock(impl_->stop_mu);  // one joiner at a time
  {
    std::lock_guard lock(impl_->control_mu);
    if (!impl_->stop_requested) {
      impl_->stop_requested = true;
      impl_->stop_deadline =
          now_steady_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
    }
  }
  impl_->waker->wake();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
    impl_->store.set_on_ready(nullptr);
  }
}

std::vector<Dispatcher::WebhookStatus> Dispatcher::status() const {
  std::lock_guard lock(impl_->status_mu);
  std::vector<WebhookStatus> out;
  for (const auto& name : impl_->status_order) {
    auto it = impl_->statuses.find(name);
    if (it != impl_->statuses.end()) out.push_back(it->second);
  }
  return out;
}

// The key only makes it hookgate's own digest.
std::string webhook_hold_receiver(const std::string& url) {
  return hmac_sha256_hex("hookgate webhook hold", url);
}

}  // namespace hookgate::webhooks
