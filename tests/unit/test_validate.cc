// SPDX-License-Identifier: MIT
// Bad input gets a precise error and changes nothing.
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <sys/un.h>

using namespace sockbuf::test;

namespace
{

// The socket as it was before a rejected call.
struct snapshot {
	int snd, rcv, lock;
	explicit snapshot(int s) : snd(sndbuf(s)), rcv(rcvbuf(s)), lock(buflock(s)) {}
	bool operator==(const snapshot &o) const
	{
		return snd == o.snd && rcv == o.rcv && lock == o.lock;
	}
};

TEST(Validate, NegativeSizesAreInvalidAndChangeNothing)
{
	fd s(tcp());
	snapshot before(s);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, -1, 65536, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, -65536, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_lock_bufsize(s, -1, 0, 0, nullptr), -EINVAL);
	EXPECT_TRUE(snapshot(s) == before);
}

TEST(Validate, BothZeroIsInvalid)
{
	fd s(tcp());
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 0, 0, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_lock_bufsize(s, 0, 0, 0, nullptr), -EINVAL);
}

TEST(Validate, SizesPastTheMaximumOverflow)
{
	fd s(tcp());
	snapshot before(s);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, SOCKBUF_SIZE_MAX + 1, 0, 0, nullptr), -EOVERFLOW);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 0, 0x7fffffff, 0, nullptr), -EOVERFLOW);
	EXPECT_EQ(sockbuf_lock_bufsize(s, 0x7fffffff, 4096, 0, nullptr), -EOVERFLOW);
	EXPECT_TRUE(snapshot(s) == before);
	// The largest accepted size itself is fine (clamped by the kernel).
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, SOCKBUF_SIZE_MAX, 0, 0, nullptr), 0);
}

TEST(Validate, NegativeFdIsBadf)
{
	EXPECT_EQ(sockbuf_set_initial_bufsize(-1, 65536, 0, 0, nullptr), -EBADF);
	EXPECT_EQ(sockbuf_lock_bufsize(-5, 65536, 0, 0, nullptr), -EBADF);
	struct sockbuf_state st;
	EXPECT_EQ(sockbuf_get_state(-1, &st), -EBADF);
	struct sockbuf_floor f = {4096, 0};
	EXPECT_EQ(sockbuf_check_floor(-1, &f, nullptr), -EBADF);
	EXPECT_EQ(sockbuf_restore_floor(-1, &f, 0, nullptr), -EBADF);
}

TEST(Validate, ClosedFdIsBadf)
{
	int s = tcp();
	ASSERT_GE(s, 0);
	::close(s);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, 0, nullptr), -EBADF);
	EXPECT_EQ(sockbuf_lock_bufsize(s, 65536, 0, 0, nullptr), -EBADF);
	struct sockbuf_floor f = {0, 4096};
	EXPECT_EQ(sockbuf_check_floor(s, &f, nullptr), -EBADF);
}

TEST(Validate, PipeAndFileAreNotSockets)
{
	int p[2];
	ASSERT_EQ(::pipe(p), 0);
	fd r(p[0]), w(p[1]);
	EXPECT_EQ(sockbuf_set_initial_bufsize(r, 65536, 0, 0, nullptr), -ENOTSOCK);
	EXPECT_EQ(sockbuf_lock_bufsize(w, 65536, 0, 0, nullptr), -ENOTSOCK);
	struct sockbuf_floor f = {4096, 4096};
	EXPECT_EQ(sockbuf_check_floor(r, &f, nullptr), -ENOTSOCK);
	fd file(::open("/proc/self/stat", O_RDONLY | O_CLOEXEC));
	ASSERT_GE(file, 0);
	EXPECT_EQ(sockbuf_set_initial_bufsize(file, 65536, 0, 0, nullptr), -ENOTSOCK);
	struct sockbuf_state st;
	EXPECT_EQ(sockbuf_get_state(file, &st), -ENOTSOCK);
}

TEST(Validate, SetInitialIsTcpOnlyLockWorksForUdpAndUnix)
{
	fd u(udp());
	snapshot before(u);
	EXPECT_EQ(sockbuf_set_initial_bufsize(u, 65536, 65536, 0, nullptr), -EPROTOTYPE);
	EXPECT_TRUE(snapshot(u) == before);
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_lock_bufsize(u, 65536, 65536, 0, &rep), 0);
	EXPECT_EQ(sndbuf(u), 65536);
	EXPECT_EQ(rcvbuf(u), 65536);
	EXPECT_EQ(rep.tcp_state, -1);
	EXPECT_EQ(rep.rcv.locked, 1);

	int sv[2];
	ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fd a(sv[0]), b(sv[1]);
	EXPECT_EQ(sockbuf_set_initial_bufsize(a, 65536, 0, 0, nullptr), -EPROTOTYPE);
	ASSERT_EQ(sockbuf_lock_bufsize(a, 65536, 0, 0, &rep), 0);
	EXPECT_EQ(sndbuf(a), 65536);
	struct sockbuf_floor f = {0, 4096};
	EXPECT_EQ(sockbuf_restore_floor(a, &f, 0, nullptr), -EPROTOTYPE);
}

TEST(Validate, UnknownAndContradictoryFlags)
{
	fd s(tcp());
	snapshot before(s);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, 1u << 30, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_set_initial_bufsize(
		      s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK | SOCKBUF_F_FALLBACK_DEFAULT, nullptr),
		  -EINVAL);
	// Fallbacks and reservations mean nothing to lock.
	EXPECT_EQ(sockbuf_lock_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_lock_bufsize(s, 65536, 0, SOCKBUF_F_RESERVE_MEM, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_probe(nullptr, 2), -EINVAL);
	EXPECT_TRUE(snapshot(s) == before);
}

TEST(Validate, BadArgumentsComeBeforeSocketChecks)
{
	// A bad size on a non-socket is reported as the bad size: argument
	// errors are found without a syscall.
	EXPECT_EQ(sockbuf_set_initial_bufsize(-1, -1, 0, 0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_get_state(0, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_check_floor(0, nullptr, nullptr), -EINVAL);
}

} // namespace
