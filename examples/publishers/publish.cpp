// Publishing from C++ with the hookgate client library (bus/publisher.hpp).
//   build: part of the project's CMake (target example_publisher)
//   run:   ./example_publisher tcp://127.0.0.1:5556
#include <cstdio>

#include "bus/publisher.hpp"

int main(int argc, char** argv) {
  const char* endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:5556";
  auto pub = hookgate::bus::Publisher::connect({.endpoints = {endpoint}, .source = "cpp-example"});
  if (!pub) return std::fprintf(stderr, "%s\n", pub.error().message.c_str()), 1;
  if (!pub.value()->wait_for_subscriber(std::chrono::seconds(5), "deploy.finished"))
    return std::fprintf(stderr, "no subscriber on %s\n", endpoint), 1;
  if (auto st = pub.value()->publish("deploy.finished", R"({"service":"api","version":"1.4.2"})");
      !st)
    return std::fprintf(stderr, "%s\n", st.error().message.c_str()), 1;
  std::printf("%s\n", pub.value()->last_id().c_str());
  return 0;
}
