// SPDX-License-Identifier: MIT
// Real TCP transfers on loopback: set_initial on a listener is inherited by
// the accepted socket, stays unlocked and grows; lock never moves.
#include "loopback.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

namespace
{

using sockbuf::lab::bulk_transfer;
using sockbuf::lab::transfer_result;
using sockbuf::test::has_buf_lock;

constexpr uint64_t transfer_bytes = 64ull << 20;
constexpr double transfer_seconds = 20.0;
constexpr int initial = 131072;

void expect_complete(const transfer_result &r)
{
	ASSERT_EQ(r.err, 0) << r.what;
	EXPECT_FALSE(r.corrupt);
	EXPECT_FALSE(r.timed_out);
	EXPECT_EQ(r.bytes, transfer_bytes);
}

TEST(RealSocket, InitialOnListenerIsInheritedUnlockedAndGrows)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15): receive goes through "
				"SO_RCVLOWAT, covered by the contract suite";
	struct sockbuf_floor floor = {};
	auto setup = [&floor](int fd) {
		struct sockbuf_report rep;
		int ret = sockbuf_set_initial_bufsize(fd, initial, initial, 0, &rep);
		sockbuf_report_floor(&rep, &floor);
		return ret;
	};
	transfer_result r = bulk_transfer(transfer_bytes, transfer_seconds, setup, nullptr);
	expect_complete(r);
	EXPECT_EQ(r.server_rcvbuf.first, initial); // accepted socket inherited it
	EXPECT_EQ(r.server_lock, 0);		   // and the unlocked state
	EXPECT_GT(r.server_rcvbuf.max, initial);   // autotuning grew it
	EXPECT_GE(r.server_rcvbuf.min, floor.rcv); // never below the floor
	EXPECT_EQ(floor.rcv, initial);
}

TEST(RealSocket, LockedSizeNeverMoves)
{
	auto setup = [](int fd) { return sockbuf_lock_bufsize(fd, initial, initial, 0, nullptr); };
	transfer_result r = bulk_transfer(transfer_bytes, transfer_seconds, setup, nullptr);
	expect_complete(r);
	EXPECT_EQ(r.server_rcvbuf.min, initial);
	EXPECT_EQ(r.server_rcvbuf.max, initial);
	if (has_buf_lock()) {
		EXPECT_EQ(r.server_lock, SOCKBUF_BOTH);
	}
}

TEST(RealSocket, InitialKeepsTheWindowScaleLockLosesIt)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	auto initial_setup = [](int fd) {
		return sockbuf_set_initial_bufsize(fd, initial, initial, 0, nullptr);
	};
	auto lock_setup = [](int fd) {
		return sockbuf_lock_bufsize(fd, initial, initial, 0, nullptr);
	};
	const uint64_t small = 1 << 20;
	transfer_result plain = bulk_transfer(small, transfer_seconds, nullptr, nullptr);
	transfer_result init = bulk_transfer(small, transfer_seconds, initial_setup, initial_setup);
	transfer_result lock = bulk_transfer(small, transfer_seconds, lock_setup, lock_setup);
	ASSERT_EQ(plain.err, 0);
	ASSERT_EQ(init.err, 0);
	ASSERT_EQ(lock.err, 0);
	EXPECT_EQ(init.server_rcv_wscale, plain.server_rcv_wscale);
	EXPECT_EQ(init.client_rcv_wscale, plain.client_rcv_wscale);
	EXPECT_LT(lock.server_rcv_wscale, plain.server_rcv_wscale);
}

} // namespace
