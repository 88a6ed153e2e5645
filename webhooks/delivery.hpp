#pragma once
// A delivery is one (event, webhook) pair: the unit the spool stores, the dispatcher sends and
// retries, and `hookgate deliveries` lists.
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/common/diagnostic_type.hpp"
#include "gateway/common/result.hpp"
#include "gateway/common/stream_mark.hpp"

namespace hookgate::webhooks {

enum class DeliveryState { Pending, Delivered, Dead };

struct Delivery {
  std::string id;       // "msg_…": X-Hookgate-Delivery and webhook-id; same on every retry
  std::string webhook;  // webhook name
  std::string event_id;
  std::string event_type;
  // The request body, serialized once and shared by every delivery of the event that uses the
  // same body mode.
  std::shared_ptr<const std::string> body;
  int attempts = 0;             // attempts already made
  int64_t next_attempt_ms = 0;  // unix ms; 0 = now
  int64_t created_ms = 0;
  std::string last_error;
  DeliveryState state = DeliveryState::Pending;
  // Deliveries of the gateway's own hookgate.* events never raise further diagnostics (no loops).
  bool is_diagnostic() const { return is_diagnostic_type(event_type); }
};

// What happened to one attempt, reported back to the store.
struct AttemptOutcome {
  enum class Kind { Delivered, Retry, Dead };
  Kind kind;
  int64_t next_attempt_ms = 0;  // for Retry
  std::string error;            // for Retry/Dead: the reason, never containing secrets
};

// What a store answers take_ready_webhooks() with: the webhooks named since the last take, or
// every webhook. Each webhook's `listed` flag lives with the store's own per-webhook state, so a
// webhook named again before the take costs no lookup (a store names one per claimable
// delivery). Not thread-safe: the store's lock guards it.
class ReadyWebhooks {
 public:
  void name(bool& listed, const std::string& webhook) {
    if (listed || all_) return;
    listed = true;
    names_.push_back(webhook);
  }
  void name_all() { all_ = true; }  // an event that concerns every webhook
  // `listed_flag(name)` finds a named webhook's flag (null: gone) to clear it.
  template <class ListedFlag>
  std::optional<std::vector<std::string>> take(ListedFlag listed_flag) {
    std::vector<std::string> names;
    names.swap(names_);
    for (const auto& webhook : names)
      if (bool* listed = listed_flag(webhook)) *listed = false;
    if (all_) {
      all_ = false;
      return std::nullopt;
    }
    return names;
  }

 private:
  std::vector<std::string> names_;
  bool all_ = true;  // until the first take: whatever came before
};

// A receiver's Retry-After, which holds its whole webhook (the dispatcher).
struct WebhookHold {
  // Which receiver asked: a digest of the URL (never the URL, which may hold a token), so a
  // webhook pointed elsewhere since is not held.
  std::string receiver;
  int64_t until_ms = 0;  // schedule clock; 0: no hold
};

// Where accepted deliveries live until they are delivered or dead. The in-memory store is the
// fire-and-forget mode; the SQLite spool is the durable default. Thread-safe.
class DeliveryStore {
 public:
  virtual ~DeliveryStore() = default;

  // Accepts a batch. When this returns ok, the deliveries are durable (for the durable store).
  virtual Status add(std::vector<Delivery> batch) = 0;
  // add() without waiting: the future answers what add() would have returned. A store may hand
  // out the deliveries before it answers (the SQLite spool does, while it commits).
  virtual std::future<Status> add_async(std::vector<Delivery> batch) {
    std::promise<Status> done;
    done.set_value(add(std::move(batch)));
    return done.get_future();
  }
  // Hands out up to `limit` pending deliveries of `webhook` that are due at `now_ms`, oldest
  // first, and marks them in flight so they are not handed out twice.
  virtual std::vector<Delivery> claim_due(const std::string& webhook, int64_t now_ms,
                                          size_t limit) = 0;
  // Records an attempt's outcome for a claimed delivery (and releases the claim).
  virtual void complete(const Delivery& delivery, const AttemptOutcome& outcome) = 0;
  // Releases a claim without counting an attempt (shutdown, webhook removed on reload).
  virtual void release(const Delivery& delivery) = 0;
  // Earliest next_attempt_ms among unclaimed pending deliveries of `webhook`, if any.
  virtual std::optional<int64_t> next_due(const std::string& webhook) = 0;
  // Pending (including in-flight) deliveries, all webhooks.
  virtual size_t pending_count() = 0;
  // Called (from any thread) whenever new deliveries become claimable; the dispatcher wakes up.
  virtual void set_on_ready(std::function<void()> on_ready) = 0;
  // The webhooks that got claimable deliveries (or an earlier due time) since the last call, so
  // a wake-up claims from those, not from every webhook. nullopt: any webhook may have some (a
  // store that does not keep track, or an event that concerns them all).
  virtual std::optional<std::vector<std::string>> take_ready_webhooks() { return std::nullopt; }

  // Operator views (hookgate deliveries ...). list() may leave bodies out; get() has them.
  virtual std::vector<Delivery> list(std::optional<DeliveryState> state, const std::string& webhook,
                                     size_t limit) = 0;
  virtual std::optional<Delivery> get(const std::string& id) = 0;
  // Moves dead deliveries back to pending with attempts reset; returns how many moved, or an
  // error when the move could not be written (a durable store's file locked, read-only, damaged).
  [[nodiscard]] virtual Result<size_t> replay(const std::vector<std::string>& ids) = 0;
  // Pending deliveries per webhook name (committed ones, for a durable store), so the gateway
  // can name those of webhooks the config no longer has. A store that cannot tell returns none.
  virtual std::map<std::string, size_t> pending_by_webhook() { return {}; }
  // As pending_by_webhook(), but cheap enough to call every second on a busy thread: a durable
  // store answers with counts it refreshes off the hot path every few seconds (so they may be
  // that old); a store in memory counts now.
  virtual std::map<std::string, size_t> pending_by_webhook_snapshot() {
    return pending_by_webhook();
  }
  // How many changes another process made (`hookgate deliveries replay` beside the gateway), and
  // the pending deliveries per webhook as the store counted them after the last one: when the
  // count moves, the gateway names the backlogs no webhook takes without reading the file again
  // on its ingest thread.
  [[nodiscard]] virtual uint64_t external_changes() const { return 0; }
  virtual std::map<std::string, size_t> pending_by_webhook_after_external_change() { return {}; }
  // The gateway is stopping: what is still written may wait a short while for a lock, not as
  // long as during normal operation (a service manager's stop timeout is near). Safe to call
  // from any thread, any number of times.
  virtual void begin_stop() {}
  // Writes what is queued (outcomes included) and lets go of the file; afterwards nothing is
  // added or claimed, and pending_count() is what a restart finds. Idempotent.
  virtual void close() {}
  // A durable store keeps each webhook's hold as the dispatcher holds it (until_ms 0: it ended),
  // and hands those that have not run out to the next start, once (found in an exploratory
  // run: a restart forgot a Retry-After, and a throttled receiver got the whole backlog at once).
  virtual void keep_webhook_hold(const std::string& /*webhook*/, const WebhookHold& /*hold*/) {}
  virtual std::map<std::string, WebhookHold> take_webhook_holds() { return {}; }
  // Whether the store can write now; false while a durable store's writes fail (a full disk),
  // which holds intake back: /readyz says so.
  [[nodiscard]] virtual bool writable() const { return true; }
  // Whether the store holds as much as it may (spool.max_bytes): intake then leaves new events
  // with the bus until deliveries free space. Nothing already handed to add() is refused.
  [[nodiscard]] virtual bool full() const { return false; }
  // A durable store whose files were deleted or replaced under it while running (checked once a
  // second): what goes into them may be lost, so intake waits as when full().
  [[nodiscard]] virtual bool file_missing() const { return false; }
  // Of those, the database itself, whose content a stop then loses (not only its -wal or -shm,
  // which a clean stop writes back).
  [[nodiscard]] virtual bool database_missing() const { return false; }
  // A reload changed spool.max_bytes (0: no bound).
  virtual void set_max_bytes(int64_t /*bytes*/) {}
  // Registers the series this store keeps per webhook, so /metrics shows them at 0 from the
  // webhook's configuration on (an alert on increase() misses a series' first rise).
  virtual void register_webhook_metrics(const std::string& /*webhook*/) {}
  // Whether a write failed for want of disk (full, an I/O error) and none has written since:
  // unlike writable(), still true after a stop ended the wait (the stop then takes no more from
  // the bus).
  [[nodiscard]] virtual bool failing_to_write() const { return false; }
  // Whether what is still pending when the gateway stops is kept for the next start. A store
  // that keeps nothing (memory mode) gets its queue drained within the shutdown grace instead.
  [[nodiscard]] virtual bool keeps_pending_across_restarts() const { return true; }
  // Publisher streams' last sequence numbers, kept from one run to the next start, so that
  // numbers published in between and never received count as lost bus messages. A store without
  // a file keeps none. take_stream_marks() hands over, once, what the last run kept;
  // keep_stream_marks() is written when the store closes.
  virtual StreamMarks take_stream_marks() { return {}; }
  virtual void keep_stream_marks(StreamMarks) {}
  // While it runs: add_async(), with the marks of the streams whose messages made this batch
  // (and of any since the last marks handed over), written in the same transaction, so a crash
  // leaves marks that match what was accepted. write_stream_marks(): the marks alone, for
  // messages that made no delivery (vetoed, unrouted), written after what was added before.
  virtual std::future<Status> add_async_with_marks(std::vector<Delivery> batch, StreamMarks) {
    return add_async(std::move(batch));
  }
  virtual void write_stream_marks(StreamMarks) {}
};

}  // namespace hookgate::webhooks
