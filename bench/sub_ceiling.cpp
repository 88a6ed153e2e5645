// hookgate-bench-sub-ceiling: the raw ZeroMQ receive rate on this machine, the ceiling for the
// gateway's ingest. A plain SUB socket binds tcp://127.0.0.1:* (same rcvhwm as the gateway's
// default) and receives in a loop, touching nothing but the frames; the same C++ Publisher that
// hookgate-bench-load uses connects and sends the same ~400-byte events as fast as it can.
//
//   hookgate-bench-sub-ceiling COUNT [TYPE]        publisher and SUB loop in one process, live
//   hookgate-bench-sub-ceiling --sub-only COUNT    SUB loop only: prints its endpoint on the first
//                                                  stdout line, then receives COUNT messages from
//                                                  hookgate-bench-load (bench/run uses this for the
//                                                  "pre-queued" ceiling: the receiver is SIGSTOPped
//                                                  while the backlog is published, then resumed)
//
// Prints one JSON line: {"received":N,"span_s":…,"rate_per_s":…,"publish_rate_per_s":…}
// rate_per_s is measured at the receiver, first to last message.
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "bench/bench_payload.hpp"
#include "bus/publisher.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: hookgate-bench-sub-ceiling COUNT [TYPE] | --sub-only COUNT\n");
    return 2;
  }
  bool sub_only = std::string(argv[1]) == "--sub-only";
  if (sub_only && argc < 3) return 2;
  uint64_t count = std::strtoull(argv[sub_only ? 2 : 1], nullptr, 10);
  std::string type = !sub_only && argc > 2 ? argv[2] : "auth.failure";
  const clockid_t clk = hookgate::bench::bench_clock();

  zmq::context_t sub_ctx(1);
  zmq::socket_t sub(sub_ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::rcvhwm, 100000);
  sub.set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, sub_only ? 60000 : 10000);  // then give up, report what arrived
  sub.bind("tcp://127.0.0.1:*");
  std::string endpoint = sub.get(zmq::sockopt::last_endpoint);

  using clock = std::chrono::steady_clock;
  std::atomic<uint64_t> received{0};
  clock::time_point first, last;
  uint64_t bytes = 0;
  std::thread receiver([&] {
    zmq::message_t msg;
    uint64_t n = 0;
    while (n < count) {
      if (!sub.recv(msg)) break;
      bytes += msg.size();
      if (!msg.more()) {
        if (n == 0) first = clock::now();
        ++n;
        last = clock::now();
      }
    }
    received = n;
  });

  if (sub_only) {
    std::printf("%s\n", endpoint.c_str());
    std::fflush(stdout);
    receiver.join();
    uint64_t n = received.load();
    double span = n > 1 ? std::chrono::duration<double>(last - first).count() : 0;
    std::printf("{\"received\":%llu,\"span_s\":%.6f,\"rate_per_s\":%.1f,\"bytes\":%llu}\n",
                static_cast<unsigned long long>(n), span,
                span > 0 ? static_cast<double>(n - 1) / span : 0,
                static_cast<unsigned long long>(bytes));
    return n == count ? 0 : 1;
  }

  // The publisher has its own context (its own I/O thread), as a separate service would.
  auto pub = hookgate::bus::Publisher::connect({.endpoints = {endpoint}});
  if (!pub || !pub.value()->wait_for_subscriber(std::chrono::seconds(10))) {
    std::fprintf(stderr, "publisher could not connect to %s\n", endpoint.c_str());
    return 1;
  }
  hookgate::bench::PayloadBuilder payload(type);
  auto t0 = clock::now();
  uint64_t full = 0;
  for (uint64_t i = 0; i < count; ++i) {
    while (true) {
      auto st = pub.value()->publish(type, payload.build(i, hookgate::bench::now_ns(clk)));
      if (st) break;
      ++full;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  double pub_s = std::chrono::duration<double>(clock::now() - t0).count();
  receiver.join();
  uint64_t n = received.load();
  double span = n > 1 ? std::chrono::duration<double>(last - first).count() : 0;
  std::printf(
      "{\"received\":%llu,\"span_s\":%.6f,\"rate_per_s\":%.1f,\"publish_rate_per_s\":%.1f,"
      "\"full_retries\":%llu,\"bytes\":%llu}\n",
      static_cast<unsigned long long>(n), span, span > 0 ? static_cast<double>(n - 1) / span : 0,
      pub_s > 0 ? static_cast<double>(count) / pub_s : 0, static_cast<unsigned long long>(full),
      static_cast<unsigned long long>(bytes));
  return n == count ? 0 : 1;
}
