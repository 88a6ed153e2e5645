#include "bus/sequence_gaps.hpp"

namespace hookgate::bus {

uint64_t SequenceGaps::observe(std::string_view stream, uint64_t seq) {
  auto it = last_.find(stream);
  if (it == last_.end()) {
    // Unknown stream: the gateway (re)started or the publisher is new. Numbers before this one
    // may have gone to an earlier gateway instance, so nothing is counted.
    if (last_.size() >= kMaxStreams) last_.clear();
    last_.emplace(std::string(stream), seq);
    return 0;
  }
  const uint64_t last = it->second;
  // A jump no queue could explain (a third-party publisher that restarted with the same stream
  // id, or a bogus number) starts the stream over instead of counting millions as lost, or
  // hiding the real gaps below the old maximum.
  if ((seq > last && seq - last > kMaxPlausibleGap) || (seq < last && last - seq > kMaxLateness)) {
    it->second = seq;
    return 0;
  }
  if (seq <= last) return 0;  // repeated or late (the same stream over two paths)
  it->second = seq;
  return seq - last - 1;
}

std::vector<std::pair<std::string, uint64_t>> SequenceGaps::marks() const {
  return {last_.begin(), last_.end()};
}

void SequenceGaps::restore(const std::vector<std::pair<std::string, uint64_t>>& marks) {
  for (const auto& [stream, seq] : marks) {
    if (last_.size() >= kMaxStreams) return;
    if (stream.empty() || stream.size() > kMaxStreamIdBytes) continue;
    last_.emplace(stream, seq);  // a stream seen already keeps its own number
  }
}

}  // namespace hookgate::bus
