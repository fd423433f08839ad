// SPDX-License-Identifier: MIT
// The floor: check finds a buffer below it, restore raises it, unlocked.
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>

using namespace sockbuf::test;

namespace
{

TEST(Floor, HeldFloorChecksZero)
{
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 131072, 131072, SOCKBUF_F_FALLBACK_LOCK, &rep), 0);
	struct sockbuf_floor f;
	ASSERT_EQ(sockbuf_report_floor(&rep, &f), 0);
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), 0);
	struct sockbuf_state now;
	EXPECT_EQ(sockbuf_check_floor(s, &f, &now), 0);
	EXPECT_EQ(now.sndbuf, 131072);
}

TEST(Floor, ShrunkBufferIsNamedPerDirection)
{
	fd s(tcp());
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 131072, 131072, SOCKBUF_F_FALLBACK_LOCK, nullptr),
		  0);
	struct sockbuf_floor f = {131072, 131072};
	int small = 8192; // what a careless setsockopt would do
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), SOCKBUF_SND);
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), SOCKBUF_BOTH);
	struct sockbuf_state now;
	EXPECT_EQ(sockbuf_check_floor(s, &f, &now), SOCKBUF_BOTH);
	EXPECT_EQ(now.rcvbuf, 16384);
	// A direction with no floor is not checked.
	struct sockbuf_floor rcv_only = {0, 131072};
	EXPECT_EQ(sockbuf_check_floor(s, &rcv_only, nullptr), SOCKBUF_RCV);
}

TEST(Floor, BadFloorsAreInvalid)
{
	fd s(tcp());
	struct sockbuf_floor neg = {-1, 0};
	struct sockbuf_floor big = {0, SOCKBUF_SIZE_MAX + 1};
	struct sockbuf_floor none = {0, 0};
	EXPECT_EQ(sockbuf_check_floor(s, nullptr, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_check_floor(s, &neg, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_check_floor(s, &big, nullptr), -EOVERFLOW);
	EXPECT_EQ(sockbuf_check_floor(s, &none, nullptr), 0);
	EXPECT_EQ(sockbuf_restore_floor(s, &none, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_restore_floor(s, nullptr, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_report_floor(nullptr, &none), -EINVAL);
	int p[2];
	ASSERT_EQ(::pipe(p), 0);
	fd r(p[0]), w(p[1]);
	EXPECT_EQ(sockbuf_check_floor(r, &none, nullptr), -ENOTSOCK);
}

TEST(Floor, RestoreRaisesUnlockedAndNeverLowers)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK: restore would need a fallback";
	fd s(tcp());
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, 131072, 262144, 0, nullptr), 0);
	struct sockbuf_floor f = {131072, 131072};
	int small = 4096;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ASSERT_EQ(buflock(s), SOCKBUF_SND);

	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_restore_floor(s, &f, 0, &rep), 0);
	EXPECT_EQ(sndbuf(s), 131072);
	EXPECT_EQ(buflock(s), 0); // back under autotuning
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_UNLOCK);
	EXPECT_EQ(rep.snd.floor, 131072);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_HELD);
	EXPECT_EQ(rep.rcv.effective, 262144);
	EXPECT_EQ(rcvbuf(s), 262144); // above its floor: not lowered
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), 0);

	// Nothing below: nothing changes, both held.
	ASSERT_EQ(sockbuf_restore_floor(s, &f, 0, &rep), 0);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_HELD);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_HELD);
}

} // namespace
