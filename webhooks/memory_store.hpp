#pragma once
// The in-memory DeliveryStore (`spool: { mode: memory }`): fire-and-forget, nothing survives a
// restart. Per webhook, a FIFO of ready deliveries and a min-heap of delayed retries; a retry
// joins the FIFO's tail once it is due. One mutex guards everything: every operation is a few
// map/queue steps, far cheaper than the HTTP round trip it feeds.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "gateway/common/metrics.hpp"
#include "webhooks/delivery.hpp"

namespace hookgate::webhooks {

class MemoryDeliveryStore final : public DeliveryStore {
 public:
  // Delivered deliveries are forgotten except for the newest `keep_delivered` (for `deliveries
  // list`); dead ones are kept for replay up to `keep_dead`, oldest dropped first. A webhook
  // holding `max_pending_per_webhook` pending deliveries (0: no bound) takes no new ones: they are
  // dropped and counted (`spool.memory_max_pending`), so a receiver that stays down cannot grow
  // the store without end, and other webhooks keep theirs.
  explicit MemoryDeliveryStore(size_t keep_delivered = 1000, size_t keep_dead = 100000,
                               size_t max_pending_per_webhook = 0);

  Status add(std::vector<Delivery> batch) override;
  std::vector<Delivery> claim_due(const std::string& webhook, int64_t now_ms,
                                  size_t limit) override;
  void complete(const Delivery& delivery, const AttemptOutcome& outcome) override;
  void release(const Delivery& delivery) override;
  std::optional<int64_t> next_due(const std::string& webhook) override;
  size_t pending_count() override;
  void register_webhook_metrics(const std::string& webhook) override;
  void set_on_ready(std::function<void()> on_ready) override;
  std::optional<std::vector<std::string>> take_ready_webhooks() override;
  // Deliveries dropped by the per-webhook bound since the start.
  uint64_t dropped_count();

  // Oldest first; webhook "" = all webhooks; limit 0 = no limit.
  std::vector<Delivery> list(std::optional<DeliveryState> state, const std::string& webhook,
                             size_t limit) override;
  std::optional<Delivery> get(const std::string& id) override;
  Result<size_t> replay(const std::vector<std::string>& ids) override;
  std::map<std::string, size_t> pending_by_webhook() override;
  [[nodiscard]] bool keeps_pending_across_restarts() const override { return false; }

 private:
  struct Record {
    Delivery delivery;
    bool claimed = false;
    // Bumped whenever the record is (re)queued; queue entries carrying an older value are stale
    // and skipped (lazy deletion keeps every operation O(log n)).
    uint64_t queue_generation = 0;
  };
  struct QueueEntry {
    std::string id;
    uint64_t generation;
  };
  struct DelayedEntry {
    int64_t due_ms;
    uint64_t sequence;  // FIFO among equal due times
    QueueEntry entry;
    bool operator>(const DelayedEntry& other) const {
      return due_ms != other.due_ms ? due_ms > other.due_ms : sequence > other.sequence;
    }
  };
  struct WebhookQueue {
    std::deque<QueueEntry> ready;
    std::priority_queue<DelayedEntry, std::vector<DelayedEntry>, std::greater<>> delayed;
    size_t pending = 0;  // this webhook's pending deliveries, claimed ones included
    // Full since the bound was hit: one warning when the first delivery is dropped, one when the
    // queue is back under 3/4 of the bound, not one per delivery. (A delivery is taken whenever
    // the queue is below the bound; the flag only spaces out the log.)
    bool full = false;
    uint64_t dropped_while_full = 0;
    // Looked up on the webhook's first delivery: the series shows at 0 before the first drop.
    metrics::Counter* dropped_counter = nullptr;
    bool listed_ready = false;  // named in ready_
  };

  // Puts a pending, unclaimed record in its webhook's ready FIFO (or delayed heap).
  void enqueue_locked(Record& record, bool ready);
  bool is_live_locked(const QueueEntry& entry) const;
  void promote_due_locked(WebhookQueue& queue, int64_t now_ms);
  void drop_stale_locked(WebhookQueue& queue);
  void retire_locked(const std::string& id, DeliveryState state);
  // Counts and reports one delivery refused by the per-webhook bound.
  void drop_locked(const std::string& webhook, WebhookQueue& queue);
  static void register_dropped_counter(const std::string& webhook, WebhookQueue& queue);
  void notify_ready();

  const size_t keep_delivered_;
  const size_t keep_dead_;
  const size_t max_pending_per_webhook_;
  std::mutex mu_;
  std::map<std::string, Record> records_;  // by id: ids are time-ordered, so is this map
  std::unordered_map<std::string, WebhookQueue> queues_;
  std::deque<std::string> delivered_order_;  // oldest first, for trimming
  std::deque<std::string> dead_order_;
  size_t pending_ = 0;
  uint64_t dropped_ = 0;
  uint64_t sequence_ = 0;
  ReadyWebhooks ready_;  // take_ready_webhooks()
  std::function<void()> on_ready_;
};

}  // namespace hookgate::webhooks
