#include "webhooks/memory_store.hpp"

#include <set>

#include "gateway/common/log.hpp"

namespace hookgate::webhooks {

MemoryDeliveryStore::MemoryDeliveryStore(size_t keep_delivered, size_t keep_dead,
                                         size_t max_pending_per_webhook)
    : keep_delivered_(keep_delivered),
      keep_dead_(keep_dead),
      max_pending_per_webhook_(max_pending_per_webhook) {}

namespace {
metrics::Counter& dropped_counter(const std::string& webhook) {
  return metrics::counter("hookgate_deliveries_dropped_total",
                          "Deliveries a memory-mode spool dropped: the webhook's queue was full",
                          {{"webhook", webhook}});
}
}  // namespace

void MemoryDeliveryStore::register_webhook_metrics(const std::string& webhook) {
  (void)dropped_counter(webhook);
}

void MemoryDeliveryStore::register_dropped_counter(const std::string& webhook,
                                                   WebhookQueue& queue) {
  if (queue.dropped_counter == nullptr) queue.dropped_counter = &dropped_counter(webhook);
}

void MemoryDeliveryStore::drop_locked(const std::string& webhook, WebhookQueue& queue) {
  ++dropped_;
  ++queue.dropped_while_full;
  register_dropped_counter(webhook, queue);
  queue.dropped_counter->inc();
  if (queue.full) return;
  queue.full = true;
  spdlog::warn(
      "webhook {}: memory queue full ({} pending, spool.memory_max_pending); new deliveries to it "
      "are dropped while it stays full",
      webhook, queue.pending);
}

void MemoryDeliveryStore::enqueue_locked(Record& record, bool ready) {
  QueueEntry entry{record.delivery.id, ++record.queue_generation};
  auto& queue = queues_[record.delivery.webhook];
  if (ready) {
    queue.ready.push_back(std::move(entry));
  } else {
    queue.delayed.push({record.delivery.next_attempt_ms, ++sequence_, std::move(entry)});
  }
}

bool MemoryDeliveryStore::is_live_locked(const QueueEntry& entry) const {
  auto it = records_.find(entry.id);
  return it != records_.end() && it->second.queue_generation == entry.generation &&
         !it->second.claimed && it->second.delivery.state == DeliveryState::Pending;
}

void MemoryDeliveryStore::drop_stale_locked(WebhookQueue& queue) {
  while (!queue.ready.empty() && !is_live_locked(queue.ready.front())) queue.ready.pop_front();
  while (!queue.delayed.empty() && !is_live_locked(queue.delayed.top().entry)) queue.delayed.pop();
}

void MemoryDeliveryStore::promote_due_locked(WebhookQueue& queue, int64_t now_ms) {
  drop_stale_locked(queue);
  while (!queue.delayed.empty() && queue.delayed.top().due_ms <= now_ms) {
    QueueEntry entry = queue.delayed.top().entry;
    queue.delayed.pop();
    if (is_live_locked(entry)) queue.ready.push_back(std::move(entry));
    drop_stale_locked(queue);
  }
}

void MemoryDeliveryStore::retire_locked(const std::string& id, DeliveryState state) {
  auto& record = records_.at(id);
  record.delivery.state = state;
  record.claimed = false;
  --pending_;
  auto& queue = queues_[record.delivery.webhook];
  --queue.pending;
  if (queue.full && queue.pending <= max_pending_per_webhook_ - max_pending_per_webhook_ / 4) {
    spdlog::info(
        "webhook {}: memory queue down to {} pending; {} deliveries were dropped while it "
        "was full",
        record.delivery.webhook, queue.pending, queue.dropped_while_full);
    queue.full = false;
    queue.dropped_while_full = 0;
  }
  auto& order = state == DeliveryState::Delivered ? delivered_order_ : dead_order_;
  const size_t keep = state == DeliveryState::Delivered ? keep_delivered_ : keep_dead_;
  order.push_back(id);
  while (order.size() > keep) {
    auto it = records_.find(order.front());
    // A replayed delivery may have moved on since it was listed here; only trim true leftovers.
    if (it != records_.end() && it->second.delivery.state == state) records_.erase(it);
    order.pop_front();
  }
}

std::optional<std::vector<std::string>> MemoryDeliveryStore::take_ready_webhooks() {
  std::lock_guard lock(mu_);
  return ready_.take([&](const std::string& webhook) -> bool* {
    auto it = queues_.find(webhook);
    return it == queues_.end() ? nullptr : &it->second.listed_ready;
  });
}

void MemoryDeliveryStore::notify_ready() {
  std::function<void()> callback;
  {
    std::lock_guard lock(mu_);
    callback = on_ready_;
  }
  if (callback) callback();  // outside the lock: the callback may call back into the store
}

Status MemoryDeliveryStore::add(std::vector<Delivery> batch) {
  bool any_pending = false;
  {
    std::lock_guard lock(mu_);
    // Validate first so a batch is accepted whole or not at all.
    std::set<std::string_view> batch_ids;
    for (const auto& delivery : batch) {
      if (delivery.id.empty() || delivery.webhook.empty())
        return make_error("delivery without an id or a webhook");
      if (records_.count(delivery.id) > 0 || !batch_ids.insert(delivery.id).second)
        return make_error("duplicate delivery id " + delivery.id);
    }
    for (auto& delivery : batch) {
      const bool pending = delivery.state == DeliveryState::Pending;
      const bool ready = delivery.next_attempt_ms <= 0;
      std::string id = delivery.id;
      // Node-based map: the reference survives the insertions below.
      WebhookQueue* queue = pending ? &queues_[delivery.webhook] : nullptr;
      if (queue != nullptr) register_dropped_counter(delivery.webhook, *queue);
      if (queue != nullptr && max_pending_per_webhook_ > 0 &&
          queue->pending >= max_pending_per_webhook_) {
        drop_locked(delivery.webhook, *queue);
        continue;
      }
      auto& record = records_.emplace(id, Record{std::move(delivery)}).first->second;
      if (pending) {
        ++pending_;
        ++queue->pending;
        any_pending = true;
        enqueue_locked(record, ready);
        ready_.name(queue->listed_ready, record.delivery.webhook);
      } else {
        auto& order =
            record.delivery.state == DeliveryState::Delivered ? delivered_order_ : dead_order_;
        order.push_back(id);
      }
    }
  }
  if (any_pending) notify_ready();
  return {};
}

std::vector<Delivery> MemoryDeliveryStore::claim_due(const std::string& webhook, int64_t now_ms,
                                                     size_t limit) {
  std::vector<Delivery> claimed;
  std::lock_guard lock(mu_);
  auto it = queues_.find(webhook);
  if (it == queues_.end()) return claimed;
  auto& queue = it->second;
  promote_due_locked(queue, now_ms);
  while (claimed.size() < limit && !queue.ready.empty()) {
    QueueEntry entry = std::move(queue.ready.front());
    queue.ready.pop_front();
    if (!is_live_locked(entry)) continue;
    auto& record = records_.at(entry.id);
    record.claimed = true;
    claimed.push_back(record.delivery);
  }
  return claimed;
}

void MemoryDeliveryStore::complete(const Delivery& delivery, const AttemptOutcome& outcome) {
  std::lock_guard lock(mu_);
  auto it = records_.find(delivery.id);
  if (it == records_.end() || !it->second.claimed) return;  // not ours to complete
  auto& record = it->second;
  record.claimed = false;
  record.delivery.attempts += 1;
  switch (outcome.kind) {
    case AttemptOutcome::Kind::Delivered:
      record.delivery.last_error.clear();
      retire_locked(delivery.id, DeliveryState::Delivered);
      break;
    case AttemptOutcome::Kind::Retry:
      record.delivery.last_error = outcome.error;
      record.delivery.next_attempt_ms = outcome.next_attempt_ms;
      enqueue_locked(record, /*ready=*/false);
      break;
    case AttemptOutcome::Kind::Dead:
      record.delivery.last_error = outcome.error;
      retire_locked(delivery.id, DeliveryState::Dead);
      break;
  }
}

void MemoryDeliveryStore::release(const Delivery& delivery) {
  std::lock_guard lock(mu_);
  auto it = records_.find(delivery.id);
  if (it == records_.end() || !it->second.claimed) return;
  auto& record = it->second;
  record.claimed = false;
  // Back to the head of the line: it was the oldest due delivery when it was claimed.
  queues_[record.delivery.webhook].ready.push_front(
      {record.delivery.id, ++record.queue_generation});
}

std::optional<int64_t> MemoryDeliveryStore::next_due(const std::string& webhook) {
  std::lock_guard lock(mu_);
  auto it = queues_.find(webhook);
  if (it == queues_.end()) return std::nullopt;
  auto& queue = it->second;
  drop_stale_locked(queue);
  std::optional<int64_t> earliest;
  // Ready entries were due when they entered the FIFO, so the head stands for all of them.
  if (!queue.ready.empty()) earliest = records_.at(queue.ready.front().id).delivery.next_attempt_ms;
  if (!queue.delayed.empty()) {
    int64_t due = queue.delayed.top().due_ms;
    earliest = earliest ? std::min(*earliest, due) : due;
  }
  return earliest;
}

size_t MemoryDeliveryStore::pending_count() {
  std::lock_guard lock(mu_);
  return pending_;
}

std::map<std::string, size_t> MemoryDeliveryStore::pending_by_webhook() {
  std::map<std::string, size_t> out;
  std::lock_guard lock(mu_);
  for (const auto& [name, queue] : queues_)
    if (queue.pending > 0) out[name] = queue.pending;
  return out;
}

uint64_t MemoryDeliveryStore::dropped_count() {
  std::lock_guard lock(mu_);
  return dropped_;
}

void MemoryDeliveryStore::set_on_ready(std::function<void()> on_ready) {
  std::lock_guard lock(mu_);
  on_ready_ = std::move(on_ready);
  ready_.name_all();  // a new listener: whatever is pending
}

std::vector<Delivery> MemoryDeliveryStore::list(std::optional<DeliveryState> state,
                                                const std::string& webhook, size_t limit) {
  std::vector<Delivery> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, record] : records_) {
    if (limit > 0 && out.size() >= limit) break;
    if (state && record.delivery.state != *state) continue;
    if (!webhook.empty() && record.delivery.webhook != webhook) continue;
    out.push_back(record.delivery);
  }
  return out;
}

std::optional<Delivery> MemoryDeliveryStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return std::nullopt;
  return it->second.delivery;
}

Result<size_t> MemoryDeliveryStore::replay(const std::vector<std::string>& ids) {
  size_t moved = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& id : ids) {
      auto it = records_.find(id);
      if (it == records_.end() || it->second.delivery.state != DeliveryState::Dead) continue;
      auto& delivery = it->second.delivery;
      delivery.state = DeliveryState::Pending;
      delivery.attempts = 0;
      delivery.next_attempt_ms = 0;
      ++pending_;
      auto& queue = queues_[delivery.webhook];
      ++queue.pending;
      enqueue_locked(it->second, /*ready=*/true);
      ready_.name(queue.listed_ready, delivery.webhook);
      ++moved;
    }
    // Off the dead list: dying again lists it anew, and a stale entry would count against
    // keep_dead and, once it reached the front, trim the delivery dead again for its newer turn.
    if (moved > 0) {
      std::erase_if(dead_order_, [&](const std::string& id) {
        auto it = records_.find(id);
        return it != records_.end() && it->second.delivery.state != DeliveryState::Dead;
      });
    }
  }
  if (moved > 0) notify_ready();
  return moved;
}

}  // namespace hookgate::webhooks
