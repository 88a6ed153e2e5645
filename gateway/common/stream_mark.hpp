#pragma once
// A publisher stream's last sequence number seen on the bus (bus::SequenceGaps), carried from one
// run to the next start by the durable spool (after a crash too), so numbers published in
// between and never received count as lost. Shared by bus/ (which counts) and webhooks/ (which
// keeps them).
#include <cstdint>
#include <string>
#include <vector>

namespace hookgate {

struct StreamMark {
  std::string stream;
  uint64_t seq = 0;
  // Unix ms when a gateway last saw the stream: a mark no gateway has seen for long is dropped
  // (its publisher is gone, or another gateway took its messages meanwhile).
  int64_t seen_ms = 0;
  bool operator==(const StreamMark&) const = default;
  bool operator<(const StreamMark& o) const { return stream < o.stream; }
};
using StreamMarks = std::vector<StreamMark>;

}  // namespace hookgate
