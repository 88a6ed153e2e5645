// hookgate-bench-curl-ceiling: what ONE thread driving ONE libcurl multi handle can push to the
// sink on this machine, with no hookgate code in the loop: the ceiling of the dispatcher's design.
//
//   hookgate-bench-curl-ceiling URL COUNT [CONCURRENCY=16] [HEADERS=9] [REUSE=reset|keep]
//
// COUNT keep-alive POSTs of a ~425-byte body, CONCURRENCY in flight, each carrying HEADERS custom
// headers shaped like hookgate's (User-Agent, Content-Type, X-Hookgate-*, X-Signature, webhook-*,
// "Expect:"), precomputed (no signing). REUSE=reset re-initializes each easy handle with
// curl_easy_reset and sets the options again per request, as the dispatcher does; keep sets them
// once per handle and only swaps the header list.
//
// Prints one JSON line: {"requests":N,"elapsed_s":…,"rate_per_s":…,"cpu_s":…,"cpu_us_per_req":…}
#include <curl/curl.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

size_t discard(char*, size_t size, size_t n, void*) {
  return size * n;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: hookgate-bench-curl-ceiling URL COUNT [CONCURRENCY] [HEADERS] [reset|keep]\n");
    return 2;
  }
  std::string url = argv[1];
  long count = std::atol(argv[2]);
  int concurrency = argc > 3 ? std::atoi(argv[3]) : 16;
  int nheaders = argc > 4 ? std::atoi(argv[4]) : 9;
  bool reset = !(argc > 5 && std::strcmp(argv[5], "keep") == 0);

  std::string body =
      "{\"specversion\":\"1.0\",\"id\":\"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\",\"source\":"
      "\"unknown\","
      "\"type\":\"auth.failure\",\"time\":\"2024-01-01T00:00:00.000Z\",\"datacontenttype\":"
      "\"application/json\",\"data\":{\"user\":\"alice.smith@example.com\",\"ip\":\"203.0.113.42\","
      "\"reason\":\"invalid_password\",\"user_agent\":\"Mozilla/5.0 (X11; Linux x86_64) "
      "AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36\",\"seq\":1}}";
  body.resize(425, ' ');
  const std::vector<std::string> all_headers = {
      "User-Agent: hookgate/0.1.0",
      "Content-Type: application/cloudevents+json",
      "X-Hookgate-Event: auth.failure",
      "X-Hookgate-Delivery: msg_2Lg0123456789abcdefghijkl",
      "X-Signature: sha256=5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592",
      "webhook-id: msg_2Lg0123456789abcdefghijkl",
      "webhook-timestamp: 1700000000",
      "webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
      "Expect:",
  };

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(concurrency));
  std::vector<CURL*> handles;
  std::vector<curl_slist*> lists;
  auto make_headers = [&] {
    curl_slist* h = nullptr;
    for (int i = 0; i < nheaders && i < static_cast<int>(all_headers.size()); ++i)
      h = curl_slist_append(h, all_headers[static_cast<size_t>(i)].c_str());
    return h;
  };
  auto configure = [&](CURL* e, curl_slist* h) {
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &discard);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &discard);
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  };
  long started = 0, done = 0, failed = 0;
  auto start_one = [&](CURL* e) {
    curl_slist* h = make_headers();  // a fresh list per request, as the dispatcher builds one
    if (reset) {
      curl_easy_reset(e);
      configure(e, h);
    } else {
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    }
    curl_easy_setopt(e, CURLOPT_PRIVATE, h);
    curl_multi_add_handle(multi, e);
    ++started;
  };
  for (int i = 0; i < concurrency; ++i) {
    CURL* e = curl_easy_init();
    configure(e, nullptr);
    handles.push_back(e);
  }
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_seconds();
  for (CURL* e : handles)
    if (started < count) start_one(e);
  while (done < count) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      CURL* e = m->easy_handle;
      if (m->data.result != CURLE_OK) ++failed;
      curl_slist* h = nullptr;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, reinterpret_cast<char**>(&h));
      curl_multi_remove_handle(multi, e);
      curl_slist_free_all(h);
      ++done;
      if (started < count) start_one(e);
    }
    if (done < count) curl_multi_poll(multi, nullptr, 0, 100, nullptr);
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  std::printf(
      "{\"requests\":%ld,\"failed\":%ld,\"elapsed_s\":%.4f,\"rate_per_s\":%.1f,\"cpu_s\":%.3f,"
      "\"cpu_us_per_req\":%.2f,\"concurrency\":%d,\"headers\":%d,\"reuse\":\"%s\"}\n",
      done, failed, elapsed, static_cast<double>(done) / elapsed, cpu,
      cpu * 1e6 / static_cast<double>(done), concurrency, nheaders, reset ? "reset" : "keep");
  for (CURL* e : handles) curl_easy_cleanup(e);
  curl_multi_cleanup(multi);
  curl_global_cleanup();
  return failed == 0 ? 0 : 1;
}
