// SPDX-License-Identifier: MIT
// get_state shows what the kernel stores, for TCP and other sockets.
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <netinet/tcp.h>

using namespace sockbuf::test;

namespace
{

TEST(State, FreshTcpSocket)
{
	fd s(tcp());
	struct sockbuf_state st;
	ASSERT_EQ(sockbuf_get_state(s, &st), 0);
	EXPECT_EQ(st.sndbuf, sndbuf(s));
	EXPECT_EQ(st.rcvbuf, rcvbuf(s));
	EXPECT_EQ(st.domain, AF_INET);
	EXPECT_EQ(st.type, SOCK_STREAM);
	EXPECT_EQ(st.protocol, IPPROTO_TCP);
	EXPECT_EQ(st.tcp_state, TCP_CLOSE);
	EXPECT_EQ(st.snd_wscale, -1);
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	EXPECT_EQ(st.lock, (p.features & SOCKBUF_FEAT_BUF_LOCK) ? 0 : -1);
}

TEST(State, LockBitsAndWindowScalesOfAConnection)
{
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	tcp_pair pr;
	ASSERT_TRUE(make_pair(&pr));
	ASSERT_EQ(sockbuf_lock_bufsize(pr.server, 0, 65536, 0, nullptr), 0);
	struct sockbuf_state st;
	ASSERT_EQ(sockbuf_get_state(pr.server, &st), 0);
	EXPECT_EQ(st.lock, SOCKBUF_RCV);
	EXPECT_EQ(st.tcp_state, TCP_ESTABLISHED);
	EXPECT_GE(st.rcv_wscale, 0);
	EXPECT_GE(st.snd_wscale, 0);
	struct sockbuf_state cl;
	ASSERT_EQ(sockbuf_get_state(pr.client, &cl), 0);
	EXPECT_EQ(cl.snd_wscale, st.rcv_wscale); // both ends agree
}

TEST(State, UdpHasNoTcpState)
{
	fd u(udp());
	struct sockbuf_state st;
	ASSERT_EQ(sockbuf_get_state(u, &st), 0);
	EXPECT_EQ(st.protocol, IPPROTO_UDP);
	EXPECT_EQ(st.type, SOCK_DGRAM);
	EXPECT_EQ(st.tcp_state, -1);
	EXPECT_EQ(st.rcv_wscale, -1);
}

} // namespace
