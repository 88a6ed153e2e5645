// The built-in HTTP/1.1 client against a scripted TCP server on loopback: response framings,
// keep-alive and its race, malformed and missing answers, timeouts, the SSRF guard. The
// dispatcher tests cover the ordinary paths through the HttpReceiver; these cover what a
// well-behaved server never does.
#include "webhooks/plain_http.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway/common/clock.hpp"
#include "tests/support/gateway_process.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/scripted_server.hpp"

namespace hookgate::webhooks {
namespace {

constexpr std::chrono::milliseconds kWait{10000};  // generous: CI machines are slow

using testing::answer_each;
using testing::ScriptedServer;
using testing::send_all;

class PlainHttpTest : public ::testing::Test {
 protected:
  PlainHttpClient::Request request(const std::string& url, int user,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    auto target = PlainHttpClient::target_for(url);
    EXPECT_TRUE(target.has_value()) << url;
    PlainHttpClient::Request r;
    r.user = reinterpret_cast<void*>(static_cast<intptr_t>(user));
    r.pool = 1;
    r.max_idle = 4;
    r.target = std::make_shared<const PlainHttpClient::Target>(*target);
    r.policy = policy_;
    r.headers = "X-Test: yes\r\n";
    r.body = std::make_shared<const std::string>(R"({"type":"user.created"})");
    r.deadline_ns = now_steady_ns() + std::chrono::nanoseconds(timeout).count();
    return r;
  }

  // Polls until `n` completions arrived or 15 s passed.
  std::vector<PlainHttpClient::Completion> run(size_t n) {
    std::vector<PlainHttpClient::Completion> done;
    const int64_t give_up = now_steady_ns() + 15'000'000'000;
    while (done.size() < n && now_steady_ns() < give_up) {
      pollfd p{client_.fd(), POLLIN, 0};
      ::poll(&p, 1, 10);
      client_.poll(now_steady_ns(), done);
    }
    return done;
  }

  AttemptResult one(PlainHttpClient::Request r) {
    client_.start(std::move(r));
    auto done = run(1);
    EXPECT_EQ(done.size(), 1u);
    return done.empty() ? AttemptResult{} : done.front().result;
  }

  std::shared_ptr<const AddressPolicy> policy_ = std::make_shared<const AddressPolicy>();
  PlainHttpClient client_;
};

TEST(PlainHttpTargetTest, ServesOnlyPlainHttpWithoutCredentials) {
  auto target = PlainHttpClient::target_for("http://127.0.0.1:8080/a/b?x=1&y=2#frag");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->host, "127.0.0.1");
  EXPECT_EQ(target->port, "8080");
  EXPECT_EQ(target->prefix, "POST /a/b?x=1&y=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n");

  auto v6 = PlainHttpClient::target_for("http://[::1]/");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "80");
  EXPECT_EQ(v6->prefix, "POST / HTTP/1.1\r\nHost: [::1]\r\n");

  auto bare = PlainHttpClient::target_for("http://siem.internal");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->prefix, "POST / HTTP/1.1\r\nHost: siem.internal\r\n");

  EXPECT_FALSE(PlainHttpClient::target_for("https://siem.example.com/"));
  EXPECT_FALSE(PlainHttpClient::target_for("http://user:pass@siem.internal/"));
  EXPECT_FALSE(PlainHttpClient::target_for("ftp://siem.internal/"));
  EXPECT_FALSE(PlainHttpClient::target_for("not a url"));
  // An international name is left to libcurl, which converts it to punycode; getaddrinfo here
  // would fail on the UTF-8 bytes every time.
  EXPECT_FALSE(
      PlainHttpClient::target_for("http://b\xc3\xbc"
                                  "cher.example/hook"));
}

TEST_F(PlainHttpTest, SendsTheRequestItComposedAndReadsTheStatus) {
  ScriptedServer server(answer_each("HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok"));
  AttemptResult result = one(request(server.url("/in?k=v"), 1));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 202);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0],
            "POST /in?k=v HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) +
                "\r\nX-Test: yes\r\nContent-Length: 23\r\n\r\n"
                R"({"type":"user.created"})");
}

TEST_F(PlainHttpTest, ChunkedResponsesWithTrailersKeepTheConnection) {
  ScriptedServer server(answer_each(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n"));
  for (int i = 0; i < 3; ++i) {
    AttemptResult result = one(request(server.url(), i));
    EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
    EXPECT_EQ(result.http_status, 200);
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(PlainHttpTest, ResponseArrivingByteByByteIsParsed) {
  ScriptedServer server([](ScriptedServer& s, int fd, int) {
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    while (!s.read(fd).empty()) {
      std::string response =
          "HTTP/1.1 503 Busy\r\nRetry-After:  7 \r\nContent-Length: 3\r\n\r\nbye";
      for (char c : response) {
        send_all(fd, std::string_view(&c, 1));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
  AttemptResult result = one(request(server.url(), 1));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 503);
  EXPECT_EQ(result.retry_after, "7");
}

// Found in review: the head's end was looked for as "\r\n\r\n" anywhere first, so bare-LF
// lines closed by a CRLF blank line were never seen to end (every attempt timed out and was
// sent again), and an LF-only head whose body held "\r\n\r\n" ended inside the body (each
// attempt waited out its timeout). The first empty line ends it, as libcurl reads it; also when
// it arrives a byte at a time.
TEST_F(PlainHttpTest, TheHeadEndsAtItsFirstEmptyLineWhateverItsLineEndings) {
  const std::string answers[] = {"HTTP/1.1 200 OK\nContent-Length: 0\n\r\n",
                                 "HTTP/1.1 201 Created\nContent-Length: 4\n\n\r\n\r\n",
                                 "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\nok"};
  ScriptedServer server([&](ScriptedServer& s, int fd, int) {
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    for (int i = 0; !s.read(fd).empty(); ++i) {
      const std::string& answer = answers[i % 3];
      if (i < 3) {
        send_all(fd, answer);
        continue;
      }
      for (char c : answer) {
        send_all(fd, std::string_view(&c, 1));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
  for (int i = 0; i < 6; ++i) {
    AttemptResult result = one(request(server.url(), i, std::chrono::seconds(3)));
    EXPECT_EQ(result.curl_code, CURLE_OK) << i << ": " << result.transport_error;
    EXPECT_EQ(result.http_status, 200 + i % 3) << i;
  }
  EXPECT_EQ(server.connections(), 1);  // every body was read to its end: the next answer fits
  EXPECT_EQ(server.requests().size(), 6u);
}

TEST_F(PlainHttpTest, InterimResponsesAreSkipped) {
  ScriptedServer server(
      answer_each("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                  "HTTP/1.1 204 No Content\r\n\r\n"));
  AttemptResult result = one(request(server.url(), 1));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 204);
}

TEST_F(PlainHttpTest, ConnectionCloseAndCloseDelimitedBodiesOpenANewConnection) {
  ScriptedServer server([](ScriptedServer& s, int fd, int index) {
    if (s.read(fd).empty()) return;
    if (index == 0) {
      send_all(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    } else {
      send_all(fd, "HTTP/1.0 200 OK\r\n\r\nbody until the close");
    }
    ::shutdown(fd, SHUT_WR);
  });
  AttemptResult first = one(request(server.url(), 1));
  AttemptResult second = one(request(server.url(), 2));
  EXPECT_EQ(first.http_status, 200) << first.transport_error;
  EXPECT_EQ(second.http_status, 200) << second.transport_error;
  EXPECT_EQ(second.curl_code, CURLE_OK);
  EXPECT_EQ(server.connections(), 2);
}

// Found in review: a folded header line (obs-fold) failed the answer as "bad header line", so a
// request the receiver had taken was retried, and delivered again; and of two Connection headers
// only the last counted, so a `close` in the first was missed.
TEST_F(PlainHttpTest, FoldedHeadersAndEveryConnectionHeaderAreHonoured) {
  ScriptedServer server([](ScriptedServer& s, int fd, int index) {
    if (s.read(fd).empty()) return;
    if (index == 0) {
      send_all(fd,
               "HTTP/1.1 200 OK\r\nX-Note: first part\r\n  second part\r\nConnection: close\r\n"
               "Connection: x-trace\r\nContent-Length: 0\r\n\r\n");
      // Answer nothing more on this connection: a client that kept it would hang on it.
      char sink[256];
      while (::read(fd, sink, sizeof sink) > 0) {
      }
      return;
    }
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  });
  AttemptResult first = one(request(server.url(), 1));
  EXPECT_EQ(first.http_status, 200) << first.transport_error;
  EXPECT_EQ(first.curl_code, CURLE_OK);
  AttemptResult second = one(request(server.url(), 2, std::chrono::seconds(3)));
  EXPECT_EQ(second.http_status, 200) << second.transport_error;
  EXPECT_EQ(server.connections(), 2);
}

// The keep-alive race: the server closes an idle connection just as a request is sent on it.
// The request goes out again on a new connection, and the attempt succeeds.
TEST_F(PlainHttpTest, AReusedConnectionClosedByTheServerIsResentOnANewOne) {
  ScriptedServer server([](ScriptedServer& s, int fd, int index) {
    if (index == 0) {
      if (s.read(fd).empty()) return;
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
      // Read the second request, then close without answering, as a server whose idle timer
      // fired at that moment does.
      s.read(fd);
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    while (!s.read(fd).empty()) send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });
  AttemptResult first = one(request(server.url(), 1));
  AttemptResult second = one(request(server.url(), 2));
  EXPECT_EQ(first.http_status, 200);
  EXPECT_EQ(second.curl_code, CURLE_OK) << second.transport_error;
  EXPECT_EQ(second.http_status, 201);
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests().size(), 3u);  // the second request arrived twice
}

// Found in review: a server that times an idle connection out may say so (408) before closing.
// That answer belongs to no request; the next request must not take it for its own.
TEST_F(PlainHttpTest, AnswerLeftOnAnIdleConnectionIsNotTakenForTheNextRequest) {
  std::atomic<bool> first_done{false};  // the client has the connection back in its pool
  std::atomic<bool> stray_sent{false};  // and the 408 is on its way (loopback: already queued)
  ScriptedServer server([&](ScriptedServer& s, int fd, int index) {
    if (index == 0) {
      if (s.read(fd).empty()) return;
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
      testing::wait_until([&] { return first_done.load(); }, kWait);
      send_all(fd,
               "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      ::shutdown(fd, SHUT_WR);
      stray_sent = true;
      return;
    }
    while (!s.read(fd).empty()) send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });
  AttemptResult first = one(request(server.url(), 1));
  EXPECT_EQ(first.http_status, 200);
  first_done = true;
  ASSERT_TRUE(testing::wait_until([&] { return stray_sent.load(); }, kWait));
  AttemptResult second = one(request(server.url(), 2));
  EXPECT_EQ(second.curl_code, CURLE_OK) << second.transport_error;
  EXPECT_EQ(second.http_status, 201);
  EXPECT_EQ(server.connections(), 2);
}

// Found in a receivers pass: a receiver that followed a 200 with a second, unasked response had
// the connection closed without a word; the stray is said now (a 408 before an idle close is
// routine, and is not).
TEST_F(PlainHttpTest, AStrayResponseOnAnIdleConnectionIsSaid) {
  for (const std::string stray : {"HTTP/1.1 200 stray\r\nContent-Length: 0\r\n\r\n",
                                  "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"}) {
    SCOPED_TRACE(stray);
    testing::LogCapture log;
    std::atomic<bool> first_done{false};
    std::atomic<bool> stray_sent{false};
    ScriptedServer server([&](ScriptedServer& s, int fd, int index) {
      if (index == 0) {
        if (s.read(fd).empty()) return;
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        testing::wait_until([&] { return first_done.load(); }, kWait);
        send_all(fd, stray);
        stray_sent = true;
        (void)s.read(fd);
        return;
      }
      while (!s.read(fd).empty()) send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
    });
    const int user = stray.find("408") == std::string::npos ? 1 : 3;
    EXPECT_EQ(one(request(server.url(), user)).http_status, 200);
    first_done = true;
    ASSERT_TRUE(testing::wait_until([&] { return stray_sent.load(); }, kWait));
    EXPECT_EQ(one(request(server.url(), user + 1)).http_status, 201);
    EXPECT_EQ(server.connections(), 2);
    EXPECT_EQ(log.lines_containing("sent bytes on an idle connection").size(),
              stray.find("408") == std::string::npos ? 1u : 0u);
  }
}

// A connection idle for over a second is looked at right before the send, even just after a
// poll() pass: a server whose keep-alive timer fires may speak in between. The test thread
// writes the stray answer itself, between the pass and the next request, so it lands inside
// the millisecond in which a pass would otherwise vouch for the connection.
TEST_F(PlainHttpTest, AStrayAnswerOnALongIdleConnectionIsSeenEvenRightAfterAPass) {
  std::atomic<int> first_fd{-1};
  std::atomic<bool> done{false};
  ScriptedServer server([&](ScriptedServer& s, int fd, int index) {
    if (index == 0) {
      if (s.read(fd).empty()) return;
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
      first_fd = fd;
      testing::wait_until([&] { return done.load(); }, kWait);  // keeps the fd open
      return;
    }
    while (!s.read(fd).empty()) send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });
  EXPECT_EQ(one(request(server.url(), 1)).http_status, 200);
  ASSERT_TRUE(testing::wait_until([&] { return first_fd.load() >= 0; }, kWait));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto second_request = request(server.url(), 2);
  std::vector<PlainHttpClient::Completion> none;
  client_.poll(now_steady_ns(), none);  // the pass: nothing has arrived yet
  send_all(first_fd.load(), "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n");
  client_.start(std::move(second_request));
  auto finished = run(1);
  done = true;
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished.front().result.curl_code, CURLE_OK) << finished.front().result.transport_error;
  EXPECT_EQ(finished.front().result.http_status, 201);
  EXPECT_EQ(server.connections(), 2);
}

// Edge-triggered epoll reports bytes once: a response that ends exactly where a full read buffer
// (16 KiB) ends may have more bytes queued behind it, which no later event would reveal.
TEST_F(PlainHttpTest, AResponseEndingAtAFullReadBufferDoesNotLeaveItsConnectionForReuse) {
  constexpr size_t kReadBuffer = 16384;  // PlainHttpClient::read_response's buffer
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 00000\r\n\r\n";
  const size_t body = kReadBuffer - head.size();
  head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body) + "\r\n\r\n";
  ASSERT_EQ(head.size() + body, kReadBuffer);
  const std::string exact = head + std::string(body, 'x');
  ScriptedServer server([&](ScriptedServer& s, int fd, int index) {
    if (index == 0) {
      if (s.read(fd).empty()) return;
      // The answer and a stray one in one write: both are queued before the client reads.
      send_all(fd, exact + "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n");
      s.read(fd);
      return;
    }
    while (!s.read(fd).empty()) send_all(fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
  });
  EXPECT_EQ(one(request(server.url(), 1)).http_status, 200);
  AttemptResult second = one(request(server.url(), 2));
  EXPECT_EQ(second.curl_code, CURLE_OK) << second.transport_error;
  EXPECT_EQ(second.http_status, 201);
  EXPECT_EQ(server.connections(), 2);
}

TEST_F(PlainHttpTest, ConcurrentRequestsToOneNameShareALookup) {
  ScriptedServer server(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  const std::string url = "http://localhost:" + std::to_string(server.port()) + "/";
  for (int i = 1; i <= 8; ++i) client_.start(request(url, i));
  auto done = run(8);
  ASSERT_EQ(done.size(), 8u);
  for (const auto& completion : done) {
    EXPECT_EQ(completion.result.curl_code, CURLE_OK) << completion.result.transport_error;
    EXPECT_EQ(completion.result.http_status, 200);
  }
}

TEST_F(PlainHttpTest, ANewConnectionClosedWithoutAnswerIsAnEmptyReply) {
  ScriptedServer server([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    ::shutdown(fd, SHUT_RDWR);
  });
  AttemptResult result = one(request(server.url(), 1));
  EXPECT_EQ(result.curl_code, CURLE_GOT_NOTHING);
  EXPECT_NE(result.transport_error.find("Empty reply"), std::string::npos);
  EXPECT_EQ(server.connections(), 1);  // not resent: the connection was new
}

TEST_F(PlainHttpTest, GarbageAndHeadsCutShortAreTransportErrors) {
  ScriptedServer garbage(answer_each("SSH-2.0-OpenSSH_9.2\r\n\r\n"));
  AttemptResult bad = one(request(garbage.url(), 1));
  EXPECT_EQ(bad.curl_code, CURLE_WEIRD_SERVER_REPLY);
  EXPECT_NE(bad.transport_error.find("bad status line"), std::string::npos);

  ScriptedServer truncated([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n");  // the head never ends
    ::shutdown(fd, SHUT_RDWR);
  });
  AttemptResult cut = one(request(truncated.url(), 2));
  EXPECT_EQ(cut.curl_code, CURLE_RECV_ERROR);
}

// Found in review: a 2xx whose body was cut short or malformed was a transport error and a
// retry, so the receiver got the event again. Its status is the outcome (the connection closes).
TEST_F(PlainHttpTest, AStatusWhoseBodyIsCutShortOrMalformedIsTheOutcome) {
  ScriptedServer truncated([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
    ::shutdown(fd, SHUT_RDWR);
  });
  AttemptResult cut = one(request(truncated.url(), 1));
  EXPECT_EQ(cut.curl_code, CURLE_OK) << cut.transport_error;
  EXPECT_EQ(cut.http_status, 200);

  ScriptedServer bad_chunk(
      answer_each("HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"));
  AttemptResult chunk = one(request(bad_chunk.url(), 2));
  EXPECT_EQ(chunk.curl_code, CURLE_OK) << chunk.transport_error;
  EXPECT_EQ(chunk.http_status, 503);
  EXPECT_EQ(bad_chunk.connections(), 1);
}

// Found in review: a body streamed at line rate kept read_response() reading (every recv filled
// the buffer), holding the thread all webhooks share, and the 200 already read became a timeout.
TEST_F(PlainHttpTest, AnEndlessBodyEndsTheAttemptWithItsStatus) {
  ScriptedServer streaming([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n");
    const std::string chunk(65536, 'x');
    while (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
    }
  });
  AttemptResult result = one(request(streaming.url(), 1));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 200);
  EXPECT_EQ(client_.open_connections(), 0u) << "an undrained connection is not kept";
}

// Found in review: a status that arrived with a body still trickling at the deadline was a
// timeout, so a 2xx the receiver had given was retried (and delivered again).
TEST_F(PlainHttpTest, ABodyLateAtTheDeadlineKeepsTheStatusThatArrived) {
  ScriptedServer trickle([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    send_all(fd, "HTTP/1.1 202 Accepted\r\nContent-Length: 1000\r\n\r\nsome");
    char byte;
    ::recv(fd, &byte, 1, 0);  // until the client or the server's destructor closes
  });
  AttemptResult result = one(request(trickle.url(), 1, std::chrono::milliseconds(300)));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 202);
  EXPECT_EQ(client_.open_connections(), 0u);

  ScriptedServer interim_forever([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
    for (int i = 0; i < 20000; ++i) send_all(fd, interim);
  });
  AttemptResult endless = one(request(interim_forever.url(), 2));
  EXPECT_EQ(endless.curl_code, CURLE_WEIRD_SERVER_REPLY);
  EXPECT_NE(endless.transport_error.find("No final HTTP response"), std::string::npos)
      << endless.transport_error;
}

// A status with its body still to come ends the attempt at the deadline only once the request
// was sent, or when it refuses the request: a 200 sent while the body was still going out does
// not say the receiver has the event (found in the review of the change above).
TEST_F(PlainHttpTest, AnEarlyStatusEndsTheAttemptOnlyIfTheRequestWasSentOrRefused) {
  auto early = [](const char* head) {
    return [head](ScriptedServer&, int fd, int) {
      char some[1024];
      (void)::recv(fd, some, sizeof some, 0);  // a little of the request, never the rest
      send_all(fd, head);
      ::recv(fd, some, 1, MSG_PEEK);  // hold the connection; the kernel buffers fill
      std::this_thread::sleep_for(std::chrono::seconds(2));
    };
  };
  ScriptedServer ok(early("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"));
  auto r = request(ok.url(), 1, std::chrono::milliseconds(300));
  r.body = std::make_shared<const std::string>(32 << 20, 'x');
  AttemptResult result = one(std::move(r));
  EXPECT_EQ(result.curl_code, CURLE_OPERATION_TIMEDOUT) << result.http_status;

  // The same with the whole response: still not a delivery while the body is not taken.
  ScriptedServer whole(early("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  r = request(whole.url(), 3, std::chrono::milliseconds(500));
  r.body = std::make_shared<const std::string>(32 << 20, 'x');
  result = one(std::move(r));
  EXPECT_EQ(result.curl_code, CURLE_OPERATION_TIMEDOUT) << result.http_status;

  ScriptedServer refused(early("HTTP/1.1 413 Too Large\r\nContent-Length: 100\r\n\r\npartial"));
  r = request(refused.url(), 2, std::chrono::milliseconds(300));
  r.body = std::make_shared<const std::string>(32 << 20, 'x');
  result = one(std::move(r));
  EXPECT_EQ(result.http_status, 413) << result.transport_error;
}

// Found in a receivers pass: a receiver that answers 202 from the request's head and then reads
// the body (nginx's `return 202`) had the attempt failed "before the request body was sent", and
// three attempts dead-lettered a delivery libcurl delivered. The body goes out, then the 202
// counts.
TEST_F(PlainHttpTest, AWhole2xxBeforeTheBodyWasSentCountsOnceItIs) {
  constexpr size_t kBody = 16 << 20;
  std::atomic<size_t> body_read{0};
  ScriptedServer answers_early([&](ScriptedServer&, int fd, int) {
    std::string head;
    char buffer[65536];
    while (head.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      head.append(buffer, static_cast<size_t>(n));
    }
    send_all(fd, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
    // Read on only once the client has seen the answer with the socket's buffers full.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    size_t got = head.size() - head.find("\r\n\r\n") - 4;
    while (got < kBody) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    body_read = got;
  });
  auto r = request(answers_early.url(), 1, std::chrono::milliseconds(20000));
  r.body = std::make_shared<const std::string>(kBody, 'x');
  AttemptResult result = one(std::move(r));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 202);
  EXPECT_TRUE(
      testing::wait_until([&] { return body_read.load() == kBody; }, std::chrono::seconds(5)))
      << body_read.load();
}

// Found in review: a server that answers (413) and closes before reading a large body resets the
// connection; a send that failed on the reset was a send error, retried for hours, although the
// final 413 was waiting to be read.
TEST_F(PlainHttpTest, AnAnswerBeforeTheBodyWasReadIsTheOutcome) {
  ScriptedServer refusing([](ScriptedServer&, int fd, int) {
    char head[1024];
    (void)::recv(fd, head, sizeof head, 0);  // a little of the request, then the answer
    send_all(fd,
             "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    ::close(fd);  // with unread data: a reset
  });
  for (int user = 1; user <= 5; ++user) {
    auto r = request(refusing.url(), user);
    r.body = std::make_shared<const std::string>(16 << 20, 'x');
    AttemptResult result = one(std::move(r));
    EXPECT_EQ(result.http_status, 413) << "attempt " << user << ": " << result.transport_error;
  }
}

// RFC 9110 8.6 and RFC 9112 6.3. Each server gets a pool of its own, as each webhook does.
TEST_F(PlainHttpTest, ContentLengthListsAndDoubleFraming) {
  auto in_pool = [&](const ScriptedServer& server, int user, uint64_t pool) {
    auto r = request(server.url(), user);
    r.pool = pool;
    return r;
  };
  ScriptedServer listed(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"));
  AttemptResult same = one(in_pool(listed, 1, 10));
  EXPECT_EQ(same.http_status, 200) << same.transport_error;
  EXPECT_EQ(client_.open_connections(), 1u);
  ScriptedServer conflicting(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"));
  EXPECT_EQ(one(in_pool(conflicting, 2, 20)).curl_code, CURLE_WEIRD_SERVER_REPLY);

  ScriptedServer both(answer_each(
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  AttemptResult framed = one(in_pool(both, 3, 30));
  EXPECT_EQ(framed.http_status, 200) << framed.transport_error;
  EXPECT_EQ(one(in_pool(both, 4, 30)).http_status, 200);
  EXPECT_EQ(both.connections(), 2) << "a response framed both ways must not keep its connection";
}

TEST_F(PlainHttpTest, SilentServerTimesOutAtTheDeadline) {
  ScriptedServer server([](ScriptedServer& s, int fd, int) {
    s.read(fd);
    char byte;
    ::recv(fd, &byte, 1, 0);  // until the client or the server's destructor closes
  });
  const int64_t started = now_steady_ns();
  AttemptResult result = one(request(server.url(), 1, std::chrono::milliseconds(300)));
  const int64_t elapsed_ms = (now_steady_ns() - started) / 1000000;
  EXPECT_EQ(result.curl_code, CURLE_OPERATION_TIMEDOUT);
  EXPECT_NE(result.transport_error.find("waiting for the response"), std::string::npos)
      << result.transport_error;
  EXPECT_GE(elapsed_ms, 290);
  EXPECT_LT(elapsed_ms, 5000);
  EXPECT_EQ(client_.open_connections(), 0u);
}

TEST_F(PlainHttpTest, RefusedConnectionIsAConnectError) {
  int port = 0;
  {
    ScriptedServer closed(answer_each(""));
    port = closed.port();
  }
  AttemptResult result = one(request("http://127.0.0.1:" + std::to_string(port) + "/", 1));
  EXPECT_EQ(result.curl_code, CURLE_COULDNT_CONNECT);
  EXPECT_NE(result.transport_error.find("Connection refused"), std::string::npos)
      << result.transport_error;
  EXPECT_TRUE(result.final_error.empty());
}

TEST_F(PlainHttpTest, TheSsrfPolicyJudgesTheAddressBeforeConnecting) {
  ScriptedServer server(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  auto deny = AddressPolicy::create({}, {"127.0.0.0/8"});
  ASSERT_TRUE(deny.ok());
  policy_ = std::make_shared<const AddressPolicy>(std::move(deny).value());
  // By name, so the resolver thread is involved too.
  AttemptResult result = one(request("http://localhost:" + std::to_string(server.port()), 1));
  EXPECT_EQ(result.curl_code, CURLE_COULDNT_CONNECT);
  EXPECT_NE(result.final_error.find("refused by SSRF policy"), std::string::npos)
      << result.final_error;
  EXPECT_EQ(server.connections(), 0);
}

TEST_F(PlainHttpTest, HostNamesResolveOffTheCallingThread) {
  ScriptedServer server(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  AttemptResult result = one(request("http://localhost:" + std::to_string(server.port()), 1));
  EXPECT_EQ(result.curl_code, CURLE_OK) << result.transport_error;
  EXPECT_EQ(result.http_status, 200);
}

// A DNS server that does not answer for one name: its lookup waits until released.
std::atomic<bool> slow_name_released{false};
int lookup_with_a_slow_name(const char* host, const char* port, const addrinfo* hints,
                            addrinfo** out) {
  if (std::string_view(host) == "slow.test") {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!slow_name_released && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ::getaddrinfo("127.0.0.1", port, hints, out);  // every *.test name is this machine
}

// A healthy webhook's reconnect is not resolved behind a name whose DNS server does not answer.
// Found in review: a lookup queued while a resolver thread was idle started no thread, so a
// second name queued before that thread woke waited behind the first. That window is a thread's
// wake-up, which this test cannot hold open (it passes on the old code on this machine); it
// guards the behaviour around it, a slow name beside a fast one after a thread went idle.
TEST(PlainHttpResolverTest, AHealthyNameIsNotResolvedBehindOneWhoseDnsServerHangs) {
  ScriptedServer server(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  slow_name_released = false;
  PlainHttpClient client(lookup_with_a_slow_name);
  auto policy = std::make_shared<const AddressPolicy>();
  auto request = [&](const std::string& host, int user) {
    PlainHttpClient::Request r;
    r.user = reinterpret_cast<void*>(static_cast<intptr_t>(user));
    r.pool = static_cast<uint64_t>(user);  // as webhooks do: no connection to reuse by another
    r.target = std::make_shared<const PlainHttpClient::Target>(
        *PlainHttpClient::target_for("http://" + host + ":" + std::to_string(server.port())));
    r.policy = policy;
    r.body = std::make_shared<const std::string>("{}");
    r.deadline_ns = now_steady_ns() + 30'000'000'000;
    return r;
  };
  std::vector<PlainHttpClient::Completion> done;
  auto run_until = [&](size_t n) {
    const int64_t give_up = now_steady_ns() + 15'000'000'000;
    while (done.size() < n && now_steady_ns() < give_up) {
      pollfd p{client.fd(), POLLIN, 0};
      ::poll(&p, 1, 10);
      client.poll(now_steady_ns(), done);
    }
  };
  client.start(request("warm.test", 1));  // leaves one resolver thread, idle
  run_until(1);
  ASSERT_EQ(done.size(), 1u);
  // Not a wait for a condition: time for that thread to go back to waiting for work.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  done.clear();
  client.start(request("slow.test", 2));
  client.start(request("fast.test", 3));
  run_until(1);
  const bool slow_still_hangs = !slow_name_released;
  slow_name_released = true;
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].user, reinterpret_cast<void*>(3))
      << "the healthy name waited: " << done[0].result.transport_error;
  EXPECT_EQ(done[0].result.http_status, 200) << done[0].result.transport_error;
  EXPECT_TRUE(slow_still_hangs);
  run_until(2);  // and the slow one, once its DNS server answers
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].result.http_status, 200) << done[1].result.transport_error;
}

TEST_F(PlainHttpTest, LargeBodiesAreSentInFull) {
  ScriptedServer server(answer_each("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  auto r = request(server.url(), 1);
  r.body = std::make_shared<const std::string>(8 << 20, 'x');
  AttemptResult result = one(std::move(r));
  EXPECT_EQ(result.http_status, 200) << result.transport_error;
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].size() - requests[0].find("\r\n\r\n") - 4, size_t{8 << 20});
}

TEST_F(PlainHttpTest, ClosedPoolsAndCancelledRequestsLeaveNoConnections) {
  std::atomic<bool> hold{true};
  ScriptedServer server([&](ScriptedServer& s, int fd, int) {
    while (!s.read(fd).empty()) {
      testing::wait_until([&] { return !hold.load() || s.requests().size() < 2; }, kWait);
      send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    }
  });
  AttemptResult first = one(request(server.url(), 1));
  EXPECT_EQ(first.http_status, 200);
  EXPECT_EQ(client_.open_connections(), 1u);  // idle, kept for the next request
  client_.close_pool(1);
  EXPECT_EQ(client_.open_connections(), 0u);

  client_.start(request(server.url(), 2));
  std::vector<PlainHttpClient::Completion> early;  // the server holds its answer: stays empty
  ASSERT_TRUE(testing::wait_until(
      [&] {
        client_.poll(now_steady_ns(), early);  // connects and sends
        return server.requests().size() >= 2;
      },
      kWait));
  EXPECT_TRUE(early.empty());
  client_.cancel(reinterpret_cast<void*>(2));
  EXPECT_EQ(client_.open_connections(), 0u);
  hold = false;
  std::vector<PlainHttpClient::Completion> done;
  client_.poll(now_steady_ns(), done);
  EXPECT_TRUE(done.empty());
}

}  // namespace
}  // namespace hookgate::webhooks
