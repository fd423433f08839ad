// SPDX-License-Identifier: MIT
// The drain after the deadline (harness/engine.h) must tell bytes still on
// their way from bytes lost.  Each test runs one real flow over the
// namespace's loopback while `tc qdisc ... blackhole` drops every packet,
// so the sender holds its bytes and retransmits them on a backed-off
// timer, as a starved guest's senders do under tcp_mem's hard limit:
//
// - the blackhole lifts after a second: the last bytes arrive about 1.2 s
//   after the deadline, past a 0.5 s base drain but within the cap, and
//   the flow must pass (counted as late).  The suite's old fixed drain
//   counted it short, an integrity FAIL with nothing lost;
// - the blackhole stays past the cap: unfinished, integrity unverified,
//   not FAIL;
// - the sender's connection gives up (TCP_USER_TIMEOUT) and drops its
//   bytes: short, integrity FAIL, without waiting for the cap.
#include "clauses.h"
#include "clock.h"
#include "engine.h"
#include "netns.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace sockbuf::contract
{
namespace
{

constexpr int64_t ms = 1'000'000;

// Drops every packet leaving the namespace's lo (both directions of a
// loopback connection), or stops doing so.  False when tc or the
// blackhole qdisc is missing.
bool blackhole(bool on, std::string *why)
{
	std::string out;
	std::vector<std::string> argv = {"tc",	"qdisc", on ? "replace" : "del",
					 "dev", "lo",	 "root"};
	if (on)
		argv.push_back("blackhole");
	int st = run_program(argv, &out);
	if (st != 0)
		*why = fmt::format("tc qdisc {} blackhole: {} {}", on ? "replace" : "del", st, out);
	return st == 0;
}

struct pair_fds {
	int snd = -1, rcv = -1;
	~pair_fds()
	{
		if (snd >= 0)
			close(snd);
		if (rcv >= 0)
			close(rcv);
	}
};

// One connection from client_addr to server_addr, accepted.
void connect_pair(pair_fds *p)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(l, 0);
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	inet_pton(AF_INET, server_addr, &a.sin_addr);
	ASSERT_EQ(bind(l, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0) << strerror(errno);
	ASSERT_EQ(listen(l, 1), 0);
	socklen_t len = sizeof(a);
	ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr *>(&a), &len), 0);
	p->snd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_GE(p->snd, 0);
	sockaddr_in c = {};
	c.sin_family = AF_INET;
	inet_pton(AF_INET, client_addr, &c.sin_addr);
	ASSERT_EQ(bind(p->snd, reinterpret_cast<sockaddr *>(&c), sizeof(c)), 0);
	ASSERT_EQ(connect(p->snd, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0)
	    << strerror(errno);
	p->rcv = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
	ASSERT_GE(p->rcv, 0);
	close(l);
}

class Drain : public testing::Test
{
protected:
	void SetUp() override
	{
		std::string why;
		if (!blackhole(true, &why))
			GTEST_SKIP() << verdict_why;
		blackhole(false, &why);
		connect_pair(&p);
	}
	void TearDown() override
	{
		std::string why;
		blackhole(false, &why); // may be gone already
	}

	// One flow of @bytes, all written at once while every packet is
	// dropped; the deadline 200 ms later.  The blackhole is lifted
	// @lift_after_ns after the start (0: never).
	integrity run(uint64_t bytes, int64_t lift_after_ns, const drain_limits &lim)
	{
		std::string why;
		EXPECT_TRUE(blackhole(true, &why)) << verdict_why;
		std::vector<flow> flows(1);
		flows[0].snd_fd = p.snd;
		flows[0].rcv_fd = p.rcv;
		flows[0].salt = 0x5bc0000000000000ull;
		flows[0].to_send = bytes;
		int64_t t0 = now_ns();
		std::thread lift;
		if (lift_after_ns)
			lift = std::thread([t0, lift_after_ns] {
				sleep_until_ns(t0 + lift_after_ns);
				std::string w;
				blackhole(false, &w);
			});
		integrity data;
		run_flows(flows, 1, t0 + 200 * ms, &data, lim);
		end_ns = now_ns();
		deadline_ns = t0 + 200 * ms;
		if (lift.joinable())
			lift.join();
		return data;
	}

	outcome judged(const integrity &data)
	{
		scenario_result r;
		r.name = "drain";
		r.data = data;
		verdict v = judge_integrity(r);
		verdict_why = v.lib.why;
		return v.lib.o;
	}

	pair_fds p;
	int64_t end_ns = 0, deadline_ns = 0;
	std::string verdict_why;
};

TEST_F(Drain, LastBytesRetransmittedAfterTheBaseDrainArrive)
{
	drain_limits lim;
	lim.base_ns = 500 * ms;
	lim.cap_ns = 8000 * ms;
	// Dropped for a second: retransmitted at about 0.2, 0.6 (dropped)
	// and 1.4 s (through), 1.2 s after the deadline.
	integrity d = run(256 << 10, 1000 * ms, lim);
	EXPECT_EQ(d.flows, 1u);
	EXPECT_EQ(d.corrupt, 0u);
	EXPECT_EQ(d.short_flows, 0u) << (d.errors.empty() ? "" : d.errors[0]);
	EXPECT_EQ(d.unfinished_flows, 0u);
	EXPECT_EQ(d.bytes_verified, 256u << 10);
	// The window was open: the flow ended after the base drain.
	EXPECT_EQ(d.late_flows, 1u);
	EXPECT_GT(d.drain_s, 0.5);
	EXPECT_LT(d.drain_s, 8.0);
	EXPECT_EQ(judged(d), outcome::pass) << verdict_why;
	EXPECT_NE(verdict_why.find("1 finished after the drain's"), std::string::npos)
	    << verdict_why;
}

TEST_F(Drain, BytesStillRetransmittedAtTheCapAreUnverifiedNotLost)
{
	drain_limits lim;
	lim.base_ns = 300 * ms;
	lim.cap_ns = 900 * ms;
	integrity d = run(256 << 10, 0, lim);
	EXPECT_EQ(d.short_flows, 0u) << (d.errors.empty() ? "" : d.errors[0]);
	EXPECT_TRUE(d.errors.empty());
	EXPECT_EQ(d.unfinished_flows, 1u);
	ASSERT_EQ(d.unfinished.size(), 1u);
	EXPECT_NE(d.unfinished[0].find("flow unfinished at the drain limit"), std::string::npos);
	EXPECT_NE(d.unfinished[0].find("262144 bytes still queued by the sender (FIN_WAIT1)"),
		  std::string::npos)
	    << d.unfinished[0];
	EXPECT_NE(d.unfinished[0].find("retransmit backoff"), std::string::npos);
	// Waited to the cap, not past it.
	EXPECT_GE(end_ns - deadline_ns, 900 * ms);
	EXPECT_LT(end_ns - deadline_ns, 2000 * ms);
	EXPECT_EQ(judged(d), outcome::unverified) << verdict_why;
}

TEST_F(Drain, ConnectionThatDroppedItsBytesFailsWithoutWaitingForTheCap)
{
	// The sender gives up after 300 ms without an acknowledgment: its
	// connection closes and drops the bytes; nothing will deliver them.
	unsigned timeout_ms = 300;
	ASSERT_EQ(setsockopt(p.snd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms)),
		  0);
	drain_limits lim;
	lim.base_ns = 1000 * ms;
	lim.cap_ns = 20000 * ms;
	integrity d = run(256 << 10, 0, lim);
	EXPECT_EQ(d.short_flows, 1u);
	EXPECT_EQ(d.unfinished_flows, 0u);
	ASSERT_EQ(d.errors.size(), 1u);
	EXPECT_NE(d.errors[0].find("flow ended with 0 of 262144 bytes received"), std::string::npos)
	    << d.errors[0];
	EXPECT_NE(d.errors[0].find("(sender CLOSE)"), std::string::npos) << d.errors[0];
	EXPECT_LT(end_ns - deadline_ns, 3000 * ms);
	EXPECT_EQ(judged(d), outcome::fail) << verdict_why;
}

} // namespace
} // namespace sockbuf::contract
