#pragma once
#include <string>

namespace hookgate {

// A UUIDv7 string: unique and time-ordered, so event ids sort by arrival.
std::string new_uuid_v7();
// A delivery id in the Standard Webhooks "msg_" style; stable across retries and restarts.
std::string new_delivery_id();

}  // namespace hookgate
