// SPDX-License-Identifier: MIT
// set_initial_bufsize on real sockets: the size asked, unlocked, reported.
#include "reserve_reported.h"
#include "seam.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <netinet/tcp.h>

using namespace sockbuf::test;

namespace
{

TEST(SetInitial, SizeInForceInTheLibraryUnitAndUnlocked)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 262144, 196608, 0, &rep), 0);
	EXPECT_EQ(sndbuf(s), 262144); // not 524288: the library halves
	EXPECT_EQ(rcvbuf(s), 196608);
	EXPECT_EQ(buflock(s), 0);
	EXPECT_EQ(rep.snd.requested, 262144);
	EXPECT_EQ(rep.snd.effective, 262144);
	EXPECT_EQ(rep.rcv.effective, 196608);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_UNLOCK);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_UNLOCK);
	EXPECT_EQ(rep.snd.locked, 0);
	EXPECT_EQ(rep.rcv.locked, 0);
	EXPECT_EQ(rep.snd.floor, 262144);
	EXPECT_EQ(rep.rcv.floor, 196608);
	EXPECT_EQ(rep.snd.clamps, 0u);
	EXPECT_EQ(rep.tcp_state, TCP_CLOSE);
	EXPECT_EQ(rep.flags, 0u);
	// No window clamp survives to fix a small scale at the handshake.
	EXPECT_EQ(getopt_int(s, IPPROTO_TCP, TCP_WINDOW_CLAMP), 0);
	struct sockbuf_floor f;
	ASSERT_EQ(sockbuf_report_floor(&rep, &f), 0);
	EXPECT_EQ(f.snd, 262144);
	EXPECT_EQ(f.rcv, 196608);
}

TEST(SetInitial, OneDirectionKeepsTheOthersLockBit)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	fd s(tcp());
	int half = 32768;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &half, sizeof(half)), 0);
	ASSERT_EQ(buflock(s), SOCKBUF_RCV);
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 131072, 0, 0, &rep), 0);
	EXPECT_EQ(buflock(s), SOCKBUF_RCV); // the caller's receive lock stays
	EXPECT_EQ(rcvbuf(s), 65536);	    // and its size too
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_NONE);
	EXPECT_EQ(rep.rcv.requested, 0);
	EXPECT_EQ(rep.rcv.locked, 1);
	EXPECT_EQ(rep.snd.locked, 0);
}

TEST(SetInitial, OddAndSubMinimumSizesAreReported)
{
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 1001, 100001, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	struct sockbuf_probe_info p = probe();
	EXPECT_EQ(rep.snd.effective, p.min_sndbuf);
	EXPECT_EQ(rep.snd.clamps, (uint32_t)(SOCKBUF_CLAMP_ODD | SOCKBUF_CLAMP_SOCK_MIN));
	EXPECT_EQ(rep.snd.floor, 1001); // min(requested, effective)
	EXPECT_EQ(rep.rcv.effective, 100000);
	EXPECT_EQ(rep.rcv.clamps, (uint32_t)SOCKBUF_CLAMP_ODD);
	EXPECT_EQ(rep.rcv.floor, 100000);
}

TEST(SetInitial, MemMaxClampIsReported)
{
	struct sockbuf_probe_info p = probe();
	if (p.rcvbuf_max <= 0 || p.rcvbuf_max > SOCKBUF_SIZE_MAX / 2)
		GTEST_SKIP() << "net.core.rmem_max unreadable or too large to exceed";
	fd s(tcp());
	struct sockbuf_report rep;
	int want = p.rcvbuf_max * 2; // twice what the clamp lets through
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 0, want, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(rep.rcv.effective, p.rcvbuf_max);
	EXPECT_EQ(rcvbuf(s), p.rcvbuf_max);
	EXPECT_TRUE(rep.rcv.clamps & SOCKBUF_CLAMP_MEM_MAX);
	EXPECT_EQ(rep.rcv.floor, p.rcvbuf_max);
	EXPECT_FALSE(rep.flags & SOCKBUF_R_FORCE_DENIED); // force was not asked for
}

TEST(SetInitial, ForcePassesMemMaxWithCapNetAdmin)
{
	struct sockbuf_probe_info p = probe();
	if (!(p.features & SOCKBUF_FEAT_FORCE))
		GTEST_SKIP() << "CAP_NET_ADMIN not effective: SO_*BUFFORCE unavailable";
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	fd s(tcp());
	struct sockbuf_report rep;
	int want = p.sndbuf_max * 2;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, want, 0, SOCKBUF_F_ALLOW_FORCE, &rep), 0);
	EXPECT_EQ(sndbuf(s), want);
	EXPECT_EQ(buflock(s), 0);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_FORCE_UNLOCK);
	EXPECT_FALSE(rep.snd.clamps & SOCKBUF_CLAMP_MEM_MAX);
	// Above tcp_wmem[2]: autotuning may cut an unlocked buffer back.
	EXPECT_EQ((rep.snd.clamps & SOCKBUF_CLAMP_TCP_MEM_MAX) != 0, want > p.tcp_wmem[2]);
}

TEST(SetInitial, ListenerAndConnectedSocketsAreReported)
{
	tcp_pair pr;
	ASSERT_TRUE(make_pair(&pr));
	struct sockbuf_report rep;
	ASSERT_EQ(
	    sockbuf_set_initial_bufsize(pr.listener, 0, 131072, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(rep.tcp_state, TCP_LISTEN);
	EXPECT_EQ(rep.flags & (SOCKBUF_R_LISTENER | SOCKBUF_R_AFTER_HANDSHAKE),
		  (uint32_t)SOCKBUF_R_LISTENER);
	// Above the connected socket's size: the size still changes.
	int bigger = rcvbuf(pr.client) * 2;
	ASSERT_EQ(sockbuf_set_initial_bufsize(pr.client, 0, bigger, SOCKBUF_F_FALLBACK_LOCK, &rep),
		  0);
	EXPECT_EQ(rep.tcp_state, TCP_ESTABLISHED);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_AFTER_HANDSHAKE);
	EXPECT_EQ(rep.rcv.effective, bigger);
	EXPECT_EQ(rcvbuf(pr.client), bigger);
}

// An initial size is a starting point: on a connected socket whose buffer
// is already larger (the send buffer is expanded at establishment), the
// buffer is kept, not lowered to the request, and it stays unlocked.
TEST(SetInitial, ConnectedSocketIsNeverLowered)
{
	tcp_pair pr;
	ASSERT_TRUE(make_pair(&pr));
	int grown = sndbuf(pr.client);
	ASSERT_GE(grown, 2 * 4608);
	struct sockbuf_report rep;
	ASSERT_EQ(
	    sockbuf_set_initial_bufsize(pr.client, grown / 2, 0, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(sndbuf(pr.client), grown);
	EXPECT_EQ(rep.snd.effective, grown);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_HELD);
	EXPECT_TRUE(rep.snd.clamps & SOCKBUF_CLAMP_ALREADY_LARGER);
	EXPECT_EQ(rep.snd.floor, grown / 2);
	if (has_buf_lock()) {
		EXPECT_EQ(rep.snd.locked, 0);
		EXPECT_EQ(buflock(pr.client) & SOCKBUF_SND, 0);
	}
}

// Kernels before 5.15: the receive side goes through SO_RCVLOWAT.
class OldKernel : public ::testing::Test
{
protected:
	void SetUp() override
	{
		inj_.add({false, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
		inj_.add({true, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
		ASSERT_EQ(sockbuf_probe(&p_, SOCKBUF_PROBE_FRESH), 0);
		ASSERT_FALSE(p_.features & SOCKBUF_FEAT_BUF_LOCK);
	}
	void TearDown() override { reprobe_real_kernel(); }
	injector inj_;
	struct sockbuf_probe_info p_;
};

TEST_F(OldKernel, ReceiveRaisedThroughRcvlowatWhichIsPutBack)
{
	if (!(p_.features & SOCKBUF_FEAT_RCVLOWAT_RAISE))
		GTEST_SKIP() << "kernel does not raise sk_rcvbuf on SO_RCVLOWAT";
	fd s(tcp());
	int mark = 7;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof(mark)), 0);
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 0, 1 << 20, 0, &rep), 0);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_RCVLOWAT);
	EXPECT_EQ(rcvbuf(s), 1 << 20);
	EXPECT_EQ(rep.rcv.effective, 1 << 20);
	EXPECT_EQ(rep.rcv.locked, 0);
	EXPECT_EQ(getopt_int(s, SOL_SOCKET, SO_RCVLOWAT), 7); // the caller's mark
	EXPECT_EQ(buflock(s), 0); // the real kernel agrees: still unlocked
	// No window clamp left behind to shrink the window scale at connect().
	EXPECT_EQ(getopt_int(s, IPPROTO_TCP, TCP_WINDOW_CLAMP), 0);
	EXPECT_FALSE(rep.flags & SOCKBUF_R_WINDOW_CLAMPED);
}

TEST_F(OldKernel, RcvlowatOnlyRaises)
{
	if (!(p_.features & SOCKBUF_FEAT_RCVLOWAT_RAISE))
		GTEST_SKIP() << "kernel does not raise sk_rcvbuf on SO_RCVLOWAT";
	fd s(tcp());
	int before = rcvbuf(s);
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 0, before / 2, 0, &rep), 0);
	EXPECT_EQ(rep.rcv.effective, before);
	EXPECT_TRUE(rep.rcv.clamps & SOCKBUF_CLAMP_ALREADY_LARGER);
	EXPECT_EQ(rep.rcv.floor, before / 2);
}

TEST_F(OldKernel, SendWithoutFallbackIsRefusedAndUntouched)
{
	fd s(tcp());
	int before = sndbuf(s);
	struct sockbuf_report rep;
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 262144, 262144, 0, &rep), -EOPNOTSUPP);
	EXPECT_EQ(sndbuf(s), before);
	EXPECT_EQ(buflock(s), 0); // never a silent lock
}

TEST_F(OldKernel, FallbackLockIsSaidOutLoud)
{
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 262144, 0, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_LOCK);
	EXPECT_EQ(rep.snd.locked, 1);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_FALLBACK);
	EXPECT_EQ(sndbuf(s), 262144);
	EXPECT_EQ(buflock(s), SOCKBUF_SND);
}

TEST_F(OldKernel, FallbackDefaultLeavesTheKernelSize)
{
	fd s(tcp());
	int before = sndbuf(s);
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 262144, 0, SOCKBUF_F_FALLBACK_DEFAULT, &rep), 0);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_DEFAULT);
	EXPECT_EQ(rep.snd.effective, before);
	EXPECT_EQ(rep.snd.floor, 0) << "nothing was set: no floor to keep";
	EXPECT_EQ(sndbuf(s), before);
	EXPECT_EQ(buflock(s), 0);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_FALLBACK);
}

TEST(SetInitial, ReserveMemIsAttemptedAndReported)
{
	struct sockbuf_probe_info p = probe();
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(
		      s, 65536, 0, SOCKBUF_F_RESERVE_MEM | SOCKBUF_F_FALLBACK_LOCK, &rep),
		  0);
	EXPECT_TRUE(reserve_reported(p, rep));
	EXPECT_EQ(rep.snd.effective, 65536); // the size stands either way
}

} // namespace
