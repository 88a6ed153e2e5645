#pragma once
// The bus wire format (PRODUCT.md "Events", pinned): a ZeroMQ multipart message of two frames,
// [event type, JSON envelope], so SUB prefix filters select by type. A single frame holding only
// the JSON is accepted too.
#include <zmq.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/common/result.hpp"
#include "gateway/event.hpp"

namespace hookgate::bus {

// The frames of a bus message (topic, envelope); the subscriber's read_all keeps one more at most.
inline constexpr size_t kMaxMessageFrames = 2;

// Why a message was refused; `reason` is safe to log (it quotes at most a short prefix).
struct Rejection {
  std::string reason;
  std::string event_type;  // when it could be read
  std::string event_id;
  // The publisher library's stream stamp, when the envelope parsed and carried one: a rejected
  // message still arrived, so its number is no gap.
  std::string stream;
  std::optional<uint64_t> sequence;
};

// The publisher library's stamp on `event` (kStreamAttribute, kSequenceAttribute), if it has a
// well-formed one: a stream id of at most kMaxStreamIdBytes (the library's is a 36-character
// UUID; a longer one is ignored, since the gateway keeps each stream id it sees). The view points
// into the event.
struct StreamStamp {
  std::string_view stream;
  uint64_t sequence;
};
std::optional<StreamStamp> stream_stamp(const Event& event);

// Decodes and normalizes one received message. With two frames the topic must equal the envelope's
// `type`, or stand in for it when the envelope has none.
Result<Event, Rejection> decode_message(std::vector<zmq::message_t>& frames,
                                        size_t max_message_bytes, int64_t now_unix_ms);

// The two frames for `event` (which must already be normalized).
void encode_message(const Event& event, std::vector<zmq::message_t>& frames);

}  // namespace hookgate::bus
