// SPDX-License-Identifier: MIT
// Calls from many threads at once, with the probe cache refilled under
// them: every call still sees a consistent kernel and reports correctly.
#include "sys.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace sockbuf::test;

namespace
{

TEST(Threads, ConcurrentCallsAndProbeRefresh)
{
	constexpr int threads = 6, rounds = 300;
	std::atomic<int> wrong{0};
	std::atomic<bool> stop{false};
	std::thread refresher([&stop] {
		for (int i = 0; i < 200 && !stop; i++)
			sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH);
	});
	std::vector<std::thread> workers;
	for (int t = 0; t < threads; t++) {
		workers.emplace_back([&wrong, t] {
			for (int i = 0; i < rounds; i++) {
				fd s(tcp());
				int size = 65536 + 4096 * t;
				struct sockbuf_report rep;
				if (sockbuf_set_initial_bufsize(
					s, size, size, SOCKBUF_F_FALLBACK_LOCK, &rep) != 0 ||
				    rep.snd.effective != size || sndbuf(s) != size ||
				    rcvbuf(s) != size)
					wrong++;
				struct sockbuf_floor f = {size, size};
				if (sockbuf_check_floor(s, &f, nullptr) != 0)
					wrong++;
			}
		});
	}
	for (auto &w : workers)
		w.join();
	stop = true;
	refresher.join();
	EXPECT_EQ(wrong.load(), 0);
}

// Two threads on ONE socket, each touching only its own direction.  The
// lock bits must end as the two reports say: a read-modify-write of
// SO_BUF_LOCK that is not serialised lets one thread write back the other's
// transient lock bit.  The seam holds SO_RCVBUF writes back for 100 us and
// SO_BUF_LOCK writes for 200 us, so that the receive side's write lands
// between the send side's read and write of the lock bits in every round,
// not in one round out of hundreds.
int delayed_writes(int, int level, int name, const void *, socklen_t)
{
	if (level == SOL_SOCKET && name == SO_RCVBUF)
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	if (level == SOL_SOCKET && name == SO_BUF_LOCK)
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	return sockbuf::sys::pass;
}

template <typename SndCall, typename RcvCall>
int count_lying_rounds(int rounds, SndCall snd_call, RcvCall rcv_call, int expect_lock)
{
	const sockbuf::sys::hooks widen = {nullptr, delayed_writes, nullptr, nullptr};
	sockbuf::sys::set_hooks(&widen);
	int lying = 0;
	for (int i = 0; i < rounds; i++) {
		fd s(tcp());
		std::latch start(2);
		int ret[2] = {-1, -1};
		std::thread a([&] {
			start.arrive_and_wait();
			ret[0] = snd_call(int(s));
		});
		std::thread b([&] {
			start.arrive_and_wait();
			ret[1] = rcv_call(int(s));
		});
		a.join();
		b.join();
		if (ret[0] != 0 || ret[1] != 0 || buflock(s) != expect_lock)
			lying++;
	}
	sockbuf::sys::set_hooks(nullptr);
	return lying;
}

TEST(Threads, OneSocketTwoDirectionsUnlockTogether)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel has no SO_BUF_LOCK: no lock bits to race on";
	int lying = count_lying_rounds(
	    200, [](int s) { return sockbuf_set_initial_bufsize(s, 65536, 0, 0, nullptr); },
	    [](int s) { return sockbuf_set_initial_bufsize(s, 0, 65536, 0, nullptr); }, 0);
	EXPECT_EQ(lying, 0) << "rounds left locked although both calls report unlocked";
}

TEST(Threads, OneSocketLockOneDirectionUnlockTheOther)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel has no SO_BUF_LOCK: no lock bits to race on";
	int lying = count_lying_rounds(
	    200, [](int s) { return sockbuf_set_initial_bufsize(s, 65536, 0, 0, nullptr); },
	    [](int s) { return sockbuf_lock_bufsize(s, 0, 65536, 0, nullptr); }, SOCKBUF_RCV);
	EXPECT_EQ(lying, 0) << "rounds whose lock bits are not exactly the receive lock";
}

// A child forked while another thread is inside a call on the same fd
// (so holding that fd's serialisation) must not wait for a thread that
// does not exist in the child.
std::atomic<bool> g_in_call{false};
int parked_lock_write(int, int level, int name, const void *, socklen_t)
{
	if (level == SOL_SOCKET && name == SO_BUF_LOCK) {
		g_in_call = true;
		std::this_thread::sleep_for(std::chrono::milliseconds(300));
	}
	return sockbuf::sys::pass;
}

TEST(Threads, ForkWhileAnotherThreadHoldsTheSocket)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel has no SO_BUF_LOCK: the call never writes the lock bits";
	fd s(tcp());
	const sockbuf::sys::hooks park = {nullptr, parked_lock_write, nullptr, nullptr};
	sockbuf::sys::set_hooks(&park);
	g_in_call = false;
	std::thread holder([&s] { sockbuf_set_initial_bufsize(s, 65536, 0, 0, nullptr); });
	while (!g_in_call)
		std::this_thread::yield();
	pid_t child = fork();
	if (child == 0) {
		sockbuf::sys::set_hooks(nullptr);
		alarm(5); // a child stuck on the stripe dies of SIGALRM
		_exit(sockbuf_set_initial_bufsize(s, 0, 65536, 0, nullptr) == 0 ? 0 : 1);
	}
	holder.join();
	sockbuf::sys::set_hooks(nullptr);
	ASSERT_GT(child, 0);
	int status = 0;
	ASSERT_EQ(waitpid(child, &status, 0), child);
	EXPECT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
	EXPECT_EQ(WEXITSTATUS(status), 0);
}

} // namespace
