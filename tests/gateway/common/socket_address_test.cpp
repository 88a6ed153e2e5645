#include "gateway/common/socket_address.hpp"

#include <gtest/gtest.h>

namespace hookgate {
namespace {

TEST(SocketAddressTest, BuildsIpv4AndIpv6LiteralsWithThePort) {
  auto v4 = numeric_socket_address("127.0.0.1", 8080);
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->length, sizeof(sockaddr_in));
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(v4->get());
  EXPECT_EQ(ntohs(in4->sin_port), 8080);
  EXPECT_EQ(ntohl(in4->sin_addr.s_addr), 0x7f000001u);

  auto v6 = numeric_socket_address("::1", 443);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(v6->length, sizeof(sockaddr_in6));
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(v6->get());
  EXPECT_EQ(ntohs(in6->sin6_port), 443);
  EXPECT_EQ(in6->sin6_addr.s6_addr[15], 1);
}

TEST(SocketAddressTest, NamesAndGarbageAreNotLiterals) {
  EXPECT_FALSE(numeric_socket_address("localhost", 80));
  EXPECT_FALSE(numeric_socket_address("example.com", 80));
  EXPECT_FALSE(numeric_socket_address("[::1]", 80));  // brackets belong to URLs, not addresses
  EXPECT_FALSE(numeric_socket_address("256.0.0.1", 80));
  EXPECT_FALSE(numeric_socket_address("", 80));
}

TEST(SocketAddressTest, SplitsHostAndPortAndRefusesBadPorts) {
  auto v4 = split_host_port("127.0.0.1:9464");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  auto v6 = split_host_port("[::1]:0");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(split_host_port(":65535")->host, "");
  for (const char* bad :
       {"127.0.0.1:99464", "127.0.0.1:65536", "127.0.0.1:", ":abc", "localhost", "h:1x", "h:-1"})
    EXPECT_FALSE(split_host_port(bad)) << bad;
}

}  // namespace
}  // namespace hookgate
