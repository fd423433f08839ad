// SPDX-License-Identifier: MIT
// The probe reports what the kernel does, and caches it.
#include "probe.h"
#include "seam.h"
#include "sys.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <netinet/tcp.h>
#include <sys/utsname.h>
#include <thread>
#include <vector>

using namespace sockbuf::test;

namespace
{

TEST(Probe, FeaturesMatchWhatTheKernelAnswers)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
	fd s(tcp());
	int lock;
	socklen_t len = sizeof(lock);
	bool has_buf_lock = ::getsockopt(s, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) == 0;
	EXPECT_EQ((p.features & SOCKBUF_FEAT_BUF_LOCK) != 0, has_buf_lock);
	EXPECT_EQ((p.known & SOCKBUF_FEAT_BUF_LOCK) != 0, has_buf_lock);
	// Usable implies known, for every feature.
	EXPECT_EQ(p.features & ~p.known, 0u);
	EXPECT_TRUE(p.features & SOCKBUF_FEAT_TCP_INFO);
}

TEST(Probe, WindowClampQuirkMatchesTheKernel)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	if (!(p.features & SOCKBUF_FEAT_BUF_LOCK))
		GTEST_SKIP() << "kernel lacks SO_BUF_LOCK: the unlock recipe does not apply";
	fd s(tcp());
	int half = 65536, zero = 0;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &half, sizeof(half)), 0);
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_BUF_LOCK, &zero, sizeof(zero)), 0);
	bool clamped = getopt_int(s, IPPROTO_TCP, TCP_WINDOW_CLAMP) != 0;
	EXPECT_EQ((p.quirks & SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW) != 0, clamped);
}

TEST(Probe, MinimumsAndDefaultsAreTheKernels)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	fd s(tcp());
	EXPECT_EQ(p.tcp_sndbuf, sndbuf(s));
	EXPECT_EQ(p.tcp_rcvbuf, rcvbuf(s));
	int one = 1;
	::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
	::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one));
	EXPECT_EQ(p.min_sndbuf, sndbuf(s));
	EXPECT_EQ(p.min_rcvbuf, rcvbuf(s));
	EXPECT_GT(p.min_sndbuf, p.min_rcvbuf); // SOCK_MIN_SNDBUF = 2 x SOCK_MIN_RCVBUF
}

// One unit everywhere: the maxima are what the largest plain request reads
// back, not the sysctl that setsockopt() halves them to.
TEST(Probe, BufferMaximaAreWhatTheKernelStores)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	fd s(tcp());
	int huge = 0x7fffffff / 2;
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &huge, sizeof(huge)), 0);
	ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &huge, sizeof(huge)), 0);
	EXPECT_EQ(p.sndbuf_max, sndbuf(s));
	EXPECT_EQ(p.rcvbuf_max, rcvbuf(s));
	EXPECT_EQ(p.sndbuf_max, 2 * sysctl_int("/proc/sys/net/core/wmem_max"));
}

TEST(Probe, SysctlsAndReleaseAreRead)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	EXPECT_EQ(p.tcp_rmem[2], sysctl_int("/proc/sys/net/ipv4/tcp_rmem", 2));
	EXPECT_EQ(p.tcp_wmem[0], sysctl_int("/proc/sys/net/ipv4/tcp_wmem", 0));
	struct utsname u;
	ASSERT_EQ(uname(&u), 0);
	EXPECT_STREQ(p.release, u.release);
}

TEST(Probe, CachedResultIsStableAcrossThreads)
{
	struct sockbuf_probe_info first;
	ASSERT_EQ(sockbuf_probe(&first, 0), 0);
	std::vector<std::thread> threads;
	std::vector<struct sockbuf_probe_info> seen(8);
	for (int i = 0; i < 8; i++)
		threads.emplace_back([&seen, i] { sockbuf_probe(&seen[i], 0); });
	for (auto &t : threads)
		t.join();
	for (const auto &p : seen) {
		EXPECT_EQ(p.features, first.features);
		EXPECT_EQ(p.rcvbuf_max, first.rcvbuf_max);
	}
}

TEST(Probe, SimulatedOldKernelWithoutBufLock)
{
	{
		injector inj;
		inj.add({false, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
		inj.add({true, SOL_SOCKET, SO_BUF_LOCK, ENOPROTOOPT});
		struct sockbuf_probe_info p;
		ASSERT_EQ(sockbuf_probe(&p, SOCKBUF_PROBE_FRESH), 0);
		EXPECT_FALSE(p.known & SOCKBUF_FEAT_BUF_LOCK);
		EXPECT_FALSE(p.features & SOCKBUF_FEAT_BUF_LOCK);
		// The cache now describes the simulated kernel too.
		struct sockbuf_probe_info c;
		ASSERT_EQ(sockbuf_probe(&c, 0), 0);
		EXPECT_FALSE(c.features & SOCKBUF_FEAT_BUF_LOCK);
	}
	reprobe_real_kernel();
}

TEST(Probe, SocketFailureIsReturnedAndCacheKept)
{
	struct sockbuf_probe_info before;
	ASSERT_EQ(sockbuf_probe(&before, 0), 0);
	{
		injector inj;
		static const sockbuf::sys::hooks fail_socket = {
		    nullptr, nullptr, [](int, int, int) { return -EMFILE; }, nullptr};
		sockbuf::sys::set_hooks(&fail_socket);
		EXPECT_EQ(sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH), -EMFILE);
	}
	struct sockbuf_probe_info after;
	ASSERT_EQ(sockbuf_probe(&after, 0), 0);
	EXPECT_EQ(after.features, before.features);
}

TEST(Probe, SecondProbeSocketFailureIsAnErrorNotAMissingFeature)
{
	struct sockbuf_probe_info before;
	ASSERT_EQ(sockbuf_probe(&before, 0), 0);
	{
		injector inj;
		// The first probe socket works, the second (for SO_RCVLOWAT) not.
		static std::atomic<int> sockets{0};
		sockets = 0;
		static const sockbuf::sys::hooks second_fails = {
		    nullptr, nullptr,
		    [](int, int, int) {
			    return sockets.fetch_add(1) == 0 ? sockbuf::sys::pass : -ENFILE;
		    },
		    nullptr};
		sockbuf::sys::set_hooks(&second_fails);
		EXPECT_EQ(sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH), -ENFILE);
		EXPECT_EQ(sockets.load(), 2);
	}
	struct sockbuf_probe_info after;
	ASSERT_EQ(sockbuf_probe(&after, 0), 0);
	EXPECT_EQ(after.features, before.features); // the cache was kept
}

TEST(Probe, FirstProbeFailureIsEveryCallsError)
{
	fd s(tcp());
	{
		injector inj;
		static const sockbuf::sys::hooks fail_socket = {
		    nullptr, nullptr, [](int, int, int) { return -EMFILE; }, nullptr};
		sockbuf::sys::set_hooks(&fail_socket);
		sockbuf::probe::reset_for_tests();
		// No features are guessed: the calls fail with the probe's error
		// rather than lock or refuse on a kernel that could do better.
		EXPECT_EQ(
		    sockbuf_set_initial_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, nullptr),
		    -EMFILE);
		EXPECT_EQ(sockbuf_lock_bufsize(s, 65536, 0, 0, nullptr), -EMFILE);
		struct sockbuf_state st;
		EXPECT_EQ(sockbuf_get_state(s, &st), -EMFILE);
		EXPECT_EQ(buflock(s), 0);
	}
	// Retried on the next call once sockets can be made again.
	EXPECT_EQ(sockbuf_set_initial_bufsize(s, 65536, 0, SOCKBUF_F_FALLBACK_LOCK, nullptr), 0);
	EXPECT_EQ(sndbuf(s), 65536);
}

} // namespace
