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
  if (seq <= it->second) return 0;
  const uint64_t gap = seq - it->second - 1;
  it->second = seq;
  return gap;
}

}  // namespace hookgate::bus
