#pragma once
// Sends deliveries: ONE thread drives ONE libcurl multi handle and the built-in HTTP/1.1 client
// (webhooks/plain_http.hpp, for plain http:// unless `http_client: libcurl`) for every webhook,
// so concurrency costs a socket per request, not a thread. Each webhook claims from its own queue
// in the store, bounded by max_in_flight and an optional token-bucket rate, and every transfer
// carries the webhook's own timeout: a slow or hung endpoint only ever holds its own slots.
//
// Per attempt: fresh webhook-timestamp and signatures, the same delivery id; the SSRF guard judges
// the address each new connection uses; no redirects; http/https only; environment proxies are
// ignored (a proxy would hide the real peer from the guard). The outcome goes through
// retry_policy into store.complete(). Failed attempts are logged once at warn, counted, and
// reported to the DiagnosticSink (hookgate.delivery.failed / .dead) unless the delivery carries
// a diagnostic event itself.
//
// Metrics:
//   hookgate_deliveries_total{webhook,outcome}  one per attempt, disjoint outcomes:
//     delivered | retry (will be retried) | failed (final answer: 3xx/4xx/410, SSRF refusal) |
//     dead (attempts exhausted); failed + dead = dead-lettered
//   hookgate_delivery_attempts_total{webhook,result}  2xx|3xx|4xx|5xx|timeout|connect_error|
//     tls|refused|error
//   hookgate_delivery_duration_seconds{webhook}  attempt round trip
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gateway/diagnostics.hpp"
#include "webhooks/delivery.hpp"

namespace hookgate::webhooks {

// Whether a webhook sends the same requests under `a` as under `b`: its URL, secrets, headers,
// body, timeouts, retries, limits, address policy and TLS (not its events, which route). A
// reload keeps an unchanged webhook's connections, pause and Retry-After hold.
bool same_delivery_settings(const config::WebhookConfig& a, const config::WebhookConfig& b);
// The keys of those settings that differ (`url`, `secrets`, `retry`, ...), for a reload's log
// line: names only, never values.
[[nodiscard]] std::vector<std::string> changed_delivery_settings(const config::WebhookConfig& a,
                                                                 const config::WebhookConfig& b);

// Which receiver a Retry-After hold came from, as the store keeps it (WebhookHold::receiver): a
// digest of the URL, which may hold a token.
std::string webhook_hold_receiver(const std::string& url);

// Open files kept for the bus, the spool, the admin listener, hook processes and logs: webhook
// sockets get the rest of the process's limit (the dispatcher caps itself to it).
inline constexpr int64_t kOpenFilesReserve = 256;

class Dispatcher {
 public:
  struct WebhookStatus {
    std::string name;
    bool paused = false;
    std::string pause_reason;
    uint64_t delivered = 0;
    uint64_t failed_attempts = 0;  // every attempt that did not deliver
    uint64_t dead = 0;             // deliveries dead-lettered
    int in_flight = 0;
    uint64_t pending = 0;  // not delivered or dead yet, in flight included (refreshed each second)
    int64_t last_success_ms = 0;  // unix ms, 0 = never
    std::string last_error;
    int64_t last_error_ms = 0;  // unix ms, 0 = never
    int64_t held_until_ms = 0;  // unix ms: the latest Retry-After holds its deliveries until then
    // Healthy unless paused or the latest outcome was a failure.
    bool healthy() const { return !paused && last_success_ms >= last_error_ms; }
  };

  // `diagnostics` is called on the dispatcher thread; it may add deliveries to `store`.
  Dispatcher(DeliveryStore& store, DiagnosticSink diagnostics);
  ~Dispatcher();  // stop(0) if still running
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Thread-safe; at start and on reload. Added webhooks start claiming, changed ones use the new
  // settings for their next attempts, removed ones stop claiming while their in-flight transfers
  // finish. A webhook whose settings cannot work (bad CIDR, undecodable whsec_ secret, broken
  // custom header) is paused with the reason; its deliveries stay pending.
  void set_webhooks(std::vector<config::WebhookConfig> webhooks);

  // Starts the dispatcher thread. Once.
  void start();
  // Stops claiming, waits up to `grace` for in-flight attempts, aborts the rest and release()s
  // them (they stay pending in the store, attempts unchanged), joins. Idempotent. A store that
  // keeps nothing across restarts (memory mode) is drained instead: deliveries due within the
  // grace are still sent, and the dispatcher returns as soon as none is left to send.
  void stop(std::chrono::milliseconds grace);

  // One entry per configured webhook, in configuration order.
  std::vector<WebhookStatus> status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hookgate::webhooks
