#include "bus/sequence_gaps.hpp"

#include <algorithm>

namespace hookgate::bus {

uint64_t SequenceGaps::observe(std::string_view stream, uint64_t seq) {
  auto it = last_.find(stream);
  if (it == last_.end()) {
    // Unknown stream: the gateway (re)started or the publisher is new. Numbers before this one
    // may have gone to an earlier gateway instance, so nothing is counted.
    if (last_.size() >= kMaxStreams) {
      // What take_changed() owes still reaches the spool: those streams' marks in the file would
      // lag behind what was taken in, and a restart would count those numbers as lost. Replaced,
      // not added to, so it stays bounded when nobody takes (a gateway that writes no marks).
      owed_.clear();
      for (const auto& s : changed_)
        if (auto f = last_.find(s); f != last_.end())
          owed_.push_back({s, f->second.seq, f->second.restored_seen_ms});
      last_.clear();
      changed_.clear();
    }
    changed_.emplace_back(stream);
    last_.emplace(std::string(stream), Last{seq, 0});
    return 0;
  }
  if (!it->second.changed) {
    it->second.changed = true;
    changed_.push_back(it->first);
  }
  it->second.restored_seen_ms = 0;
  const uint64_t last = it->second.seq;
  // A jump no queue could explain (a third-party publisher that restarted with the same stream
  // id, or a bogus number) starts the stream over instead of counting millions as lost, or
  // hiding the real gaps below the old maximum.
  if ((seq > last && seq - last > kMaxPlausibleGap) || (seq < last && last - seq > kMaxLateness)) {
    it->second.seq = seq;
    return 0;
  }
  if (seq <= last) return 0;  // repeated or late (the same stream over two paths)
  it->second.seq = seq;
  return seq - last - 1;
}

StreamMarks SequenceGaps::marks(int64_t now_ms) const {
  StreamMarks out;
  out.reserve(last_.size());
  for (const auto& [stream, last] : last_)
    out.push_back({stream, last.seq, last.restored_seen_ms != 0 ? last.restored_seen_ms : now_ms});
  return out;
}

void SequenceGaps::restore(const StreamMarks& marks) {
  for (const auto& m : marks) {
    if (last_.size() >= kMaxStreams) return;
    if (m.stream.empty() || m.stream.size() > kMaxStreamIdBytes) continue;
    // A stream seen already keeps its own.
    if (last_.emplace(m.stream, Last{m.seq, m.seen_ms}).second) changed_.push_back(m.stream);
  }
}

StreamMarks SequenceGaps::take_changed(int64_t now_ms) {
  StreamMarks out = std::move(owed_);
  owed_.clear();
  const bool merge = !out.empty();
  for (auto& m : out)
    if (m.seen_ms == 0) m.seen_ms = now_ms;  // seen in this run, as below
  out.reserve(out.size() + changed_.size());
  for (const auto& stream : changed_) {
    auto it = last_.find(stream);
    if (it == last_.end()) continue;
    it->second.changed = false;
    const Last& last = it->second;
    out.push_back({stream, last.seq, last.restored_seen_ms != 0 ? last.restored_seen_ms : now_ms});
  }
  changed_.clear();
  if (merge) {
    // A stream seen again since the table started over is in both, and its first number since
    // may be a late one: the higher is kept, so the mark never moves back (a gap may be missed
    // after a crash, never invented).
    std::sort(out.begin(), out.end(), [](const StreamMark& a, const StreamMark& b) {
      return a.stream != b.stream ? a.stream < b.stream : a.seq > b.seq;
    });
    out.erase(
        std::unique(out.begin(), out.end(),
                    [](const StreamMark& a, const StreamMark& b) { return a.stream == b.stream; }),
        out.end());
  }
  return out;
}

}  // namespace hookgate::bus
