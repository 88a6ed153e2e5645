// Links the installed publisher library and uses it: with no gateway at the endpoint, publish()
// must fail with "no subscriber" (nothing was sent), not crash or claim success.
#include <cstdio>
#include <string>

#include "bus/publisher.hpp"

int main() {
  auto pub = hookgate::bus::Publisher::connect({.endpoints = {"tcp://127.0.0.1:1"}});
  if (!pub) {
    std::fprintf(stderr, "connect: %s\n", pub.error().message.c_str());
    return 1;
  }
  auto sent = pub.value()->publish("app.installed", R"({"ok":true})");
  if (sent || sent.error().message.find("no subscriber") == std::string::npos) {
    std::fprintf(stderr, "publish() without a gateway did not fail with 'no subscriber'\n");
    return 1;
  }
  std::puts("installed client library links and runs");
  return 0;
}
