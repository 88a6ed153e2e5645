#pragma once
// A bare ZeroMQ XPUB connected to a gateway's bus, for tests that send frames the publisher
// library would never produce (raw sequence numbers, malformed messages, filtered topics).
#include <zmq.hpp>

#include <string>

namespace hookgate::testing {

// Connects `pub` (an XPUB of any context) to `endpoint` and waits up to 5 s for the gateway's
// subscription, so that what is sent next is not dropped. False if none arrived.
[[nodiscard]] bool connect_raw_publisher(zmq::socket_t& pub, const std::string& endpoint);

}  // namespace hookgate::testing
