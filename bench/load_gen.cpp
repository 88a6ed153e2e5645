// hookgate-bench-load: publishes benchmark events through the C++ client library
// (bus/publisher.hpp).
//
//   hookgate-bench-load ENDPOINT COUNT RATE TYPE [--admin-port P] [--counter NAME]
//                      [--poll-ms MS] [--timeout-s S] [--published-file F] [--handshake P]
//
// RATE 0 = as fast as the publisher goes (a full send queue is retried, never dropped: the
// Publisher's XPUB socket uses ZMQ_XPUB_NODROP and reports "send_hwm reached"); RATE > 0 paces
// the sends at fixed absolute deadlines start + i/RATE on the steady clock, so late sends never
// accumulate drift. Every event's data carries "sent_ns" (bench/bench_payload.hpp) taken right
// before publish().
//
// With --admin-port, a second thread polls the gateway's /metrics every --poll-ms (10) for COUNTER
// (--counter, default hookgate_events_received_total) from before the first send, and the program
// waits (before closing its socket) until that counter has grown by COUNT: nothing is still queued
// in the publisher when it exits (ZeroMQ's linger would otherwise cap the flush at 5 s), and the
// counter's growth rate is reported (gateway_rate_per_s: from the first poll that saw it grow to
// the first poll that saw it complete), which is how bench/run measures ingest with
// --counter hookgate_events_accepted_total. With --published-file, it
// creates that file as soon as the last event is handed to ZeroMQ (bench/run resumes a stopped
// receiver then, to measure how fast it drains a queued backlog). With --handshake P, once the
// subscriber is connected it creates P.ready and waits for P.go before the first send (bench/run
// stops the receiver in between, so the whole run queues up).
//
// Prints one JSON line: {"published":N,"elapsed_s":…,"rate_per_s":…,"full_retries":…,
// "late_sends":…,"max_lateness_us":…,"envelope_bytes":…}
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "bench/bench_payload.hpp"
#include "bus/publisher.hpp"
#include "gateway/event.hpp"

namespace {

// GET http://127.0.0.1:port/metrics → the value of an unlabelled counter, or -1.
double scrape_counter(int port, const std::string& name) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    return -1;
  }
  std::string resp;
  char buf[16384];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  std::string key = "\n" + name + " ";
  size_t p = resp.find(key);
  if (p == std::string::npos) return -1;
  return std::strtod(resp.c_str() + p + key.size(), nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: hookgate-bench-load ENDPOINT COUNT RATE TYPE [--admin-port P] [--counter "
                 "NAME] [--poll-ms MS] [--timeout-s S] [--published-file F] [--handshake P]\n");
    return 2;
  }
  std::string endpoint = argv[1];
  uint64_t count = std::strtoull(argv[2], nullptr, 10);
  double rate = std::strtod(argv[3], nullptr);
  std::string type = argv[4];
  int admin_port = 0;
  int timeout_s = 120;
  std::string published_file;
  std::string counter = "hookgate_events_received_total";
  std::string handshake;
  int poll_ms = 10;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--admin-port") == 0) admin_port = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--timeout-s") == 0) timeout_s = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--published-file") == 0) published_file = argv[i + 1];
    if (std::strcmp(argv[i], "--counter") == 0) counter = argv[i + 1];
    if (std::strcmp(argv[i], "--handshake") == 0) handshake = argv[i + 1];
    if (std::strcmp(argv[i], "--poll-ms") == 0) poll_ms = std::max(1, std::atoi(argv[i + 1]));
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const clockid_t clk = hookgate::bench::bench_clock();
  hookgate::bench::PayloadBuilder payload(type);

  // The actual envelope size, for the report.
  size_t envelope_bytes = 0;
  {
    hookgate::Event ev;
    ev.set_string("type", type);
    ev.set_string("source", "unknown");
    auto data = hookgate::Event::parse(
        std::string("{\"d\":") + std::string(payload.build(12345, hookgate::bench::now_ns(clk))) +
        "}");
    if (!data) {
      std::fprintf(stderr, "payload is not JSON: %s\n", data.error().message.c_str());
      return 1;
    }
    ev.doc().AddMember("data", hookgate::JsonValue(data->doc()["d"], ev.allocator()),
                       ev.allocator());
    (void)ev.normalize(1700000000000);
    envelope_bytes = ev.to_json().size();
  }

  // The gateway-side counter poller.
  std::atomic<bool> poll_stop{false};
  std::atomic<bool> drained{admin_port == 0};
  double g_first_value = 0, g_last_value = 0;
  std::chrono::steady_clock::time_point g_first_t, g_last_t;
  std::thread poller;
  if (admin_port) {
    double base = scrape_counter(admin_port, counter);
    if (base < 0) base = 0;  // the counter appears with its first increment
    poller = std::thread([&, base] {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
      bool seen = false;
      while (!poll_stop && std::chrono::steady_clock::now() < deadline) {
        double v = scrape_counter(admin_port, counter);
        auto t = std::chrono::steady_clock::now();
        if (v > base && !seen) {
          seen = true;
          g_first_value = v - base;
          g_first_t = t;
        }
        if (v >= 0 && v - base >= static_cast<double>(count)) {
          g_last_value = v - base;
          g_last_t = t;
          drained = true;
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
      }
    });
  }

  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "hookgate-bench-load: %s\n", why.c_str());
    poll_stop = true;
    if (poller.joinable()) poller.join();
    return 1;
  };
  auto pub = hookgate::bus::Publisher::connect({.endpoints = {endpoint}});
  if (!pub) return fail("connect: " + pub.error().message);
  auto& p = *pub.value();
  if (!p.wait_for_subscriber(std::chrono::seconds(10)))
    return fail("no subscriber on " + endpoint + " after 10 s");
  if (!handshake.empty()) {
    if (FILE* f = std::fopen((handshake + ".ready").c_str(), "w")) std::fclose(f);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (access((handshake + ".go").c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return fail("no " + handshake + ".go");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto period =
      rate > 0 ? std::chrono::duration<double>(1.0 / rate) : std::chrono::duration<double>(0);
  uint64_t full_retries = 0, late = 0;
  double max_late_us = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (rate > 0) {
      auto due =
          start + std::chrono::duration_cast<clock::duration>(period * static_cast<double>(i));
      auto now = clock::now();
      if (now < due) {
        // No spinning: on a 2-core box a spinning publisher would steal the gateway's CPU. Timer
        // slack is cut to 1 ns at start instead (PR_SET_TIMERSLACK), so wake-ups are on time.
        std::this_thread::sleep_until(due);
      } else {
        double l = std::chrono::duration<double, std::micro>(now - due).count();
        if (l > 100) ++late;
        max_late_us = std::max(max_late_us, l);
      }
    }
    while (true) {
      auto st = p.publish(type, payload.build(i, hookgate::bench::now_ns(clk)));
      if (st) break;
      if (st.error().message.find("send_hwm") == std::string::npos)
        return fail("publish " + std::to_string(i) + ": " + st.error().message);
      ++full_retries;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  double elapsed = std::chrono::duration<double>(clock::now() - start).count();
  if (!published_file.empty()) {
    if (FILE* f = std::fopen(published_file.c_str(), "w")) std::fclose(f);
  }

  if (poller.joinable()) poller.join();
  if (!drained)
    std::fprintf(stderr, "gateway's %s did not grow by %llu within %d s\n", counter.c_str(),
                 static_cast<unsigned long long>(count), timeout_s);
  double g_span = drained && g_last_value > g_first_value
                      ? std::chrono::duration<double>(g_last_t - g_first_t).count()
                      : 0;
  double g_rate = g_span > 0 ? (g_last_value - g_first_value) / g_span : 0;
  std::printf(
      "{\"published\":%llu,\"elapsed_s\":%.6f,\"rate_per_s\":%.1f,\"full_retries\":%llu,"
      "\"late_sends\":%llu,\"max_lateness_us\":%.1f,\"envelope_bytes\":%zu,\"drained\":%s,"
      "\"gateway_span_s\":%.4f,\"gateway_rate_per_s\":%.1f}\n",
      static_cast<unsigned long long>(count), elapsed,
      elapsed > 0 ? static_cast<double>(count) / elapsed : 0,
      static_cast<unsigned long long>(full_retries), static_cast<unsigned long long>(late),
      max_late_us, envelope_bytes, drained ? "true" : "false", g_span, g_rate);
  std::fflush(stdout);
  return 0;
}
