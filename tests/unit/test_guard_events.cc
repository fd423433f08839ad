// SPDX-License-Identifier: MIT
// The floor guard's event source (SOCKBUF_GUARD_EVENTS) on this host's
// kernel: BPF programs on the exit of __sk_mem_raise_allocated() and
// tcp_check_space() name the guarded sockets they find below a floor, and
// the guard restores those alone, through its usual restore and identity
// check.  What each test exercises, honestly: the cuts here are made with
// setsockopt(SO_SNDBUF) (no global sysctl may change on this machine),
// which goes through neither function; the record comes from the
// tcp_check_space() program, which runs on the ACK that the test's own
// traffic brings back, and finds the buffer below.  The memory-pressure
// cut inside __sk_mem_raise_allocated() is for the kernel matrix (qemu).
// Missing BPF, BTF or capabilities is a reported skip; the fallback is
// tested by dropping the capabilities in a child.
#include "child.h"
#include "guard.h"
#include "guard_util.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cap-ng.h>

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

using namespace sockbuf::test;

namespace
{

constexpr unsigned int long_net_us = 60'000'000; // no safety-net pass during a test

// "" when a guard of this process gets events; else why not.
std::string events_missing()
{
	guard_id g(SOCKBUF_GUARD_EVENTS);
	struct sockbuf_guard_event_totals t;
	if (g.id < 0 || sockbuf_guard_event_stats(g.id, &t) != 0)
		return "the guard itself failed";
	if (t.err != 0)
		return std::string("BPF events unavailable: ") + strerror(-t.err);
	return "";
}

// A connected pair whose client is guarded at floor_size (send) and then
// cut below it by setsockopt.
struct cut_pair {
	tcp_pair p;
	bool ok = false;
	explicit cut_pair(int guard)
	{
		const struct sockbuf_floor fl = {floor_size, 0};
		ok = make_pair(&p) &&
		     sockbuf_set_initial_bufsize(p.client, floor_size, 0, 0, nullptr) == 0 &&
		     sockbuf_guard_add(guard, p.client, &fl) == 0;
	}
};

// Data from the client, read by the server: the ACKs that come back run
// tcp_check_space() on the client.  Bounded: 64 KiB.
void traffic(const tcp_pair &p)
{
	char buf[4096] = {};
	for (int k = 0; k < 16; k++) {
		ASSERT_EQ(::send(p.client, buf, sizeof(buf), MSG_DONTWAIT), ssize_t(sizeof(buf)));
		size_t got = 0;
		while (got < sizeof(buf)) {
			const ssize_t r = ::recv(p.server, buf, sizeof(buf) - got, 0);
			ASSERT_GT(r, 0);
			got += size_t(r);
		}
	}
}

struct events_totals {
	struct sockbuf_guard_event_totals ev = {};
	struct sockbuf_guard_totals t = {};
	explicit events_totals(int g)
	{
		EXPECT_EQ(sockbuf_guard_event_stats(g, &ev), 0);
		EXPECT_EQ(sockbuf_guard_stats(g, &t), 0);
	}
};

} // namespace

TEST(GuardEvents, BadInput)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	EXPECT_EQ(sockbuf_guard_event_stats(g.id, nullptr), -EINVAL);
	EXPECT_EQ(sockbuf_guard_event_stats(-1, nullptr), -EBADF);
	EXPECT_EQ(sockbuf_guard_set_net_interval(g.id, 99), -EINVAL);
	EXPECT_EQ(sockbuf_guard_set_net_interval(g.id, 60'000'001), -EINVAL);
	EXPECT_EQ(sockbuf_guard_set_net_interval(-1, 1'000'000), -EBADF);
	struct sockbuf_guard_event_totals t;
	ASSERT_EQ(sockbuf_guard_event_stats(g.id, &t), 0);
	EXPECT_EQ(t.err, -EPERM); // not asked for
	EXPECT_EQ(t.attached, 0u);
	EXPECT_EQ(t.net_interval_us, 1'000'000u);
}

// Which functions are attached on this kernel, said in the test's output.
TEST(GuardEvents, AttachesToTheCuttingFunctions)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id g(SOCKBUF_GUARD_EVENTS);
	struct sockbuf_guard_event_totals t;
	ASSERT_EQ(sockbuf_guard_event_stats(g.id, &t), 0);
	EXPECT_EQ(t.err, 0);
	EXPECT_TRUE(t.attached & SOCKBUF_GUARD_EV_MEM_RAISE);
	EXPECT_TRUE(t.attached &
		    (SOCKBUF_GUARD_EV_CHECK_SPACE | SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE));
	std::printf("attached:%s%s%s\n",
		    t.attached & SOCKBUF_GUARD_EV_MEM_RAISE ? " __sk_mem_raise_allocated" : "",
		    t.attached & SOCKBUF_GUARD_EV_CHECK_SPACE ? " tcp_check_space" : "",
		    t.attached & SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE ? " __tcp_check_space" : "");
}

// The thread driver: after its first (full) pass the safety net is 60 s
// away, so a restore within the test's 5 s bound came from the record.
TEST(GuardEvents, ThreadRestoresTheSocketARecordNames)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK: a restore here locks, another test's matter";
	guard_id g(SOCKBUF_GUARD_EVENTS);
	ASSERT_EQ(sockbuf_guard_set_net_interval(g.id, long_net_us), 0);
	cut_pair c(g.id);
	ASSERT_TRUE(c.ok);
	ASSERT_EQ(sockbuf_guard_start(g.id, 10'000), 0);
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (events_totals(g.id).t.passes < 1 && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	ASSERT_EQ(events_totals(g.id).t.passes, 1u);
	ASSERT_NO_FATAL_FAILURE(push_below(c.p.client));
	ASSERT_NO_FATAL_FAILURE(traffic(c.p));
	while (sndbuf(c.p.client) < floor_size && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	ASSERT_EQ(sockbuf_guard_stop(g.id), 0);
	EXPECT_GE(sndbuf(c.p.client), floor_size);
	events_totals e(g.id);
	EXPECT_EQ(e.t.passes, 1u); // the first only: the record did it
	EXPECT_EQ(e.t.interval_us, 0u);
	EXPECT_GE(e.ev.records, 1u);
	EXPECT_EQ(e.ev.restored_events, 1u);
	EXPECT_EQ(e.ev.restored_passes, 0u);
	EXPECT_EQ(e.ev.lost, 0u);
}

// The caller's loop: the fd is readable on a record, and the pass it calls
// looks at the socket named only (not at the other guarded one).
TEST(GuardEvents, TimerfdIsReadableOnARecordAndPassLooksAtItAlone)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK";
	guard_id g(SOCKBUF_GUARD_EVENTS);
	ASSERT_EQ(sockbuf_guard_set_net_interval(g.id, long_net_us), 0);
	cut_pair c(g.id);
	ASSERT_TRUE(c.ok);
	fd other(tcp());
	const struct sockbuf_floor fl = {4096, 0};
	ASSERT_EQ(sockbuf_guard_add(g.id, other, &fl), 0);
	const int efd = sockbuf_guard_timerfd(g.id, 10'000);
	ASSERT_GE(efd, 0);
	struct pollfd pfd = {efd, POLLIN, 0};
	EXPECT_EQ(::poll(&pfd, 1, 0), 0); // nothing cut, the timer 60 s away
	ASSERT_NO_FATAL_FAILURE(push_below(c.p.client));
	ASSERT_NO_FATAL_FAILURE(traffic(c.p));
	ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "no record within 5 s";
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.sockets, 1);
	EXPECT_EQ(rep.below, 1);
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(c.p.client), floor_size);
	events_totals e(g.id);
	EXPECT_EQ(e.t.passes, 0u);
	EXPECT_EQ(e.t.interval_us, long_net_us);
	EXPECT_EQ(e.ev.restored_events, 1u);
	EXPECT_EQ(e.ev.rounds, 1u);
	// One record for the cut, not one per ACK: the socket is restored
	// and the traffic goes on without another.
	ASSERT_NO_FATAL_FAILURE(traffic(c.p));
	EXPECT_EQ(::poll(&pfd, 1, 100), 0);
}

// No flood: a socket left below (restores refused by the seam would be
// another test; here the guard simply does not run) posts one record,
// however many ACKs find it below.
TEST(GuardEvents, OneRecordPerCutSocketUntilTheGuardLooks)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id g(SOCKBUF_GUARD_EVENTS);
	ASSERT_EQ(sockbuf_guard_set_net_interval(g.id, long_net_us), 0);
	cut_pair c(g.id);
	ASSERT_TRUE(c.ok);
	const int efd = sockbuf_guard_timerfd(g.id, 10'000);
	ASSERT_GE(efd, 0);
	ASSERT_NO_FATAL_FAILURE(push_below(c.p.client));
	for (int k = 0; k < 4; k++)
		ASSERT_NO_FATAL_FAILURE(traffic(c.p));
	struct pollfd pfd = {efd, POLLIN, 0};
	ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	events_totals e(g.id);
	EXPECT_EQ(e.ev.records, 1u);
	EXPECT_EQ(e.ev.rounds, 1u);
}

// A record in flight for a socket that is closed, its number reused by
// another socket below the old floor: the identity check at the write
// drops the entry, and the new socket is not written.
TEST(GuardEvents, SocketClosedWhileItsRecordIsInFlightIsDropped)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id g(SOCKBUF_GUARD_EVENTS);
	ASSERT_EQ(sockbuf_guard_set_net_interval(g.id, long_net_us), 0);
	cut_pair c(g.id);
	ASSERT_TRUE(c.ok);
	const int efd = sockbuf_guard_timerfd(g.id, 10'000);
	ASSERT_GE(efd, 0);
	ASSERT_NO_FATAL_FAILURE(push_below(c.p.client));
	ASSERT_NO_FATAL_FAILURE(traffic(c.p));
	struct pollfd pfd = {efd, POLLIN, 0};
	ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "no record within 5 s";
	// The record waits; the socket it names goes, another takes its number.
	const int number = c.p.client;
	fd newer(tcp());
	ASSERT_NO_FATAL_FAILURE(push_below(newer));
	const int before = sndbuf(newer);
	ASSERT_EQ(::dup2(newer, number), number);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 0);
	EXPECT_EQ(rep.removed, 1);
	EXPECT_EQ(rep.reused, 1);
	EXPECT_EQ(sndbuf(number), before); // never written through
	events_totals e(g.id);
	EXPECT_EQ(e.ev.records, 1u);
	EXPECT_EQ(e.ev.dropped, 1u);
	EXPECT_EQ(e.t.sockets, 0);
}

// Lost records (a full ring, through the seam): counted, and the next
// pass is a full one, which finds the socket no record named.
TEST(GuardEvents, LostRecordsAreCountedAndFollowedByAFullPass)
{
	const std::string why = events_missing();
	if (!why.empty())
		GTEST_SKIP() << why;
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK";
	guard_id g(SOCKBUF_GUARD_EVENTS);
	ASSERT_EQ(sockbuf_guard_set_net_interval(g.id, long_net_us), 0);
	fd s(tcp());
	const struct sockbuf_floor fl = {floor_size, 0};
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr), 0);
	ASSERT_EQ(sockbuf_guard_add(g.id, s, &fl), 0);
	ASSERT_GE(sockbuf_guard_timerfd(g.id, 10'000), 0);
	ASSERT_NO_FATAL_FAILURE(push_below(s)); // no traffic: no record
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.sockets, 0); // timer not fired, nothing named
	EXPECT_LT(sndbuf(s), floor_size);
	ASSERT_EQ(sockbuf::guard::lose_records_for_test(g.id, 3), 0);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.sockets, 1);
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(s), floor_size);
	events_totals e(g.id);
	EXPECT_EQ(e.ev.lost, 3u);
	EXPECT_EQ(e.t.passes, 1u);
	EXPECT_EQ(e.ev.restored_passes, 1u);
}

// No capabilities: the programs cannot load; the guard says why and
// guards by passes, at the interval given.
TEST(GuardEvents, RefusedLoadFallsBackToPollingAndSaysWhy)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK";
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		capng_clear(CAPNG_SELECT_BOTH);
		if (capng_apply(CAPNG_SELECT_CAPS) != 0)
			_exit(3);
		guard_id g(SOCKBUF_GUARD_EVENTS);
		int s = tcp();
		struct sockbuf_floor fl = {floor_size, 0};
		if (g.id < 0 || s < 0 ||
		    sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr) != 0 ||
		    sockbuf_guard_add(g.id, s, &fl) != 0)
			_exit(4);
		struct sockbuf_guard_event_totals ev;
		if (sockbuf_guard_event_stats(g.id, &ev) != 0 || ev.err != -EPERM ||
		    ev.attached != 0)
			_exit(5);
		int small = 8192;
		::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		struct sockbuf_guard_report rep;
		if (sockbuf_guard_pass(g.id, &rep) != 0 || rep.restored != 1 ||
		    sndbuf(s) < floor_size)
			_exit(6);
		const int tfd = sockbuf_guard_timerfd(g.id, 10'000);
		struct sockbuf_guard_totals t;
		if (tfd < 0 || sockbuf_guard_stats(g.id, &t) != 0 || t.interval_us != 10'000)
			_exit(7); // polling at the interval given, not the net's
		if (sockbuf_guard_event_stats(g.id, &ev) != 0 || ev.restored_passes != 1)
			_exit(8);
		_exit(0);
	}
	expect_child_exited_0(pid, "3: capabilities not dropped, 4: setup, 5: events loaded or "
				   "not -EPERM, 6: not restored, 7: interval, 8: counts");
}
