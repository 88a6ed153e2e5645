// The test receiver is itself tested: dispatcher and integration tests are only as trustworthy as
// the endpoint they talk to.
#include "tests/support/http_receiver.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "gateway/common/clock.hpp"
#include "tests/support/loopback.hpp"

namespace hookgate::testing {
namespace {

using std::chrono::milliseconds;

struct CurlResponse {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  std::string headers;
};

size_t append_to_string(char* data, size_t size, size_t count, void* userp) {
  static_cast<std::string*>(userp)->append(data, size * count);
  return size * count;
}

// One POST on an existing easy handle (so keep-alive can be observed across calls).
CurlResponse post(CURL* easy, const std::string& url, const std::string& body,
                  curl_slist* headers = nullptr, long timeout_ms = 5000) {
  CurlResponse response;
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &append_to_string);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &append_to_string);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &response.headers);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  response.code = curl_easy_perform(easy);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

struct EasyHandle {
  EasyHandle() : easy(curl_easy_init()) {}
  ~EasyHandle() { curl_easy_cleanup(easy); }
  CURL* easy;
};

std::string read_until(int fd, const std::string& marker, size_t occurrences) {
  std::string data;
  char buffer[4096];
  auto found = [&] {
    size_t n = 0;
    for (size_t pos = data.find(marker); pos != std::string::npos;
         pos = data.find(marker, pos + marker.size()))
      ++n;
    return n >= occurrences;
  };
  while (!found()) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

TEST(HttpReceiverTest, RecordsRequestsWithLowerCasedHeaders) {
  HttpReceiver receiver;
  EXPECT_GT(receiver.port(), 0);
  EXPECT_EQ(receiver.url("/hook"), "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook");
  EasyHandle client;
  curl_slist* headers = curl_slist_append(nullptr, "X-Custom-Header: Value With Case");
  headers = curl_slist_append(headers, "Content-Type: application/json");
  auto response = post(client.easy, receiver.url("/hook?x=1"), R"({"a":1})", headers);
  curl_slist_free_all(headers);
  ASSERT_EQ(response.code, CURLE_OK);
  EXPECT_EQ(response.status, 200);

  ASSERT_EQ(receiver.count(), 1u);
  auto request = receiver.requests().at(0);
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.path, "/hook?x=1");
  EXPECT_EQ(request.body, R"({"a":1})");
  EXPECT_EQ(request.headers.at("x-custom-header"), "Value With Case");
  EXPECT_EQ(request.header("Content-Type"), "application/json");
  EXPECT_EQ(request.header("absent"), "");
  EXPECT_GT(request.received_ns, 0);
}

TEST(HttpReceiverTest, HandlerDecidesStatusBodyAndHeaders) {
  HttpReceiver receiver;
  receiver.set_handler([](const HttpReceiver::Request& request) {
    HttpReceiver::Response response;
    response.status = request.path == "/busy" ? 429 : 201;
    response.body = "echo:" + request.body;
    response.headers["Retry-After"] = "3";
    return response;
  });
  EasyHandle client;
  auto busy = post(client.easy, receiver.url("/busy"), "x");
  EXPECT_EQ(busy.status, 429);
  EXPECT_EQ(busy.body, "echo:x");
  EXPECT_NE(busy.headers.find("Retry-After: 3"), std::string::npos);
  EXPECT_EQ(post(client.easy, receiver.url("/other"), "y").status, 201);
}

TEST(HttpReceiverTest, KeepsConnectionsAlive) {
  HttpReceiver receiver;
  EasyHandle client;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post(client.easy, receiver.url(), "x").status, 200);
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].connection_id, requests[2].connection_id);
  EXPECT_EQ(receiver.connection_count(), 1u);
}

TEST(HttpReceiverTest, WaitForReturnsFalseOnTimeoutAndTrueWhenRequestsArrive) {
  HttpReceiver receiver;
  EXPECT_FALSE(receiver.wait_for(1, milliseconds(20)));
  std::thread client([&] {
    EasyHandle easy;
    post(easy.easy, receiver.url(), "x");
  });
  EXPECT_TRUE(receiver.wait_for(1, milliseconds(5000)));
  client.join();
}

TEST(HttpReceiverTest, DelayedAnswerDoesNotBlockOtherConnectionsAndStopCutsItShort) {
  auto receiver = std::make_unique<HttpReceiver>();
  receiver->set_handler([](const HttpReceiver::Request& request) {
    HttpReceiver::Response response;
    if (request.path == "/hang") response.delay = std::chrono::seconds(30);
    return response;
  });
  CURLcode hung_result = CURLE_OK;
  std::thread hung_client([&] {
    EasyHandle easy;
    hung_result = post(easy.easy, receiver->url("/hang"), "x", nullptr, 60000).code;
  });
  // Recorded on arrival, before the delay.
  ASSERT_TRUE(receiver->wait_for(1, milliseconds(5000)));

  EasyHandle other;
  const int64_t start = now_steady_ns();
  EXPECT_EQ(post(other.easy, receiver->url("/fast"), "y").status, 200);
  EXPECT_LT(now_steady_ns() - start, 10'000'000'000);  // not behind the 30 s hang

  const int64_t stop_start = now_steady_ns();
  receiver->stop();
  EXPECT_LT(now_steady_ns() - stop_start, 10'000'000'000);  // nor does stop() wait it out
  hung_client.join();
  EXPECT_NE(hung_result, CURLE_OK);  // the connection closed without an answer
  receiver.reset();                  // stop() twice (destructor) is fine
}

TEST(HttpReceiverTest, ParsesPipelinedChunkedAndExpectContinueRequests) {
  HttpReceiver receiver;
  int fd = connect_loopback(receiver.port());
  ASSERT_GE(fd, 0);
  const std::string pipelined =
      "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "POST /two HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: t\r\n\r\n";
  ASSERT_EQ(::send(fd, pipelined.data(), pipelined.size(), 0),
            static_cast<ssize_t>(pipelined.size()));
  std::string answers = read_until(fd, "HTTP/1.1 200 OK", 2);
  EXPECT_NE(answers.find("Content-Length: 0"), std::string::npos);

  const std::string expect_head =
      "POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n";
  ::send(fd, expect_head.data(), expect_head.size(), 0);
  EXPECT_NE(read_until(fd, "100 Continue", 1).find("HTTP/1.1 100 Continue"), std::string::npos);
  ::send(fd, "body", 4, 0);
  EXPECT_NE(read_until(fd, "200 OK", 1).find("200 OK"), std::string::npos);
  ::close(fd);

  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].path, "/one");
  EXPECT_EQ(requests[0].body, "abc");
  EXPECT_EQ(requests[1].path, "/two");
  EXPECT_EQ(requests[1].body, "Wikipedia");
  EXPECT_EQ(requests[2].body, "body");
  EXPECT_EQ(requests[0].connection_id, requests[2].connection_id);
}

TEST(HttpReceiverTest, ServesPythonClients) {
  if (std::system("python3 -c 'import urllib.request' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 not available";
  HttpReceiver receiver;
  receiver.set_handler([](const HttpReceiver::Request&) {
    HttpReceiver::Response response;
    response.status = 202;
    response.body = "accepted";
    return response;
  });
  // Unique per receiver port: parallel test runs must not share the script file.
  const std::string script_path =
      ::testing::TempDir() + "hookgate_receiver_client_" + std::to_string(receiver.port()) + ".py";
  {
    std::ofstream script(script_path);
    script << "import sys, urllib.request\n"
              "request = urllib.request.Request(sys.argv[1], data=b'{\"py\":true}',\n"
              "    headers={'Content-Type': 'application/json'}, method='POST')\n"
              "response = urllib.request.urlopen(request, timeout=10)\n"
              "sys.exit(0 if response.status == 202 and response.read() == b'accepted' else 1)\n";
  }
  const std::string command = "python3 " + script_path + " " + receiver.url("/py");
  EXPECT_EQ(std::system(command.c_str()), 0);
  std::remove(script_path.c_str());
  ASSERT_EQ(receiver.count(), 1u);
  EXPECT_EQ(receiver.requests()[0].body, R"({"py":true})");
  EXPECT_EQ(receiver.requests()[0].header("content-type"), "application/json");
}

}  // namespace
}  // namespace hookgate::testing
