// SPDX-License-Identifier: MIT
// Bad input gets a precise error and changes nothing.
#include "guard_util.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <linux/netlink.h>
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

// Sockets that read IPPROTO_TCP (6) in SO_PROTOCOL but are not TCP: a raw
// socket of protocol TCP (CAP_NET_RAW), and a NETLINK_XFRM socket, whose
// protocol number is 6 too (anyone may make one).  Each gets what a UDP
// socket gets: set_initial, restore_floor and guard_add refuse it with
// -EPROTOTYPE and change nothing; lock, get_state and check_floor take it
// as any socket, with no TCP state.
void expect_not_tcp(int s, const char *what)
{
	SCOPED_TRACE(what);
	ASSERT_GE(s, 0);
	ASSERT_EQ(getopt_int(s, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	// Locked at a small size first: a call taking it for TCP would clear
	// the lock bit (SO_BUF_LOCK) or raise the size.
	int small = 8192;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	snapshot before(s);
	struct sockbuf_report rep;
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 65536, 0, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 0, 65536, 0, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, &rep),
		  -EPROTOTYPE);
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 65536, SOCKBUF_F_RESERVE_MEM, &rep),
		  -EPROTOTYPE);
	const struct sockbuf_floor above = {65536, 65536}, met = {1, 1};
	EXPECT_EQ(sockbuf_restore_floor(s, &above, 0, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_restore_floor(s, &met, 0, &rep), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_restore_floor(s, &met, SOCKBUF_F_RESERVE_MEM, &rep), -EPROTOTYPE);
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	EXPECT_EQ(sockbuf_guard_add(g.id, s, &above), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_guard_remove(g.id, s), -ENOENT);
	EXPECT_TRUE(snapshot(s) == before)
	    << "sndbuf " << before.snd << " -> " << sndbuf(s) << ", rcvbuf " << before.rcv << " -> "
	    << rcvbuf(s) << ", lock " << before.lock << " -> " << buflock(s);

	struct sockbuf_state st;
	ASSERT_EQ(sockbuf_get_state(s, &st), 0);
	EXPECT_EQ(st.protocol, IPPROTO_TCP);
	EXPECT_NE(st.type, SOCK_STREAM);
	EXPECT_EQ(st.tcp_state, -1);
	EXPECT_EQ(st.snd_wscale, -1);
	EXPECT_EQ(st.rcv_wscale, -1);
	EXPECT_EQ(sockbuf_check_floor(s, &above, nullptr), SOCKBUF_BOTH);
	EXPECT_EQ(sockbuf_check_floor(s, &above, &st), SOCKBUF_BOTH);
	EXPECT_EQ(sockbuf_check_floor(s, &met, nullptr), 0);

	ASSERT_EQ(sockbuf_lock_bufsize(s, 65536, 65536, 0, &rep), 0);
	EXPECT_EQ(rep.tcp_state, -1);
	EXPECT_EQ(rep.flags & (SOCKBUF_R_LISTENER | SOCKBUF_R_AFTER_HANDSHAKE), 0u);
	EXPECT_EQ(rep.snd.locked, 1);
	EXPECT_EQ(rep.rcv.locked, 1);
	EXPECT_EQ(rep.rcv.effective, rcvbuf(s));
}

TEST(Validate, NetlinkXfrmSocketOfProtocolSixIsNotTcp)
{
	fd s(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_XFRM));
	if (s < 0)
		GTEST_SKIP() << "socket(AF_NETLINK, SOCK_RAW, NETLINK_XFRM): "
			     << std::strerror(errno) << " (no CONFIG_XFRM_USER?)";
	expect_not_tcp(s, "AF_NETLINK, SOCK_RAW, NETLINK_XFRM");
}

TEST(Validate, RawSocketOfProtocolTcpIsNotTcp)
{
	for (int family : {AF_INET, AF_INET6}) {
		fd s(::socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP));
		if (s < 0 && (errno == EPERM || errno == EACCES))
			GTEST_SKIP() << "socket(SOCK_RAW, IPPROTO_TCP) needs CAP_NET_RAW: "
				     << std::strerror(errno);
		if (s < 0 && family == AF_INET6 && errno == EAFNOSUPPORT)
			continue; // no IPv6 here
		expect_not_tcp(s, family == AF_INET ? "AF_INET, SOCK_RAW, IPPROTO_TCP"
						    : "AF_INET6, SOCK_RAW, IPPROTO_TCP");
	}
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
