// SPDX-License-Identifier: MIT
// The floor guard's promises where another thread or process acts in the
// middle of its work: a number reused between a pass's read and its write,
// a fork() while a pass is in flight, remove() after close, reuse and add
// of one number, a child's remove() with the BPF slots, and what one
// restore costs.  Each window is opened on purpose through the syscall
// seam (sys.h), never by sleeping, and each test fails on the code before
// the fix it guards.
#include "buffer.h"
#include "child.h"
#include "guard.h"
#include "guard_util.h"
#include "sys.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

using namespace sockbuf::test;

namespace
{

const struct sockbuf_floor full_floor = {floor_size, floor_size};

// @s at floor_size both ways, added to @guard with @fl.
void add_at_floor(int guard, int s, const struct sockbuf_floor &fl = full_floor)
{
	ASSERT_EQ(sockbuf_set_initial_bufsize(s, floor_size, floor_size, 0, nullptr), 0);
	ASSERT_EQ(sockbuf_guard_add(guard, s, &fl), 0);
}

// One pass of @guard with @hooks installed in the seam; what it returned.
int pass_hooked(int guard, const sockbuf::sys::hooks &hooks, struct sockbuf_guard_report *rep)
{
	sockbuf::sys::set_hooks(&hooks);
	const int ret = sockbuf_guard_pass(guard, rep);
	sockbuf::sys::set_hooks(nullptr);
	return ret;
}

// The socket the program deliberately keeps small and locked, and its
// sizes and lock as they were: a write meant for another socket that
// lands on it changes one of them.
struct kept_small {
	fd s{tcp()};
	int snd = 0, rcv = 0, lock = 0;
	void keep()
	{
		const int small = 4096;
		ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
		ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
		snd = sndbuf(s);
		rcv = rcvbuf(s);
		lock = has_buf_lock() ? buflock(s) : 0;
	}
	// @number names this socket now: not one byte of it changed.
	void expect_unchanged_through(int number) const
	{
		EXPECT_EQ(sndbuf(number), snd) << "a restore wrote through the re-pointed number";
		EXPECT_EQ(rcvbuf(number), rcv);
		if (has_buf_lock()) {
			EXPECT_EQ(buflock(number), lock) << "the other socket was unlocked";
		}
	}
};

// A guard of the flags that give it size source @src (BPF asked for, the
// others forced through the seam while this lives).
struct sourced_guard {
	forced_source force;
	guard_id g;
	explicit sourced_guard(int src)
	    : force(src == SOCKBUF_GUARD_SRC_BPF ? auto_source : src),
	      g(src == SOCKBUF_GUARD_SRC_BPF ? SOCKBUF_GUARD_BPF : 0)
	{
	}
};

bool is_size_read(int level, int name)
{
	return level == SOL_SOCKET &&
	       (name == SO_MEMINFO || name == SO_SNDBUF || name == SO_RCVBUF);
}

// The reuse window: the first call the library makes on the victim's number
// that is not a size read (the restore's duplicate of it, the identity
// check, or whatever a restore does first) finds the number already moved
// to another socket, as if the program had closed it and a new socket had
// taken the number right then.
std::atomic<int> g_victim{-1}, g_other{-1};
std::atomic<bool> g_swapped{false};

void swap_once(int fd, int level, int name)
{
	if (fd != g_victim.load() || is_size_read(level, name) || g_swapped.exchange(true))
		return;
	::dup2(g_other.load(), fd);
}

int swap_get(int fd, int level, int name, void *, socklen_t *)
{
	swap_once(fd, level, name);
	return sockbuf::sys::pass;
}

int swap_set(int fd, int level, int name, const void *, socklen_t)
{
	swap_once(fd, level, name);
	return sockbuf::sys::pass;
}

// The restore's duplicate of the number is taken first: the number moves
// just before it.
int swap_dup(int fd)
{
	swap_once(fd, -1, -1);
	return sockbuf::sys::pass;
}

const sockbuf::sys::hooks swap_hooks = {swap_get, swap_set, nullptr, swap_dup};

struct reuse_window {
	reuse_window(int victim, int other)
	{
		g_victim = victim;
		g_other = other;
		g_swapped = false;
		sockbuf::sys::set_hooks(&swap_hooks);
	}
	~reuse_window()
	{
		sockbuf::sys::set_hooks(nullptr);
		g_victim = -1;
	}
	reuse_window(const reuse_window &) = delete;
	reuse_window &operator=(const reuse_window &) = delete;
};

// A guard on the test's size source and its victim: a socket at
// floor_size both ways, guarded at full_floor.
class GuardRace : public per_source
{
protected:
	void SetUp() override
	{
		ASSERT_NO_FATAL_FAILURE(per_source::SetUp());
		if (IsSkipped())
			return;
		sg_.emplace(src);
		ASSERT_GE(guard(), 0);
		ASSERT_NO_FATAL_FAILURE(add_at_floor(guard(), victim));
	}
	int guard() const { return sg_->g.id; }

	const int src = GetParam();
	fd victim{tcp()};

private:
	std::optional<sourced_guard> sg_; // made after per_source's look at the sources
};

// Every source verifies identity differently (io_uring reads the cookie in
// its batch for the sockets in the sweep, BPF compares inodes in its walk,
// a dump reads by inode): none of that may stand in for the check at the
// write.  The victim is entry 0, so it is in the first pass's sweep.
TEST_P(GuardRace, NumberReusedInTheMiddleOfAPassIsNeverWrittenThrough)
{
	std::vector<std::unique_ptr<fd>> others;
	const struct sockbuf_floor small_floor = {4608, 2304};
	for (int i = 0; i < 32; i++) {
		others.push_back(std::make_unique<fd>(tcp()));
		ASSERT_EQ(sockbuf_guard_add(guard(), *others.back(), &small_floor), 0);
	}
	ASSERT_NO_FATAL_FAILURE(push_below(victim));

	kept_small other;
	ASSERT_NO_FATAL_FAILURE(other.keep());

	struct sockbuf_guard_report rep;
	{
		reuse_window w(victim, other.s);
		ASSERT_EQ(sockbuf_guard_pass(guard(), &rep), 0);
		ASSERT_TRUE(g_swapped) << "the window was never opened: no call on the number "
					  "between the pass's read and a write";
	}
	EXPECT_EQ(rep.diag, src == auto_source ? rep.diag : src);
	other.expect_unchanged_through(victim);
	EXPECT_EQ(rep.restored, 0);
	EXPECT_EQ(rep.removed, 1);
	EXPECT_EQ(rep.reused, 1);
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(guard(), &t), 0);
	EXPECT_EQ(t.reused, 1u);
	EXPECT_EQ(t.sockets, 32);
}

// The later window: the number is re-pointed right after the identity
// check said it names the victim, before the first write.  The hook makes
// the check's cookie read itself and then moves the number, so a restore
// that writes through the number writes the other socket; one that writes
// through the duplicate it checked writes the victim, which the guard
// still holds.
std::atomic<uint64_t> g_victim_cookie{0};

int swap_after_check(int fd, int level, int name, void *val, socklen_t *len)
{
	if (level != SOL_SOCKET || name != SO_COOKIE || g_swapped.load())
		return sockbuf::sys::pass;
	if (::getsockopt(fd, level, name, val, len) != 0)
		return -errno;
	if (*len == sizeof(uint64_t) && *static_cast<uint64_t *>(val) == g_victim_cookie.load() &&
	    !g_swapped.exchange(true))
		::dup2(g_other.load(), g_victim.load());
	return 0;
}

const sockbuf::sys::hooks swap_after_check_hooks = {swap_after_check, nullptr, nullptr, nullptr};

TEST_P(GuardRace, NumberRepointedBetweenCheckAndWriteIsNeverWrittenThrough)
{
	ASSERT_NO_FATAL_FAILURE(push_below(victim));
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	ASSERT_EQ(::getsockopt(victim, SOL_SOCKET, SO_COOKIE, &cookie, &len), 0);
	// The victim's socket, seen through a number of the test's own: the
	// restore's effect on it is read after the program's number moved.
	fd victim_socket(::dup(victim));
	ASSERT_GE(victim_socket.v, 0);

	kept_small other;
	ASSERT_NO_FATAL_FAILURE(other.keep());

	struct sockbuf_guard_report rep;
	g_victim = victim.v;
	g_other = other.s.v;
	g_victim_cookie = cookie;
	g_swapped = false;
	const int ret = pass_hooked(guard(), swap_after_check_hooks, &rep);
	g_victim = -1;
	ASSERT_EQ(ret, 0);
	ASSERT_TRUE(g_swapped) << "the window was never opened: no identity check on the victim";
	other.expect_unchanged_through(victim);
	// The socket checked is the socket written.
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(victim_socket), floor_size);
	if (has_buf_lock()) {
		EXPECT_EQ(buflock(victim_socket), 0);
	}
}

// The descriptors of this process that name the socket of inode @ino.
int descriptors_of(ino_t ino)
{
	const std::string want = "socket:[" + std::to_string(ino) + "]";
	int n = 0;
	for (const auto &d : std::filesystem::directory_iterator("/proc/self/fd")) {
		std::error_code ec;
		if (std::filesystem::read_symlink(d.path(), ec).string() == want)
			n++;
	}
	return n;
}

// At the descriptor limit (the duplicate fails with EMFILE) the guard pins
// the socket in the slot it keeps for this: the socket below its floor is
// restored through it, never through the number, and afterwards nothing
// but the program's own descriptor names the socket (the slot does not
// keep it alive).
TEST(GuardRestore, AtTheDescriptorLimitTheSpareSlotPinsTheSocket)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	fd s(tcp());
	ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, s));
	struct stat st;
	ASSERT_EQ(::fstat(s, &st), 0);
	ASSERT_NO_FATAL_FAILURE(push_below(s));
	static const sockbuf::sys::hooks no_fds = {nullptr, nullptr, nullptr,
						   [](int) { return -EMFILE; }};
	struct sockbuf_guard_report rep;
	const int ret = pass_hooked(g.id, no_fds, &rep);
	ASSERT_EQ(ret, 0);
	EXPECT_EQ(rep.below, 1);
	EXPECT_EQ(rep.restored, 1) << "not restored at the descriptor limit";
	EXPECT_EQ(rep.errors, 0);
	EXPECT_GE(sndbuf(s), floor_size);
	EXPECT_EQ(descriptors_of(st.st_ino), 1) << "the spare slot still names the socket";
}

INSTANTIATE_TEST_SUITE_P(Sources, GuardRace,
			 ::testing::Values(SOCKBUF_GUARD_SRC_GETSOCKOPT, SOCKBUF_GUARD_SRC_DIAG,
					   SOCKBUF_GUARD_SRC_URING, SOCKBUF_GUARD_SRC_BPF),
			 source_name);

// close(), a new socket on the same number, add() of it, remove() of the
// number: the socket the number names now leaves, not the stale entry of
// the closed one; the next pass must not touch the new socket.
TEST(GuardRemove, AfterCloseReuseAndAddRemovesTheSocketTheNumberNames)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	fd first(tcp());
	ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, first));

	fd second(tcp());
	ASSERT_EQ(::dup2(second, first), first.v); // the first socket closes
	::close(second.v);
	second.v = -1;
	const int small = 4096;
	ASSERT_EQ(::setsockopt(first, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	const int snd_before = sndbuf(first);
	ASSERT_LT(snd_before, floor_size);

	ASSERT_EQ(sockbuf_guard_add(g.id, first, &full_floor), 0);
	ASSERT_EQ(sockbuf_guard_remove(g.id, first), 0);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 0) << "the socket the caller stopped guarding was restored";
	EXPECT_EQ(sndbuf(first), snd_before);
	// The stale entry found the new socket below its floor: dropped unwritten.
	EXPECT_EQ(rep.removed, 1);
	EXPECT_EQ(rep.reused, 1);
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 0);
	EXPECT_EQ(sockbuf_guard_remove(g.id, first), -ENOENT);
}

// The caller closed before removing: every entry under the number is
// stale, and all of them leave at once.
TEST(GuardRemove, ClosedNumberTakesItsEntriesWithIt)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	const int s = tcp();
	ASSERT_GE(s, 0);
	ASSERT_EQ(sockbuf_guard_add(g.id, s, &full_floor), 0);
	::close(s);
	EXPECT_EQ(sockbuf_guard_remove(g.id, s), 0);
	EXPECT_EQ(sockbuf_guard_remove(g.id, s), -ENOENT);
	struct sockbuf_guard_totals t;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	EXPECT_EQ(t.sockets, 0);
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.removed, 0) << "a removed entry is not counted as one that closed";
	EXPECT_EQ(rep.sockets, 0);
}

// The BPF slots are shared with the kernel: a child's remove() must not
// reach the parent's array (it used to zero the parent's slot, and the
// parent's next pass then dropped a live socket as gone).
TEST(GuardBpfFork, ChildRemoveLeavesTheParentsSlot)
{
	const std::string why = source_missing(SOCKBUF_GUARD_SRC_BPF);
	if (!why.empty())
		GTEST_SKIP() << why;
	guard_id g(SOCKBUF_GUARD_BPF);
	ASSERT_GE(g.id, 0);
	fd s(tcp());
	ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, s));
	struct sockbuf_guard_report rep;
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	ASSERT_EQ(rep.diag, SOCKBUF_GUARD_SRC_BPF);

	const pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(10);
		_exit(sockbuf_guard_remove(g.id, s) == 0 ? 0 : 1);
	}
	ASSERT_NO_FATAL_FAILURE(expect_child_exited_0(pid, "1: remove failed in the child"));

	ASSERT_NO_FATAL_FAILURE(push_below(s));
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.diag, SOCKBUF_GUARD_SRC_BPF);
	EXPECT_EQ(rep.removed, 0) << "the parent's live socket was dropped as gone";
	EXPECT_GE(rep.restored, 1);
	EXPECT_GE(sndbuf(s), floor_size);
}

// fork() while the guard's own thread is in the middle of a pass: the
// child's guard calls must return (they used to wait for a lock the
// thread held, which in the child nobody ever releases).  The pass is held
// in its read of the socket by the seam until the child has finished.
int g_entered = -1, g_release = -1;
pid_t g_parent = 0;
std::atomic<bool> g_held{false};

// Holds the library's call that a hook is in (in this process, not a
// child): says so on the gate's entered and waits until its release is
// written (bounded: 10 s).  Whether it was held.
bool hold_here()
{
	uint64_t one = 1;
	if (::write(g_entered, &one, sizeof(one)) != sizeof(one))
		return false;
	struct pollfd p = {g_release, POLLIN, 0};
	::poll(&p, 1, 10000);
	return true;
}

// Where a hook holds a call of the library (hold_here()): the test's ends
// of the two eventfds, given to the hooks while this lives.
struct hold_gate {
	fd entered{eventfd(0, EFD_CLOEXEC)}, release{eventfd(0, EFD_CLOEXEC)};
	hold_gate()
	{
		g_entered = entered;
		g_release = release;
		g_parent = getpid();
	}
	~hold_gate() { g_entered = g_release = -1; }
	hold_gate(const hold_gate &) = delete;
	hold_gate &operator=(const hold_gate &) = delete;
	bool ok() const { return entered.v >= 0 && release.v >= 0; }
	// Waits (at most 10 s) for a call to be held: 1 when one is.
	int held() const
	{
		struct pollfd p = {entered, POLLIN, 0};
		return ::poll(&p, 1, 10000);
	}
	// Lets the held call go on; what write() returned.
	ssize_t let_go() const
	{
		uint64_t one = 1;
		return ::write(release, &one, sizeof(one));
	}
};

int hold_get(int fd, int level, int name, void *, socklen_t *)
{
	(void)fd;
	if (getpid() == g_parent && is_size_read(level, name) && !g_held.exchange(true))
		hold_here(); // released by the test
	return sockbuf::sys::pass;
}

const sockbuf::sys::hooks hold_hooks = {hold_get, nullptr, nullptr, nullptr};

TEST(GuardFork, ChildForkedMidPassIsNotHeldUp)
{
	forced_source force(SOCKBUF_GUARD_SRC_GETSOCKOPT); // reads through the seam
	guard_id g(SOCKBUF_GUARD_RUN_IN_CHILD);
	ASSERT_GE(g.id, 0);
	fd s(tcp());
	ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, s));
	hold_gate gate;
	ASSERT_TRUE(gate.ok());
	g_held = false;
	sockbuf::sys::set_hooks(&hold_hooks);
	ASSERT_EQ(sockbuf_guard_start(g.id, 1000), 0);
	ASSERT_EQ(gate.held(), 1) << "the guard thread never began a pass";

	const pid_t pid = fork();
	if (pid == 0) {
		alarm(5); // a child held up dies of SIGALRM, and fails the test
		struct sockbuf_guard_report rep;
		struct sockbuf_guard_totals t;
		if (sockbuf_guard_pass(g.id, &rep) != 0 || rep.sockets != 1)
			_exit(1);
		if (sockbuf_guard_stats(g.id, &t) != 0 || t.interval_us != 0)
			_exit(2);
		if (sockbuf_guard_remove(g.id, s) != 0 ||
		    sockbuf_guard_add(g.id, s, &full_floor) != 0)
			_exit(3);
		if (sockbuf_guard_start(g.id, 1000) != 0 || sockbuf_guard_stop(g.id) != 0)
			_exit(4);
		_exit(sockbuf_guard_destroy(g.id) == 0 ? 0 : 5);
	}
	EXPECT_EQ(gate.let_go(), ssize_t(sizeof(uint64_t)));
	sockbuf::sys::set_hooks(nullptr);
	ASSERT_GE(pid, 0);
	expect_child_exited_0(pid, "1: pass, 2: stats (the parent's thread is not the "
				   "child's), 3: remove/add, 4: start/stop, 5: destroy");
	EXPECT_EQ(sockbuf_guard_stop(g.id), 0);
}

// fork() while a restore holds its duplicate of the program's fd: the
// child must not get a copy (it would hold the connection open after the
// parent closed it).  The restore is held in its first write by the seam;
// the test's own fork handler, run before the library's (prepare handlers
// run in reverse order of registration), lets it go on, so the fork
// reaches the library's handler while the duplicate is open.  The child
// reports whether the duplicate's number names the socket.
std::atomic<int> g_pin{-1};
std::atomic<bool> g_fork_armed{false};

int hold_write(int fd, int, int, const void *, socklen_t)
{
	if (getpid() != g_parent || g_pin.load() >= 0)
		return sockbuf::sys::pass;
	g_pin = fd;
	hold_here(); // released by the fork handler
	return sockbuf::sys::pass;
}

void release_write_at_fork()
{
	uint64_t one = 1;
	if (g_fork_armed.exchange(false) && ::write(g_release, &one, sizeof(one)) != sizeof(one))
		std::abort();
}

const sockbuf::sys::hooks hold_write_hooks = {nullptr, hold_write, nullptr, nullptr};

TEST(GuardFork, ChildForkedMidRestoreGetsNoCopyOfTheSocket)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0); // the library's fork handlers are registered now
	static std::once_flag registered;
	std::call_once(registered, [] { pthread_atfork(release_write_at_fork, nullptr, nullptr); });
	fd s(tcp());
	ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, s));
	ASSERT_NO_FATAL_FAILURE(push_below(s));
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	ASSERT_EQ(::getsockopt(s, SOL_SOCKET, SO_COOKIE, &cookie, &len), 0);
	hold_gate gate;
	ASSERT_TRUE(gate.ok());
	g_pin = -1;
	sockbuf::sys::set_hooks(&hold_write_hooks);
	struct sockbuf_guard_report rep = {};
	std::thread pass([&] { (void)sockbuf_guard_pass(g.id, &rep); });
	const int began = gate.held();
	const int pin = g_pin.load();
	g_fork_armed = true;
	const pid_t pid = began == 1 ? fork() : -1;
	if (pid == 0) {
		uint64_t c = 0;
		socklen_t l = sizeof(c);
		_exit(::getsockopt(pin, SOL_SOCKET, SO_COOKIE, &c, &l) == 0 && c == cookie ? 1 : 0);
	}
	g_fork_armed = false;
	pass.join();
	sockbuf::sys::set_hooks(nullptr);
	ASSERT_EQ(began, 1) << "the pass never reached its write";
	ASSERT_NE(pin, s.v) << "the restore wrote through the program's number";
	ASSERT_GE(pid, 0);
	expect_child_exited_0(pid, "1: the child holds the restore's duplicate of the socket");
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(s), floor_size);
}

// add() and remove() while a pass is in flight (held in its read of a
// socket by the seam): both return without waiting for the pass.
TEST(GuardRemove, AddAndRemoveDoNotWaitForAPassInFlight)
{
	forced_source force(SOCKBUF_GUARD_SRC_GETSOCKOPT); // reads through the seam
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	fd s(tcp()), t(tcp());
	ASSERT_EQ(sockbuf_guard_add(g.id, s, &full_floor), 0);
	hold_gate gate;
	fd done(eventfd(0, EFD_CLOEXEC));
	ASSERT_TRUE(gate.ok());
	ASSERT_GE(done.v, 0);
	g_held = false;
	sockbuf::sys::set_hooks(&hold_hooks);
	std::thread passer([&] {
		struct sockbuf_guard_report rep;
		sockbuf_guard_pass(g.id, &rep);
	});
	EXPECT_EQ(gate.held(), 1) << "the pass never began";
	int add = 1, rem = 1;
	std::thread caller([&] {
		add = sockbuf_guard_add(g.id, t, &full_floor);
		rem = sockbuf_guard_remove(g.id, s);
		uint64_t one = 1;
		EXPECT_EQ(::write(done, &one, sizeof(one)), ssize_t(sizeof(one)));
	});
	struct pollfd d = {done, POLLIN, 0};
	const int returned = ::poll(&d, 1, 2000);
	EXPECT_EQ(gate.let_go(), ssize_t(sizeof(uint64_t)));
	caller.join();
	passer.join();
	sockbuf::sys::set_hooks(nullptr);
	EXPECT_EQ(returned, 1) << "add()/remove() waited for the pass in flight";
	EXPECT_EQ(add, 0);
	EXPECT_EQ(rem, 0);
	struct sockbuf_guard_totals tot;
	ASSERT_EQ(sockbuf_guard_stats(g.id, &tot), 0);
	EXPECT_EQ(tot.sockets, 1);
}

// What one restore costs, through the seam: the pass's read, the identity
// check, and at most two more reads (the read-back, and the lock bits when
// one direction is restored) besides the writes.  Through the public
// sockbuf_restore_floor() it was nine reads.
std::atomic<int> g_gets{0}, g_sets{0};

int count_get(int, int, int, void *, socklen_t *)
{
	g_gets++;
	return sockbuf::sys::pass;
}

int count_set(int, int, int, const void *, socklen_t)
{
	g_sets++;
	return sockbuf::sys::pass;
}

const sockbuf::sys::hooks count_hooks = {count_get, count_set, nullptr, nullptr};

TEST(GuardRestore, OneRestoreReadsAtMostTwiceBesidesTheIdentity)
{
	if (!has_buf_lock())
		GTEST_SKIP() << "kernel has no SO_BUF_LOCK: the send side is not restored";
	forced_source force(SOCKBUF_GUARD_SRC_GETSOCKOPT);
	for (const struct sockbuf_floor fl : {sockbuf_floor{floor_size, 0}, full_floor}) {
		SCOPED_TRACE(fl.rcv ? "both directions" : "send only");
		guard_id g(0);
		ASSERT_GE(g.id, 0);
		fd s(tcp());
		ASSERT_NO_FATAL_FAILURE(add_at_floor(g.id, s, fl));
		struct sockbuf_guard_report rep;
		ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0); // the ring and sweep settle
		ASSERT_NO_FATAL_FAILURE(push_below(s));
		const int small = 4096;
		if (fl.rcv) {
			ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
		}
		g_gets = 0;
		g_sets = 0;
		const int ret = pass_hooked(g.id, count_hooks, &rep);
		ASSERT_EQ(ret, 0);
		EXPECT_EQ(rep.restored, fl.rcv ? 2 : 1);
		EXPECT_GE(sndbuf(s), floor_size);
		EXPECT_EQ(buflock(s), 0);
		// 1 pass read + 1 identity + at most 2.
		EXPECT_LE(g_gets.load(), 4);
		// A size per direction restored, and the lock bits.
		EXPECT_EQ(g_sets.load(), (fl.rcv ? 2 : 1) + 1);
	}
}

} // namespace
