#include "tests/support/raw_publisher.hpp"

namespace hookgate::testing {

bool connect_raw_publisher(zmq::socket_t& pub, const std::string& endpoint) {
  pub.set(zmq::sockopt::linger, 5000);
  pub.set(zmq::sockopt::rcvtimeo, 5000);
  pub.connect(endpoint);
  zmq::message_t subscription;
  return pub.recv(subscription).has_value();
}

}  // namespace hookgate::testing
