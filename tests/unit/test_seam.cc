// SPDX-License-Identifier: MIT
// Every syscall failure path, through the fault-injection seam.
#include "seam.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <linux/netlink.h>
#include <netinet/tcp.h>

using namespace sockbuf::test;

namespace
{

// Every test here makes the calls on a fresh TCP socket with an injector in
// place, and most want a report.
class Seam : public testing::Test
{
protected:
	// Probes afresh while SO_RESERVE_MEM is faked to succeed @times times
	// (-1: always), so that the library takes it as usable on any kernel.
	void probe_with_reserve_mem(int times)
	{
		inj.add({true, SOL_SOCKET, SO_RESERVE_MEM, 0, 0, times});
		struct sockbuf_probe_info p;
		ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
		ASSERT_TRUE(p.features & SOCKBUF_FEAT_RESERVE_MEM);
	}

	fd s{tcp()};
	injector inj;
	struct sockbuf_report rep;
};

TEST_F(Seam, EintrIsRetried)
{
	inj.add({true, SOL_SOCKET, SO_SNDBUF, EINTR, 0, 2});
	ASSERT_EQ(sockbuf_lock_bufsize(s, 65536, 0, 0, &rep), 0);
	EXPECT_EQ(sndbuf(s), 65536);
}

TEST_F(Seam, EndlessEintrSurfacesAsEintr)
{
	int before = sndbuf(s);
	inj.add({true, SOL_SOCKET, SO_SNDBUF, EINTR});
	EXPECT_EQ(sockbuf_lock_bufsize(s, 65536, 0, 0, nullptr), -EINTR);
	EXPECT_EQ(sndbuf(s), before);
}

TEST_F(Seam, FirstSetFailsNothingChangedNoPartial)
{
	inj.add({true, SOL_SOCKET, SO_SNDBUF, ENOMEM});
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 65536, SOCKBUF_F_FALLBACK_LOCK, &rep),
		  -ENOMEM);
	EXPECT_FALSE(rep.flags & SOCKBUF_R_PARTIAL);
	EXPECT_EQ(buflock(s), 0);
}

TEST_F(Seam, SecondSetFailsAfterTheFirstIsPartial)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	inj.add({true, SOL_SOCKET, SO_RCVBUF, ENOMEM});
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 65536, 0, &rep), -ENOMEM);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_PARTIAL);
	// The report shows the real state: send set (and locked, since the
	// unlock step never ran).
	EXPECT_EQ(rep.snd.effective, 65536);
	EXPECT_EQ(rep.snd.effective, sndbuf(s));
	EXPECT_EQ(rep.snd.locked, 1);
	EXPECT_EQ(buflock(s), SOCKBUF_SND);
}

TEST_F(Seam, UnlockRefusedIsPartialAndSaysLocked)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	inj.add({true, SOL_SOCKET, SO_BUF_LOCK, EPERM});
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 65536, 0, &rep), -EPERM);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_PARTIAL);
	EXPECT_EQ(rep.snd.locked, 1);
	EXPECT_EQ(rep.rcv.locked, 1);
	EXPECT_EQ(buflock(s), SOCKBUF_BOTH);
}

TEST_F(Seam, ReadBackFailureIsReturned)
{
	inj.add({false, SOL_SOCKET, SO_RCVBUF, ENOBUFS});
	EXPECT_EQ(sockbuf_lock_bufsize(s, 0, 65536, 0, nullptr), -ENOBUFS);
	struct sockbuf_state st;
	EXPECT_EQ(sockbuf_get_state(s, &st), -ENOBUFS);
	struct sockbuf_floor f = {0, 4096};
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), -ENOBUFS);
}

TEST_F(Seam, ProtocolCheckFailureStopsBeforeAnyChange)
{
	int before = sndbuf(s);
	inj.add({false, SOL_SOCKET, SO_PROTOCOL, ENOPROTOOPT});
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, 0, nullptr), -ENOPROTOOPT);
	EXPECT_EQ(inj.calls_set(), 0);
	EXPECT_EQ(sndbuf(s), before);
}

TEST_F(Seam, MissingTcpInfoOnlyLosesTheState)
{
	inj.add({false, IPPROTO_TCP, TCP_INFO, ENOPROTOOPT});
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(rep.tcp_state, -1);
	EXPECT_EQ(rep.snd.effective, 65536);
}

// A socket of protocol 6 that is not TCP (NETLINK_XFRM; a raw socket of
// protocol TCP alike) is refused as not TCP also where the kernel offers no
// unlocked mechanism (-EOPNOTSUPP for TCP) and where the probe found no
// TCP_INFO (whose failure otherwise tells it; SO_TYPE is read instead).
TEST_F(Seam, NotTcpIsToldWithoutSoBufLockOrTcpInfo)
{
	fd x(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_XFRM));
	if (x < 0)
		GTEST_SKIP() << "socket(AF_NETLINK, SOCK_RAW, NETLINK_XFRM): "
			     << std::strerror(errno);
	inj.add({false, IPPROTO_TCP, TCP_INFO, ENOPROTOOPT});
	inj.add({false, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
	inj.add({true, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
	EXPECT_FALSE(p.features & SOCKBUF_FEAT_BUF_LOCK);
	EXPECT_FALSE(p.features & SOCKBUF_FEAT_TCP_INFO);
	const int before = sndbuf(x);
	EXPECT_EQ(sockbuf_set_initial_bufsize(x, 65536, 0, 0, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, 0, &rep), -EOPNOTSUPP);
	EXPECT_EQ(sockbuf_set_initial_bufsize(x, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, &rep),
		  -EPROTOTYPE);
	EXPECT_EQ(sndbuf(x), before);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	EXPECT_EQ(rep.tcp_state, -1);
	const struct sockbuf_floor f = {65536, 0};
	EXPECT_EQ(sockbuf_restore_floor(x, &f, SOCKBUF_F_FALLBACK_LOCK, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_restore_floor(s, &f, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	reprobe_real_kernel();
}

TEST_F(Seam, RestoreReadFailure)
{
	inj.add({false, SOL_SOCKET, SO_SNDBUF, EIO});
	struct sockbuf_floor f = {65536, 0};
	EXPECT_EQ(sockbuf_restore_floor(s, &f, 0, nullptr), -EIO);
}

TEST_F(Seam, RcvlowatFailurePaths)
{
	inj.add({false, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
	inj.add({true, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
	if (!(p.features & SOCKBUF_FEAT_RCVLOWAT_RAISE)) {
		reprobe_real_kernel();
		GTEST_SKIP() << "kernel does not raise sk_rcvbuf on SO_RCVLOWAT";
	}
	// Setting the mark back fails after the raise: partial, -ENOMEM.
	inj.add({true, SOL_SOCKET, SO_RCVLOWAT, ENOMEM, 1, 1});
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 0, 1 << 20, 0, &rep), -ENOMEM);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_PARTIAL);
	EXPECT_EQ(rep.rcv.effective, rcvbuf(s));
	// Reading the caller's mark fails: nothing changed.
	fd t(tcp());
	int before = rcvbuf(t);
	inj.add({false, SOL_SOCKET, SO_RCVLOWAT, EIO, 0, 1});
	EXPECT_EQ(sockbuf_set_initial_bufsize(t, 0, 1 << 20, 0, &rep), -EIO);
	EXPECT_EQ(rcvbuf(t), before);
	reprobe_real_kernel();
}

// SO_RESERVE_MEM on a listening socket would hold memory for a socket that
// never sends, and accepted sockets do not inherit it: the library does not
// make the call, and says so.  The seam makes the probe's reservation
// succeed; any later SO_RESERVE_MEM reaches the real kernel, whose answer
// (0 or -EOPNOTSUPP) is not the -EINVAL the library gives for a listener.
TEST_F(Seam, NoReservationOnAListener)
{
	ASSERT_NO_FATAL_FAILURE(probe_with_reserve_mem(2)); // reserve, release
	tcp_pair pr;
	ASSERT_TRUE(make_pair(&pr));
	EXPECT_EQ(sockbuf_set_initial_bufsize(pr.listener, 65536, 65536,
					      SOCKBUF_F_RESERVE_MEM | SOCKBUF_F_FALLBACK_LOCK,
					      &rep),
		  0);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_LISTENER);
	EXPECT_FALSE(rep.flags & SOCKBUF_R_RESERVED);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_RESERVE_FAILED);
	EXPECT_EQ(rep.reserve_err, -EINVAL);
	reprobe_real_kernel();
}

// The reservation keeps the send floor through moderation only at 2 x send
// floor + receive floor + one charge (exec.cc: reserve()); send + receive
// floor let 6.12 cut a 128 KiB floor to 114 KiB.  Checked on what reaches
// setsockopt, for set_initial and for restore_floor (which passes the
// whole floor, not the part it raised).
TEST_F(Seam, ReservationIsTwiceTheSendFloorPlusReceiveFloorPlusOneCharge)
{
	ASSERT_NO_FATAL_FAILURE(probe_with_reserve_mem(-1)); // every reservation succeeds
	tcp_pair pr;
	ASSERT_TRUE(make_pair(&pr));
	ASSERT_EQ(sockbuf_set_initial_bufsize(pr.client, 131072, 65536,
					      SOCKBUF_F_RESERVE_MEM | SOCKBUF_F_FALLBACK_LOCK,
					      &rep),
		  0);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_RESERVED);
	// Only the receive side: no send floor, no allowance.
	ASSERT_EQ(sockbuf_set_initial_bufsize(
		      pr.server, 0, 65536, SOCKBUF_F_RESERVE_MEM | SOCKBUF_F_FALLBACK_LOCK, &rep),
		  0);
	// restore_floor of a send buffer pushed below, floor 196608 / 65536.
	const int small = 4096;
	ASSERT_EQ(setsockopt(pr.client, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	struct sockbuf_floor fl = {196608, 65536};
	ASSERT_EQ(sockbuf_restore_floor(pr.client, &fl,
					SOCKBUF_F_RESERVE_MEM | SOCKBUF_F_FALLBACK_LOCK, &rep),
		  0);
	const int charge = 64 << 10;
	const std::vector<int> want = {4096, 0,				   // the probe's own
				       2 * 131072 + 65536 + charge, 65536, // set_initial x 2
				       2 * 196608 + 65536 + charge};	   // restore
	EXPECT_EQ(inj.values_set(SOL_SOCKET, SO_RESERVE_MEM), want);
	reprobe_real_kernel();
}

} // namespace
