// SPDX-License-Identifier: MIT
// set_initial above net.core.[wr]mem_max and tcp_[wr]mem[2]: forced and
// unlocked with CAP_NET_ADMIN, clamped and reported without it, and what a
// real transfer does to the forced size.
#include "child.h"
#include "no_net_admin.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

using namespace sockbuf::test;

namespace
{

// Twice the largest ceiling that applies, so the request is above every
// one of them: 2 x max(sndbuf_max, rcvbuf_max, tcp_wmem[2], tcp_rmem[2]).
int over_ceiling(const struct sockbuf_probe_info &p)
{
	int top = std::max({p.sndbuf_max, p.rcvbuf_max, p.tcp_wmem[2], p.tcp_rmem[2]});
	return top > 0 && top <= SOCKBUF_SIZE_MAX / 2 ? top * 2 : -1;
}

TEST(ForceCeiling, ForcedAboveEveryCeilingIsStoredAndUnlocked)
{
	struct sockbuf_probe_info p = probe();
	if (!(p.features & SOCKBUF_FEAT_FORCE))
		GTEST_SKIP() << "CAP_NET_ADMIN not effective: SO_*BUFFORCE unavailable";
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP()
		    << "kernel lacks SO_BUF_LOCK (before 5.15): a forced size stays locked";
	int want = over_ceiling(p);
	if (want < 0)
		GTEST_SKIP() << "mem_max / tcp_[wr]mem unreadable or too large to exceed";
	fd s(tcp());
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, want, want, SOCKBUF_F_ALLOW_FORCE, &rep), 0);
	for (const auto *d : {&rep.snd, &rep.rcv}) {
		EXPECT_EQ(d->strategy, SOCKBUF_STRAT_FORCE_UNLOCK);
		EXPECT_EQ(d->effective, want); // read back after the unlock
		EXPECT_EQ(d->locked, 0);
		EXPECT_EQ(d->floor, want);
		EXPECT_EQ(d->clamps, (uint32_t)SOCKBUF_CLAMP_TCP_MEM_MAX);
	}
	EXPECT_FALSE(rep.flags & SOCKBUF_R_FORCE_DENIED);
	EXPECT_EQ(sndbuf(s), want);
	EXPECT_EQ(rcvbuf(s), want);
	EXPECT_EQ(buflock(s), 0);
}

TEST(ForceCeiling, WithoutCapabilityTheClampIsNamed)
{
	struct sockbuf_probe_info p = probe();
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK (before 5.15)";
	int want = over_ceiling(p);
	if (want < 0)
		GTEST_SKIP() << "mem_max / tcp_[wr]mem unreadable or too large to exceed";
	// In a child without CAP_NET_ADMIN (dropped with libcap-ng, or never
	// held): the request is cut by *mem_max and the report says so.
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct sockbuf_probe_info q = drop_net_admin_in_child();
		fd s(tcp());
		struct sockbuf_report rep;
		if (sockbuf_set_initial_bufsize(s, want, want, SOCKBUF_F_ALLOW_FORCE, &rep) != 0)
			_exit(5);
		if (!(rep.flags & SOCKBUF_R_FORCE_DENIED))
			_exit(6);
		const int max[2] = {q.sndbuf_max, q.rcvbuf_max};
		const int tcp_max[2] = {q.tcp_wmem[2], q.tcp_rmem[2]};
		const struct sockbuf_dir_report *d[2] = {&rep.snd, &rep.rcv};
		for (int i = 0; i < 2; i++) {
			if (d[i]->strategy != SOCKBUF_STRAT_UNLOCK || d[i]->locked != 0)
				_exit(7);
			if (d[i]->effective != max[i] || !(d[i]->clamps & SOCKBUF_CLAMP_MEM_MAX))
				_exit(8);
			// The autotuning ceiling is named exactly when the clamped
			// size still lies above it.
			bool above = max[i] > tcp_max[i];
			if (((d[i]->clamps & SOCKBUF_CLAMP_TCP_MEM_MAX) != 0) != above)
				_exit(9);
		}
		_exit(0);
	}
	expect_child_exited_0(pid,
			      "3: capng_apply failed, 4: probe still saw FORCE, 5: set_initial "
			      "failed, 6: no FORCE_DENIED, 7: not unlocked, 8: not cut to "
			      "*mem_max with MEM_MAX, 9: TCP_MEM_MAX wrong");
}

// Sets @mtu on lo in this (test-created) network namespace.
bool lo_up(int mtu)
{
	fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
	struct ifreq ifr {
	};
	std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ifr.ifr_mtu = mtu;
	if (::ioctl(s, SIOCSIFMTU, &ifr) != 0)
		return false;
	if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		return false;
	ifr.ifr_flags |= IFF_UP;
	return ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
}

struct transfer_mins {
	int snd = 0, rcv = 0;	      // lowest sampled
	int snd_end = 0, rcv_end = 0; // after the transfer
	long long bytes = 0;
};

// Forced, unlocked @size on the listener (receive) and the client (send),
// before listen()/connect(); then at most @limit bytes or 10 s, sampling
// both sizes after every write.  Returns an exit code for the child.
int forced_transfer(int size, long long limit, transfer_mins *out)
{
	struct sockaddr_in sa {
	};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	fd l(tcp());
	struct sockbuf_report rep;
	if (sockbuf_set_initial_bufsize(l, 0, size, SOCKBUF_F_ALLOW_FORCE, &rep) != 0 ||
	    rep.rcv.effective != size || rep.rcv.locked != 0)
		return 20;
	if (::bind(l, (sockaddr *)&sa, sizeof(sa)) || ::listen(l, 1) ||
	    ::getsockname(l, (sockaddr *)&sa, &len))
		return 21;
	fd c(tcp());
	if (sockbuf_set_initial_bufsize(c, size, 0, SOCKBUF_F_ALLOW_FORCE, &rep) != 0 ||
	    rep.snd.effective != size || rep.snd.locked != 0)
		return 22;
	if (::connect(c, (sockaddr *)&sa, sizeof(sa)))
		return 23;
	fd a(::accept(l, nullptr, nullptr));
	if (a < 0)
		return 24;
	std::atomic<long long> got{0};
	std::thread reader([&] {
		std::vector<char> buf(1 << 20);
		for (;;) {
			ssize_t n = ::read(a, buf.data(), buf.size());
			if (n <= 0)
				return;
			got += n;
		}
	});
	struct timeval tv = {1, 0}; // writes come back to look at the clock
	::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	std::vector<char> chunk(1 << 20, 'x');
	out->snd = sndbuf(c);
	out->rcv = rcvbuf(a);
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	long long sent = 0;
	while (sent < limit && std::chrono::steady_clock::now() < end) {
		ssize_t n = ::write(c, chunk.data(), chunk.size());
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			break;
		sent += n > 0 ? n : 0;
		out->snd = std::min(out->snd, sndbuf(c));
		out->rcv = std::min(out->rcv, rcvbuf(a));
	}
	::shutdown(c, SHUT_WR);
	reader.join();
	out->snd_end = sndbuf(c);
	out->rcv_end = rcvbuf(a);
	out->bytes = got;
	return got == sent && sent > 0 ? 0 : 25;
}

// One bounded bulk transfer on loopback in a network namespace this test
// makes (lo at @mtu), in a child; the parent reads the lowest sizes seen.
int run_in_netns(int mtu, int size, long long limit, transfer_mins *out)
{
	int pipefd[2];
	if (::pipe2(pipefd, O_CLOEXEC) != 0)
		return -1;
	pid_t pid = ::fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		::close(pipefd[0]);
		if (::unshare(CLONE_NEWNET) != 0)
			_exit(10);
		if (!lo_up(mtu))
			_exit(11);
		transfer_mins m;
		int rc = forced_transfer(size, limit, &m);
		if (::write(pipefd[1], &m, sizeof(m)) != (ssize_t)sizeof(m))
			_exit(12);
		_exit(rc);
	}
	::close(pipefd[1]);
	ssize_t n = ::read(pipefd[0], out, sizeof(*out));
	::close(pipefd[0]);
	int status = 0;
	::waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status) ? WEXITSTATUS(status) : (n == (ssize_t)sizeof(*out) ? 0 : 13);
}

// Skips unless the over-ceiling force path can run here.
bool force_ready(const struct sockbuf_probe_info &p, std::string *why)
{
	if (!(p.features & SOCKBUF_FEAT_FORCE))
		*why = "CAP_NET_ADMIN not effective: SO_*BUFFORCE unavailable";
	else if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		*why = "kernel lacks SO_BUF_LOCK (before 5.15): a forced size stays locked";
	else if (over_ceiling(p) < 0)
		*why = "mem_max / tcp_[wr]mem unreadable or too large to exceed";
	else
		return true;
	return false;
}

constexpr const char *exit_codes = "10: unshare(CLONE_NEWNET) failed, 11: lo not set up, "
				   "20/22: listener/client not forced and unlocked, "
				   "21/23/24: loopback setup, 25: bytes lost";

// Ethernet-sized segments: the congestion window never asks tcp_sndbuf_expand()
// for more than the forced size, and neither buffer moves below it.
TEST(ForceCeiling, ForcedUnlockedBuffersHoldThroughABulkTransfer)
{
	struct sockbuf_probe_info p = probe();
	std::string why;
	if (!force_ready(p, &why))
		GTEST_SKIP() << why;
	const int size = over_ceiling(p);
	transfer_mins m;
	int rc = run_in_netns(1500, size, 512ll << 20, &m);
	if (rc == 10)
		GTEST_SKIP() << "cannot make a network namespace (unshare: no CAP_SYS_ADMIN?)";
	ASSERT_EQ(rc, 0) << exit_codes;
	EXPECT_GT(m.bytes, 0);
	EXPECT_GE(m.snd, size) << "send buffer fell below the forced size";
	EXPECT_GE(m.rcv, size) << "receive buffer fell below the forced size";
	EXPECT_GE(m.snd_end, size);
	EXPECT_GE(m.rcv_end, size);
}

// 64 KB segments (loopback's own MTU): a few dozen segments of congestion
// window already ask for more than the forced size, and tcp_sndbuf_expand()
// sets the send buffer to tcp_wmem[2], below it.  The receive buffer stays.
// The floor guard (restore_floor with SOCKBUF_F_ALLOW_FORCE) puts it back.
TEST(ForceCeiling, SendBufferFallsToTcpWmemMaxWhenTheWindowOutgrowsIt)
{
	struct sockbuf_probe_info p = probe();
	std::string why;
	if (!force_ready(p, &why))
		GTEST_SKIP() << why;
	// Just above the send-side ceilings: 2 x max(sndbuf_max, tcp_wmem[2]).
	const int size = std::max(p.sndbuf_max, p.tcp_wmem[2]) * 2;
	transfer_mins m;
	int rc = run_in_netns(65536, size, 512ll << 20, &m);
	if (rc == 10)
		GTEST_SKIP() << "cannot make a network namespace (unshare: no CAP_SYS_ADMIN?)";
	ASSERT_EQ(rc, 0) << exit_codes;
	EXPECT_GE(m.rcv, size) << "receive buffer fell below the forced size";
	// Either the window never outgrew the buffer, or the buffer went to
	// exactly tcp_wmem[2]: never lower, with no memory pressure.
	if (m.snd < size)
		EXPECT_EQ(m.snd, p.tcp_wmem[2]);
	else
		GTEST_SKIP() << "the congestion window never outgrew " << size
			     << " bytes in 512 MB: nothing to see";
}

} // namespace
