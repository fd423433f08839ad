// SPDX-License-Identifier: MIT
// The floor guard on real sockets: every socket pushed below its floor is
// found and raised again, unlocked; closed sockets leave by themselves;
// bad input changes nothing.  Every way of reading sizes (getsockopt per
// socket, one inet_diag dump, batched getsockopt over io_uring, and the
// guard's own choice) runs the same checks; a source this kernel lacks is
// a reported skip, and its fallback is forced through the seam.
#include "buffer.h"
#include "child.h"
#include "guard.h"
#include "guard_util.h"
#include "reserve_reported.h"
#include "seam.h"
#include "sys.h"
#include "uring.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace sockbuf::test;

namespace
{

class Guard : public per_source
{
};

// Many connected sockets, a random third of them pushed below: one pass
// must restore exactly those, and leave the others alone.
TEST_P(Guard, OnePassRestoresEverySocketBelowAndNoOther)
{
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
	forced_source force(GetParam());
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	constexpr int n = 60;
	std::vector<std::unique_ptr<tcp_pair>> pairs;
	struct sockbuf_floor fl = {floor_size, floor_size};
	for (int i = 0; i < n; i++) {
		pairs.push_back(std::make_unique<tcp_pair>());
		ASSERT_TRUE(make_pair(pairs.back().get()));
		ASSERT_EQ(sockbuf_set_initial_bufsize(pairs.back()->client, floor_size, floor_size,
						      0, nullptr),
			  0);
		ASSERT_EQ(sockbuf_guard_add(g.id, pairs.back()->client, &fl), 0);
	}
	std::mt19937 rng(12345);
	std::vector<bool> pushed(n, false);
	int expect = 0;
	for (int i = 0; i < n; i++)
		if (rng() % 3 == 0) {
			push_below(pairs[size_t(i)]->client);
			pushed[size_t(i)] = true;
			expect++;
		}
	ASSERT_GT(expect, 5);

	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.sockets, n);
	EXPECT_EQ(rep.below, expect);
	EXPECT_EQ(rep.restored, expect);
	EXPECT_EQ(rep.errors, 0);
	EXPECT_EQ(rep.removed, 0);
	EXPECT_EQ(rep.worst_depth, floor_size - 2 * 8192);
	EXPECT_EQ(rep.diag, first_source(GetParam()));
	for (int i = 0; i < n; i++) {
		int s = pairs[size_t(i)]->client;
		EXPECT_GE(sndbuf(s), floor_size) << "socket " << i << " left below its floor";
		EXPECT_EQ(buflock(s), 0) << "socket " << i << " left locked";
	}
	// Nothing is below now: a second pass changes nothing.  Left to
	// itself the guard times getsockopt next, to compare costs.
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.below, 0);
	EXPECT_EQ(rep.restored, 0);
	EXPECT_EQ(rep.diag, GetParam() == auto_source ? SOCKBUF_GUARD_SRC_GETSOCKOPT : GetParam());

	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.passes, 2u);
	EXPECT_EQ(t.restored, uint64_t(expect));
	EXPECT_EQ(t.sockets, n);
	EXPECT_EQ(t.source, rep.diag);
	EXPECT_EQ(t.diag_err, 0);
}

TEST_P(Guard, ClosedSocketsLeaveByThemselves)
{
	forced_source force(GetParam());
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	struct sockbuf_floor fl = {0, 65536};
	int a = tcp(), b = tcp();
	fd keep(tcp());
	ASSERT_EQ(sockbuf_guard_add(g.id, a, &fl), 0);
	ASSERT_EQ(sockbuf_guard_add(g.id, b, &fl), 0);
	ASSERT_EQ(sockbuf_guard_add(g.id, keep, &fl), 0);
	::close(a);
	::close(b);
	// Their reads fail (EBADF): they leave on the very next pass.  (A
	// number reused meanwhile: ReusedNumberIsNeverRestoredThrough.)
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.removed, 2);
	EXPECT_EQ(rep.diag, first_source(GetParam()));
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 1);
	EXPECT_EQ(sockbuf_guard_remove(g.id, keep), 0);
	EXPECT_EQ(sockbuf_guard_remove(g.id, keep), -ENOENT);
}

// Sockets pushed below on either side, in guards flooring both directions
// (one SO_MEMINFO read per socket), the send side only and the receive
// side only: every pass must find every direction below, none other.
TEST_P(Guard, EveryPassFindsEveryDirectionBelow)
{
	forced_source force(GetParam());
	constexpr int n = 24, passes = 3;
	const struct sockbuf_floor floors[] = {
	    {floor_size, floor_size}, {floor_size, 0}, {0, floor_size}};
	for (const struct sockbuf_floor &fl : floors) {
		SCOPED_TRACE("floor {" + std::to_string(fl.snd) + ", " + std::to_string(fl.rcv) +
			     "}");
		guard_id g(0);
		ASSERT_GE(g.id, 0);
		std::vector<std::unique_ptr<tcp_pair>> pairs;
		for (int i = 0; i < n; i++) {
			pairs.push_back(std::make_unique<tcp_pair>());
			ASSERT_TRUE(make_pair(pairs.back().get()));
			ASSERT_EQ(sockbuf_set_initial_bufsize(pairs.back()->client, floor_size,
							      floor_size, 0, nullptr),
				  0);
			ASSERT_EQ(sockbuf_guard_add(g.id, pairs.back()->client, &fl), 0);
		}
		for (int pass = 0; pass < passes; pass++) {
			// A different subset each pass, so that no position in
			// the pass (nor in the identity sweep) escapes.
			int expect = 0, small = 4096;
			for (int i = 0; i < n; i++) {
				const int s = pairs[size_t(i)]->client;
				const int r = (i + pass) % 4;
				if (r == 1 || r == 3) {
					ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small,
							       sizeof(small)),
						  0);
					expect += fl.snd != 0;
				}
				if (r == 2 || r == 3) {
					ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small,
							       sizeof(small)),
						  0);
					expect += fl.rcv != 0;
				}
			}
			struct sockbuf_guard_report rep;
			ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
			EXPECT_EQ(rep.sockets, n);
			EXPECT_EQ(rep.below, expect) << "pass " << pass;
			EXPECT_EQ(rep.removed, 0);
			// What the pass did not restore (a receive buffer the
			// kernel will not raise unlocked, say) must be found
			// again next pass, not forgotten: raise them all here.
			for (int i = 0; i < n; i++)
				ASSERT_EQ(sockbuf_set_initial_bufsize(pairs[size_t(i)]->client,
								      floor_size, floor_size, 0,
								      nullptr),
					  0);
		}
	}
}

// A guarded number closed and reused for another TCP socket: the guard
// never applies the old floor to the new socket, even one below it, and
// the entry leaves within the documented bound (two rounds of the
// identity sweep) when the new socket is not below.
TEST_P(Guard, ReusedNumberIsNeverRestoredThrough)
{
	forced_source force(GetParam());
	constexpr int others = 40; // several passes per sweep round
	const struct sockbuf_floor small_floor = {4608, 2304}, fl = {floor_size, floor_size};
	for (bool new_below : {true, false}) {
		SCOPED_TRACE(new_below ? "new socket below the old floor" : "new socket above it");
		guard_id g(0);
		ASSERT_GE(g.id, 0);
		std::vector<std::unique_ptr<fd>> keep;
		for (int i = 0; i < others / 2; i++) {
			keep.push_back(std::make_unique<fd>(tcp()));
			ASSERT_EQ(sockbuf_guard_add(g.id, *keep.back(), &small_floor), 0);
		}
		const int victim = tcp();
		ASSERT_EQ(sockbuf_set_initial_bufsize(victim, floor_size, floor_size, 0, nullptr),
			  0);
		ASSERT_EQ(sockbuf_guard_add(g.id, victim, &fl), 0);
		for (int i = 0; i < others / 2; i++) {
			keep.push_back(std::make_unique<fd>(tcp()));
			ASSERT_EQ(sockbuf_guard_add(g.id, *keep.back(), &small_floor), 0);
		}
		struct sockbuf_guard_report rep;
		for (int i = 0; i < 5; i++) // into the middle of a sweep round
			ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);

		// The same number, another TCP socket.
		const int other = tcp();
		ASSERT_GE(other, 0);
		ASSERT_EQ(::dup2(other, victim), victim);
		::close(other);
		fd reused(victim);
		const int size = new_below ? 4096 : floor_size;
		ASSERT_EQ(::setsockopt(reused, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
		ASSERT_EQ(::setsockopt(reused, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)), 0);
		const int snd_before = sndbuf(reused), rcv_before = rcvbuf(reused);
		ASSERT_EQ(snd_before < floor_size, new_below);

		int left_after = 0;
		for (int pass = 1; pass <= 3 * int(sockbuf::guard::sweep_passes); pass++) {
			ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
			EXPECT_EQ(rep.restored, 0) << "pass " << pass;
			EXPECT_EQ(sndbuf(reused), snd_before) << "pass " << pass;
			EXPECT_EQ(rcvbuf(reused), rcv_before) << "pass " << pass;
			if (rep.removed) {
				EXPECT_EQ(rep.removed, 1);
				left_after = pass;
				break;
			}
		}
		ASSERT_GT(left_after, 0) << "the reused number never left the guard";
		EXPECT_LE(left_after, 2 * int(sockbuf::guard::sweep_passes));
		if (new_below) {
			EXPECT_EQ(left_after, 1) << "checked before the restore it would have made";
		}
		struct sockbuf_guard_totals t;
		ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
		EXPECT_EQ(t.sockets, others);
		EXPECT_EQ(sockbuf_guard_remove(g.id, reused), -ENOENT);
	}
}

INSTANTIATE_TEST_SUITE_P(Sources, Guard,
			 ::testing::Values(auto_source, SOCKBUF_GUARD_SRC_GETSOCKOPT,
					   SOCKBUF_GUARD_SRC_DIAG, SOCKBUF_GUARD_SRC_URING,
					   SOCKBUF_GUARD_SRC_BPF),
			 source_name);

// io_uring refused (io_uring_disabled, seccomp): a guard forced onto it
// reads every socket with getsockopt instead, restores the same, and says
// why; so does one told not to use io_uring.
TEST(GuardUring, RefusedRingFallsBackToGetsockoptAndSaysWhy)
{
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
	for (bool by_flag : {false, true}) {
		SCOPED_TRACE(by_flag ? "SOCKBUF_GUARD_NO_URING" : "io_uring_setup refused");
		ring_refused refuse;
		forced_source force(SOCKBUF_GUARD_SRC_URING);
		guard_id g(by_flag ? SOCKBUF_GUARD_NO_URING : 0);
		ASSERT_GE(g.id, 0);
		fd s(tcp());
		ASSERT_EQ(sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr), 0);
		struct sockbuf_floor fl = {floor_size, 0};
		ASSERT_EQ(sockbuf_guard_add(g.id, s, &fl), 0);
		push_below(s);
		struct sockbuf_guard_report rep;
		ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
		EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_GETSOCKOPT);
		EXPECT_EQ(rep.restored, 1);
		EXPECT_GE(sndbuf(s), floor_size);
		struct sockbuf_guard_totals t;
		ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
		EXPECT_EQ(t.uring_err, -EPERM);
		EXPECT_EQ(t.source, SOCKBUF_GUARD_SRC_GETSOCKOPT);
		// It stays on getsockopt: the ring is not asked for again.
		ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
		EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_GETSOCKOPT);
	}
}

// A forked child that runs passes makes its own ring: it restores its
// shared socket through io_uring, and the parent's ring still works after.
TEST(GuardUring, ForkedChildMakesItsOwnRing)
{
	std::string why = source_missing(SOCKBUF_GUARD_SRC_URING);
	if (!why.empty())
		GTEST_SKIP() << why;
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
	forced_source force(SOCKBUF_GUARD_SRC_URING);
	guarded_socket gs(SOCKBUF_GUARD_RUN_IN_CHILD, true);
	ASSERT_TRUE(gs.added);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0); // the parent's ring exists
	ASSERT_EQ(rep.diag, SOCKBUF_GUARD_SRC_URING);
	push_below(gs.s);
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct sockbuf_guard_report r;
		int ret = sockbuf_guard_pass(gs.g.id, &r);
		_exit(ret == 0 && r.diag == SOCKBUF_GUARD_SRC_URING && r.restored == 1 ? 0 : 1);
	}
	ASSERT_NO_FATAL_FAILURE(
	    expect_child_exited_0(pid, "the child's pass did not restore through io_uring"));
	EXPECT_GE(sndbuf(gs.s), floor_size);
	push_below(gs.s);
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_URING);
	EXPECT_EQ(rep.restored, 1);
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
	EXPECT_EQ(t.uring_err, 0);
}

// SO_MEMINFO's sizes are sk_sndbuf and sk_rcvbuf as stored, the values
// SO_SNDBUF and SO_RCVBUF read (the library's unit), by getsockopt and
// through io_uring: after a setsockopt, and after autotuning grew them.
TEST(GuardMeminfo, SameSizesAsSoSndbufAndSoRcvbuf)
{
	sockbuf::uring::sockopt_ring ring;
	const bool have_ring = ring.open(::getpid()) == 0;
	auto same = [&](int s, const char *when) {
		SCOPED_TRACE(when);
		int snd = -1, rcv = -1;
		ASSERT_EQ(sockbuf::buffer::get_sizes(s, &snd, &rcv), 0);
		EXPECT_EQ(snd, sndbuf(s));
		EXPECT_EQ(rcv, rcvbuf(s));
		if (!have_ring)
			return;
		uint32_t mem[sockbuf::buffer::meminfo_len / sizeof(uint32_t)] = {};
		sockbuf::uring::sockopt_read r = {s, SO_MEMINFO, mem, sockbuf::buffer::meminfo_len,
						  0};
		ASSERT_EQ(ring.run(&r, 1), 0);
		ASSERT_EQ(r.res, int(sockbuf::buffer::meminfo_len));
		EXPECT_EQ(sockbuf::buffer::meminfo_snd(mem), sndbuf(s));
		EXPECT_EQ(sockbuf::buffer::meminfo_rcv(mem), rcvbuf(s));
	};
	tcp_pair p;
	ASSERT_TRUE(make_pair(&p));
	same(p.server, "defaults");
	int v = 50000;
	ASSERT_EQ(::setsockopt(p.client, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
	ASSERT_EQ(::setsockopt(p.client, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	same(p.client, "after setsockopt");

	// A fresh, unlocked pair moves 32 MiB: the receiver's buffer grows
	// (tcp_rcv_space_adjust), the sender's was expanded at the handshake.
	tcp_pair q;
	ASSERT_TRUE(make_pair(&q));
	const int client_rcv0 = rcvbuf(q.client);
	std::thread writer([&q] {
		std::vector<char> chunk(1 << 16, 'x');
		for (int i = 0; i < 512; i++)
			if (::send(q.server, chunk.data(), chunk.size(), 0) <= 0)
				break;
		::shutdown(q.server, SHUT_WR);
	});
	std::vector<char> buf(1 << 16);
	while (::recv(q.client, buf.data(), buf.size(), 0) > 0) {
	}
	writer.join();
	same(q.client, "after receive autotuning");
	same(q.server, "after send autotuning");
	if (rcvbuf(q.client) == client_rcv0)
		GTEST_SKIP() << "autotuning did not grow the receive buffer: compared unchanged";
	if (!have_ring)
		GTEST_SKIP() << "no io_uring socket commands: compared by getsockopt only";
}

// A kernel without SO_MEMINFO (before 4.12, ENOPROTOOPT): both directions
// are read separately, and a pass still finds every one below.
TEST(GuardMeminfo, WithoutSoMeminfoBothSizesAreReadSeparately)
{
	forced_source force(SOCKBUF_GUARD_SRC_GETSOCKOPT);
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	fd a(tcp()), b(tcp());
	struct sockbuf_floor fl = {floor_size, floor_size};
	for (int s : {int(a), int(b)}) {
		ASSERT_EQ(sockbuf_set_initial_bufsize(s, floor_size, floor_size, 0, nullptr), 0);
		ASSERT_EQ(sockbuf_guard_add(g.id, s, &fl), 0);
	}
	int small = 4096;
	ASSERT_EQ(::setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ASSERT_EQ(::setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	injector inj;
	inj.add({false, SOL_SOCKET, SO_MEMINFO, ENOPROTOOPT});
	struct sockbuf_guard_report rep;
	for (int pass = 0; pass < 2; pass++) { // the first finds out, the second knows
		ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
		EXPECT_EQ(rep.below, 2) << "pass " << pass;
		EXPECT_EQ(rep.removed, 0);
		ASSERT_EQ(::setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
		ASSERT_EQ(::setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	}
}

TEST(GuardInput, BadInputIsRefusedAndChangesNothing)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	struct sockbuf_floor fl = {65536, 65536};
	fd s(tcp());
	EXPECT_EQ(sockbuf_guard_add(g.id, -1, &fl), -EBADF);
	int closed = tcp();
	::close(closed);
	EXPECT_EQ(sockbuf_guard_add(g.id, closed, &fl), -EBADF);
	fd file(::open("/proc/self/stat", O_RDONLY | O_CLOEXEC));
	EXPECT_EQ(sockbuf_guard_add(g.id, file, &fl), -ENOTSOCK);
	fd u(udp());
	EXPECT_EQ(sockbuf_guard_add(g.id, u, &fl), -EPROTOTYPE);
	fd unix_s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	EXPECT_EQ(sockbuf_guard_add(g.id, unix_s, &fl), -EPROTOTYPE);
	EXPECT_EQ(sockbuf_guard_add(g.id, s, nullptr), -EINVAL);
	struct sockbuf_floor zero = {0, 0}, neg = {-1, 65536}, huge = {SOCKBUF_SIZE_MAX + 1, 0};
	EXPECT_EQ(sockbuf_guard_add(g.id, s, &zero), -EINVAL);
	EXPECT_EQ(sockbuf_guard_add(g.id, s, &neg), -EINVAL);
	EXPECT_EQ(sockbuf_guard_add(g.id, s, &huge), -EOVERFLOW);
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	if (p.rcvbuf_max > 0 && p.rcvbuf_max < SOCKBUF_SIZE_MAX) {
		struct sockbuf_floor above = {0, p.rcvbuf_max + 2};
		EXPECT_EQ(sockbuf_guard_add(g.id, s, &above), -ERANGE);
	}
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 0) << "a refused add left a socket in the guard";

	ASSERT_EQ(sockbuf_guard_add(g.id, s, &fl), 0);
	EXPECT_EQ(sockbuf_guard_add(g.id, s, &fl), -EEXIST);
	fd dup_s(::fcntl(s, F_DUPFD_CLOEXEC, 0));
	EXPECT_EQ(sockbuf_guard_add(g.id, dup_s, &fl), -EEXIST) << "same socket, other fd";
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 1);

	EXPECT_EQ(sockbuf_guard_new(1u << 20), -EINVAL);
	EXPECT_EQ(sockbuf_guard_start(g.id, 0), -EINVAL);
	EXPECT_EQ(sockbuf_guard_start(g.id, 99), -EINVAL);
	EXPECT_EQ(sockbuf_guard_timerfd(g.id, 600'000'001), -EINVAL);
	EXPECT_EQ(sockbuf_guard_stop(g.id), -ENOENT);
	EXPECT_EQ(sockbuf_guard_stats(g.id, nullptr), -EINVAL);
}

TEST(GuardInput, DestroyedGuardIsEbadf)
{
	int id = sockbuf_guard_new(0);
	ASSERT_GE(id, 0);
	ASSERT_EQ(sockbuf_guard_destroy(id), 0);
	fd s(tcp());
	struct sockbuf_floor fl = {65536, 0};
	struct sockbuf_guard_totals t;
	EXPECT_EQ(sockbuf_guard_destroy(id), -EBADF);
	EXPECT_EQ(sockbuf_guard_add(id, s, &fl), -EBADF);
	EXPECT_EQ(sockbuf_guard_remove(id, s), -EBADF);
	EXPECT_EQ(sockbuf_guard_pass(id, nullptr), -EBADF);
	EXPECT_EQ(sockbuf_guard_start(id, 1000), -EBADF);
	EXPECT_EQ(sockbuf_guard_stats(id, &t), -EBADF);
	EXPECT_EQ(sockbuf_guard_pass(-1, nullptr), -EBADF);
	// A new guard in the same slot does not answer to the old id.
	guard_id next(0);
	ASSERT_GE(next.id, 0);
	EXPECT_NE(next.id, id);
	EXPECT_EQ(sockbuf_guard_pass(id, nullptr), -EBADF);
}

// The event-loop way: the timerfd becomes readable, a pass restores.
TEST(GuardDrive, TimerfdInAPollLoop)
{
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
	guarded_socket gs(0, true);
	ASSERT_TRUE(gs.added);
	// 200 ms: long enough that the timer cannot fire again between the
	// pass and the check that the pass consumed it.
	int tfd = sockbuf_guard_timerfd(gs.g.id, 200'000);
	ASSERT_GE(tfd, 0);
	EXPECT_EQ(sockbuf_guard_timerfd(gs.g.id, 1000), -EALREADY);
	EXPECT_EQ(sockbuf_guard_start(gs.g.id, 1000), -EALREADY);
	push_below(gs.s);
	struct pollfd pfd = {tfd, POLLIN, 0};
	ASSERT_EQ(::poll(&pfd, 1, 2000), 1) << "timer never fired";
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(gs.s), floor_size);
	// The pass consumed the expiration: not readable right away.
	pfd.revents = 0;
	EXPECT_EQ(::poll(&pfd, 1, 0), 0);
}

// The thread way: a socket pushed below comes back without the caller
// doing anything; destroying the guard while its thread runs is safe.
TEST(GuardDrive, BackgroundThreadRestoresAndDestroyStopsIt)
{
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
	int id = sockbuf_guard_new(0);
	ASSERT_GE(id, 0);
	fd s(tcp());
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, floor_size, 0, 0, nullptr), 0);
	struct sockbuf_floor fl = {floor_size, 0};
	ASSERT_EQ(sockbuf_guard_add(id, s, &fl), 0);
	ASSERT_EQ(sockbuf_guard_start(id, 1000), 0);
	EXPECT_EQ(sockbuf_guard_start(id, 1000), -EALREADY);
	push_below(s);
	// Bounded wait on the guard's own count, not a sleep.
	struct sockbuf_guard_totals t = {};
	for (int i = 0; i < 4000 && t.restored == 0; i++) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
		ASSERT_EQ(sockbuf_guard_stats(id, &t), 0);
	}
	EXPECT_EQ(t.restored, 1u) << "no restore within 4 s of 1 ms passes";
	EXPECT_EQ(t.interval_us, 1000u);
	EXPECT_GE(sndbuf(s), floor_size);
	EXPECT_EQ(buflock(s), 0);
	EXPECT_EQ(sockbuf_guard_destroy(id), 0); // thread still running
	EXPECT_EQ(sockbuf_guard_stats(id, &t), -EBADF);
}

// The caller's loop that serves its timer late is told by how much:
// max_late_us is the time past the pass that was due (one interval after
// the previous one began), never more than the loop really waited.
TEST(GuardDrive, LateLoopIsReported)
{
	guarded_socket gs(0);
	ASSERT_TRUE(gs.added);
	ASSERT_GE(sockbuf_guard_timerfd(gs.g.id, 10'000), 0);
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	const auto first = std::chrono::steady_clock::now();
	// The loop is busy elsewhere for 150 ms: that is the lateness under
	// test, not a wait for something to happen.
	::poll(nullptr, 0, 150);
	const auto second = std::chrono::steady_clock::now();
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	struct sockbuf_guard_totals t = {};
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
	EXPECT_GE(t.max_late_us, 150'000u - 10'000u - 5'000u) << "the late pass went unreported";
	const auto waited_us =
	    std::chrono::duration_cast<std::chrono::microseconds>(second - first).count();
	EXPECT_LE(int64_t(t.max_late_us), waited_us - 10'000 + 5'000)
	    << "more lateness than the loop waited";
}

// Passes the caller makes without a driver are due at no time: nothing
// is late, however far apart they are.
TEST(GuardDrive, NoDriverNothingLate)
{
	guarded_socket gs(0);
	ASSERT_TRUE(gs.added);
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	::poll(nullptr, 0, 100);
	ASSERT_EQ(sockbuf_guard_pass(gs.g.id, nullptr), 0);
	struct sockbuf_guard_totals t = {};
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
	EXPECT_EQ(t.max_late_us, 0u);
}

namespace
{
// How many threads of this process are named @name (/proc/self/task).
int threads_named(const std::string &name)
{
	int n = 0;
	std::unique_ptr<DIR, int (*)(DIR *)> d(opendir("/proc/self/task"), closedir);
	if (!d)
		return -1;
	while (const struct dirent *e = readdir(d.get())) {
		if (e->d_name[0] == '.')
			continue;
		std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
		std::string got;
		if (std::getline(comm, got) && got == name)
			n++;
	}
	return n;
}
} // namespace

// The library's thread is named, as sockbuf_guard_new(3) says, and goes
// with sockbuf_guard_stop().
TEST(GuardDrive, ThreadIsNamedSockbufGuard)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	ASSERT_EQ(threads_named("sockbuf-guard"), 0);
	ASSERT_EQ(sockbuf_guard_start(g.id, 10'000), 0);
	// The name is set as the thread starts: wait for it, bounded.
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (threads_named("sockbuf-guard") != 1 && std::chrono::steady_clock::now() < deadline)
		::poll(nullptr, 0, 1);
	EXPECT_EQ(threads_named("sockbuf-guard"), 1);
	ASSERT_EQ(sockbuf_guard_stop(g.id), 0);
	EXPECT_EQ(threads_named("sockbuf-guard"), 0);
}

// A stopped thread owes no pass: its first pass after a restart 300 ms
// later is not counted as 300 ms late.
TEST(GuardDrive, RestartedThreadOwesNothing)
{
	guarded_socket gs(0);
	ASSERT_TRUE(gs.added);
	auto passes_at_least = [&](uint64_t n) {
		struct sockbuf_guard_totals t = {};
		for (int i = 0; i < 4000 && t.passes < n; i++) {
			::poll(nullptr, 0, 1);
			EXPECT_EQ(sockbuf_guard_stats(gs.g.id, &t), 0);
		}
		return t;
	};
	ASSERT_EQ(sockbuf_guard_start(gs.g.id, 1000), 0);
	ASSERT_GE(passes_at_least(3).passes, 3u) << "no passes within 4 s";
	ASSERT_EQ(sockbuf_guard_stop(gs.g.id), 0);
	::poll(nullptr, 0, 300);
	struct sockbuf_guard_totals before = {};
	ASSERT_EQ(sockbuf_guard_stats(gs.g.id, &before), 0);
	ASSERT_EQ(sockbuf_guard_start(gs.g.id, 1000), 0);
	const struct sockbuf_guard_totals after = passes_at_least(before.passes + 2);
	ASSERT_GE(after.passes, before.passes + 2) << "no passes within 4 s of the restart";
	EXPECT_LT(after.max_late_us, 250'000u) << "the stopped time was counted as lateness";
}

// A child shares its parent's sockets: its copy of the guard does not
// run passes on them unless the guard was made to.
TEST(GuardDrive, ForkedChildDoesNotRunTwice)
{
	guard_id plain(0), shared(SOCKBUF_GUARD_RUN_IN_CHILD);
	ASSERT_GE(plain.id, 0);
	ASSERT_GE(shared.id, 0);
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int a = sockbuf_guard_pass(plain.id, nullptr);
		int b = sockbuf_guard_pass(shared.id, nullptr);
		_exit(a == -ECHILD && b == 0 ? 0 : 1);
	}
	ASSERT_NO_FATAL_FAILURE(expect_child_exited_0(
	    pid, "1: the plain guard ran in the child, or the shared one did not"));
	EXPECT_EQ(sockbuf_guard_pass(plain.id, nullptr), 0); // the parent runs it
}

// SOCKBUF_GUARD_BPF is asked for, never assumed: a guard without the flag
// says -EPERM, one with it uses the iterator where it loads.
TEST(GuardBpf, UsedOnlyWhenAskedFor)
{
	guard_id plain(0);
	ASSERT_GE(plain.id, 0);
	fd s(tcp());
	struct sockbuf_floor fl = {0, 4096};
	ASSERT_EQ(sockbuf_guard_add(plain.id, s, &fl), 0);
	struct sockbuf_guard_report rep;
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_pass(plain.id, &rep), 0);
	EXPECT_NE(rep.diag, SOCKBUF_GUARD_SRC_BPF);
	ASSERT_EQ(sockbuf_guard_stats(plain.id, &t), 0);
	EXPECT_EQ(t.bpf_err, -EPERM);
	std::string why = source_missing(SOCKBUF_GUARD_SRC_BPF);
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id asked(SOCKBUF_GUARD_BPF);
	ASSERT_EQ(sockbuf_guard_add(asked.id, s, &fl), 0);
	ASSERT_EQ(sockbuf_guard_pass(asked.id, &rep), 0);
	EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_BPF);
	ASSERT_EQ(sockbuf_guard_stats(asked.id, &t), 0);
	EXPECT_EQ(t.bpf_err, 0);
	EXPECT_EQ(t.source, SOCKBUF_GUARD_SRC_BPF);
}

// Without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN the program cannot be
// loaded: the guard says why and restores through its other sources.
TEST(GuardBpf, RefusedLoadFallsBackAndSaysWhy)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK: a restore here locks, another test's matter";
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		const uncapable_guard u(SOCKBUF_GUARD_BPF);
		if (u.status != 0)
			_exit(u.status);
		int small = 8192;
		::setsockopt(u.s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		struct sockbuf_guard_report rep;
		struct sockbuf_guard_totals t;
		if (sockbuf_guard_pass(u.g, &rep) != 0 || sockbuf_guard_stats(u.g, &t) != 0)
			_exit(5);
		if (rep.diag == SOCKBUF_GUARD_SRC_BPF || t.bpf_err == 0)
			_exit(6); // loaded without the capabilities
		if (rep.restored != 1 || sndbuf(u.s) < floor_size)
			_exit(7);
		_exit(0);
	}
	expect_child_exited_0(pid, "3: capabilities not dropped, 4: setup, 5: pass, 6: BPF loaded "
				   "without capabilities, 7: not restored");
}

// A number closed and added again for another socket: two entries share
// it; the slot is the newer one's, the older leaves at the next pass, and
// the newer is guarded from then on.
TEST(GuardBpf, NumberAddedAgainKeepsTheNewSocket)
{
	std::string why = source_missing(SOCKBUF_GUARD_SRC_BPF);
	if (!why.empty())
		GTEST_SKIP() << why;
	if (!has_buf_lock())
		GTEST_SKIP() << "no SO_BUF_LOCK";
	guard_id g(SOCKBUF_GUARD_BPF);
	ASSERT_GE(g.id, 0);
	const struct sockbuf_floor fl = {floor_size, 0};
	const int number = tcp();
	ASSERT_EQ(sockbuf_guard_add(g.id, number, &fl), 0);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0); // loads, fills the slot
	const int other = tcp();
	ASSERT_EQ(sockbuf_set_initial_bufsize(other, floor_size, 0, 0, nullptr), 0);
	ASSERT_EQ(::dup2(other, number), number);
	::close(other);
	fd again(number);
	ASSERT_EQ(sockbuf_guard_add(g.id, again, &fl), 0);
	push_below(again);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_BPF);
	EXPECT_EQ(rep.removed, 1);  // the first socket
	EXPECT_EQ(rep.restored, 1); // the second
	EXPECT_GE(sndbuf(again), floor_size);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.sockets, 1);
	EXPECT_EQ(rep.removed, 0);
	EXPECT_EQ(rep.below, 0);
}

// A forked child (SOCKBUF_GUARD_RUN_IN_CHILD) walks its own files: after
// the parent closed its copy of a guarded socket, the child's pass still
// finds the socket, through the child's own iterator.
TEST(GuardBpf, ForkedChildWalksItsOwnFiles)
{
	std::string why = source_missing(SOCKBUF_GUARD_SRC_BPF);
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id g(SOCKBUF_GUARD_BPF | SOCKBUF_GUARD_RUN_IN_CHILD);
	ASSERT_GE(g.id, 0);
	int s = tcp();
	struct sockbuf_floor fl = {0, 4096};
	ASSERT_EQ(sockbuf_guard_add(g.id, s, &fl), 0);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0); // the parent's iterator
	ASSERT_EQ(rep.diag, SOCKBUF_GUARD_SRC_BPF);
	int go[2];
	ASSERT_EQ(::pipe(go), 0);
	pid_t pid = ::fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		::close(go[1]);
		char c;
		if (::read(go[0], &c, 1) != 1) // the parent has closed s
			_exit(3);
		struct sockbuf_guard_report r;
		if (sockbuf_guard_pass(g.id, &r) != 0)
			_exit(4);
		_exit(r.diag == SOCKBUF_GUARD_SRC_BPF && r.sockets == 1 && r.removed == 0 ? 0 : 5);
	}
	::close(go[0]);
	::close(s);
	ASSERT_EQ(::write(go[1], "x", 1), 1);
	::close(go[1]);
	ASSERT_NO_FATAL_FAILURE(
	    expect_child_exited_0(pid, "3: sync, 4: pass, 5: wrong files walked"));
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0); // the parent's copy is closed
	EXPECT_EQ(rep.removed, 1);
}

// SOCKBUF_GUARD_RESERVE_MEM: each socket added (an accepted one here) gets
// a reservation attempt of its whole floor; a listener gets none; a failure
// is counted, never refuses the add.
TEST(GuardReserve, AddAttemptsTheReservationAndCountsTheOutcome)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	if (!(p.known & SOCKBUF_FEAT_RESERVE_MEM))
		GTEST_SKIP() << "kernel has no SO_RESERVE_MEM (before 5.16)";
	tcp_pair pair;
	ASSERT_TRUE(make_pair(&pair));
	guard_id g(SOCKBUF_GUARD_RESERVE_MEM);
	ASSERT_GE(g.id, 0);
	const struct sockbuf_floor floor = {16384, 65536};
	ASSERT_EQ(sockbuf_guard_add(g.id, pair.listener, &floor), 0);
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.reserve_ok + t.reserve_failed, 0u); // the listener: no attempt

	ASSERT_EQ(sockbuf_guard_add(g.id, pair.server, &floor), 0);
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 2);
	if (p.features & SOCKBUF_FEAT_RESERVE_MEM) {
		EXPECT_EQ(t.reserve_ok, 1u);
		EXPECT_EQ(t.reserve_failed, 0u);
		EXPECT_EQ(t.reserve_err, 0);
	} else {
		EXPECT_EQ(t.reserve_ok, 0u);
		EXPECT_EQ(t.reserve_failed, 1u);
		EXPECT_EQ(t.reserve_err, -EOPNOTSUPP)
		    << sockbuf_reserve_state_name(p.reserve_state);
	}

	// Without the flag nothing is attempted.
	guard_id plain(0);
	ASSERT_EQ(sockbuf_guard_add(plain.id, pair.client, &floor), 0);
	ASSERT_EQ(sockbuf_guard_stats(plain.id, &t), 0);
	EXPECT_EQ(t.reserve_ok + t.reserve_failed, 0u);
}

// restore_floor with SOCKBUF_F_RESERVE_MEM reserves even when nothing is
// below the floor: an accepted socket at its listener's sizes has none.
TEST(GuardReserve, RestoreWithNothingBelowStillReserves)
{
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	tcp_pair pair;
	ASSERT_TRUE(make_pair(&pair));
	const struct sockbuf_floor floor = {sndbuf(pair.server), rcvbuf(pair.server)};
	struct sockbuf_report rep;
	ASSERT_EQ(sockbuf_restore_floor(pair.server, &floor, SOCKBUF_F_RESERVE_MEM, &rep), 0);
	EXPECT_EQ(rep.snd.strategy, SOCKBUF_STRAT_HELD);
	EXPECT_EQ(rep.rcv.strategy, SOCKBUF_STRAT_HELD);
	EXPECT_TRUE(reserve_reported(p, rep));
	// A listener is refused without a syscall.
	const struct sockbuf_floor lfloor = {sndbuf(pair.listener), 0};
	ASSERT_EQ(sockbuf_restore_floor(pair.listener, &lfloor, SOCKBUF_F_RESERVE_MEM, &rep), 0);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_LISTENER);
	EXPECT_TRUE(rep.flags & SOCKBUF_R_RESERVE_FAILED);
	if (p.features & SOCKBUF_FEAT_RESERVE_MEM) {
		EXPECT_EQ(rep.reserve_err, -EINVAL);
	}
	// Without the flag: no reservation, no report of one.
	ASSERT_EQ(sockbuf_restore_floor(pair.server, &floor, 0, &rep), 0);
	EXPECT_FALSE(rep.flags & (SOCKBUF_R_RESERVED | SOCKBUF_R_RESERVE_FAILED));
}

} // namespace
