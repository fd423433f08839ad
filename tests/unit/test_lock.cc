// SPDX-License-Identifier: MIT
// lock_bufsize: a fixed size, autotuning off, reported as such.
#include "child.h"
#include "no_net_admin.h"
#include "seam.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>

using namespace sockbuf::test;

namespace
{

TEST(Lock, TcpIsLockedAtTheSize)
{
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_lock_bufsize(s, 131072, 65536, 0, &rep), 0);
	EXPECT_EQ(sndbuf(s), 131072);
	EXPECT_EQ(rcvbuf(s), 65536);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_LOCK);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_LOCK);
	EXPECT_EQ(rep.snd.locked, 1);
	EXPECT_EQ(rep.rcv.locked, 1);
	EXPECT_EQ(rep.snd.floor, 0); // a lock is not a floor promise
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	if (p.features & SOCKBUF_FEAT_BUF_LOCK) {
		EXPECT_EQ(buflock(s), SOCKBUF_BOTH);
	}
}

TEST(Lock, ClampWithoutForceIsReported)
{
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	if (p.sndbuf_max <= 0 || p.sndbuf_max > SOCKBUF_SIZE_MAX / 2)
		GTEST_SKIP() << "net.core.wmem_max unreadable or too large to exceed";
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_lock_bufsize(s, p.sndbuf_max * 2, 0, 0, &rep), 0);
	EXPECT_EQ(rep.snd.effective, p.sndbuf_max);
	EXPECT_EQ(rep.snd.clamps, (uint32_t)SOCKBUF_CLAMP_MEM_MAX);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_LOCK);
}

TEST(Lock, ForceWithCapability)
{
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	if (!(p.features & SOCKBUF_FEAT_FORCE))
		GTEST_SKIP() << "CAP_NET_ADMIN not effective";
	fd s(tcp());
	struct sockbuf_report rep;
	int want = p.rcvbuf_max * 2;
	ASSERT_EQ(sockbuf_lock_bufsize(s, 0, want, SOCKBUF_F_ALLOW_FORCE, &rep), 0);
	EXPECT_EQ(rcvbuf(s), want);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_FORCE_LOCK);
	EXPECT_EQ(rep.rcv.clamps, 0u);
	EXPECT_FALSE(rep.flags & SOCKBUF_R_FORCE_DENIED);
}

TEST(Lock, ForceRefusedByTheKernelKeepsTheClampedSize)
{
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	if (!(p.features & SOCKBUF_FEAT_FORCE))
		GTEST_SKIP()
		    << "CAP_NET_ADMIN not effective: the EPERM path needs a probe that saw it";
	injector inj; // the capability dropped after the probe
	inj.add({true, SOL_SOCKET, SO_RCVBUFFORCE, EPERM});
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_lock_bufsize(s, 0, p.rcvbuf_max * 2, SOCKBUF_F_ALLOW_FORCE, &rep), 0);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_FORCE_DENIED);
	EXPECT_EQ(rep.rcv.effective, p.rcvbuf_max);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_LOCK);
	EXPECT_TRUE(rep.rcv.clamps & SOCKBUF_CLAMP_MEM_MAX);
}

TEST(Lock, WithoutCapabilityForceIsNeverTried)
{
	// In a child that dropped CAP_NET_ADMIN: the probe must see it gone,
	// and lock must not even try SO_SNDBUFFORCE (the injector would turn
	// an attempt into -EIO).
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct sockbuf_probe_info p = drop_net_admin_in_child();
		injector inj;
		inj.add({true, SOL_SOCKET, SO_SNDBUFFORCE, EIO});
		fd s(tcp());
		struct sockbuf_report rep;
		if (sockbuf_lock_bufsize(s, p.sndbuf_max * 2, 0, SOCKBUF_F_ALLOW_FORCE, &rep) != 0)
			_exit(5);
		if (!(rep.flags & SOCKBUF_R_FORCE_DENIED) || rep.snd.effective != p.sndbuf_max)
			_exit(6);
		_exit(0);
	}
	expect_child_exited_0(pid, "3: capng_apply failed, 4: probe still saw FORCE, "
				   "5: lock failed (FORCE tried?), 6: wrong report");
}

} // namespace
