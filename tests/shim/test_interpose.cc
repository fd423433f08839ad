// SPDX-License-Identifier: MIT
// The shim inside a real process: ctest runs this program with
// LD_PRELOAD=libsockbuf-shim.so and a different SOCKBUF_SHIM per suite
// (tests/shim/CMakeLists.txt).  Every check reads the kernel's view.
#include "hooks.h"
#include "shim_util.h"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

using namespace shim_test;

namespace
{

int rmem_max()
{
	std::ifstream f("/proc/sys/net/core/rmem_max");
	int v = -1;
	f >> v;
	return v;
}

// Runs shim_child and checks that its one line of output holds @want
// (the line, on failure).
testing::AssertionResult child_prints(const char *want)
{
	std::string out;
	FILE *p = popen(SHIM_CHILD_PATH, "r");
	if (p) {
		char buf[512];
		while (fgets(buf, sizeof(buf), p))
			out += buf;
		pclose(p);
	}
	if (out.find(want) != std::string::npos)
		return testing::AssertionSuccess();
	return testing::AssertionFailure() << out;
}

// What the kernel answers this process for @name set to 4096 on a fresh
// socket, past the shim: 0 or -errno.  (The library inside the shim is not
// reachable from here.)
int plain_set_result(int name)
{
	fd_guard s(tcp());
	int v = 4096;
	return plain_setsockopt(s.fd, SOL_SOCKET, name, &v, sizeof(v)) == 0 ? 0 : -errno;
}

} // namespace

// ---- policy:initial ------------------------------------------------------

TEST(Initial, RcvbufStaysUnlockedAndReadsBackDoubled)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(rcvbuf(s.fd), 131072) << "programs read back 2X, as with libc";
	EXPECT_EQ(lock_bits(s.fd), 0) << "the kernel would have locked it";
}

TEST(Initial, SndbufStaysUnlocked)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_SNDBUF, 65536), 0);
	EXPECT_EQ(sndbuf(s.fd), 131072);
	EXPECT_EQ(lock_bits(s.fd), 0);
}

TEST(Initial, BothDirectionsAndIpv6)
{
	REQUIRE_SHIM();
	fd_guard s(socket(AF_INET6, SOCK_STREAM, 0));
	if (s.fd < 0)
		GTEST_SKIP() << "no IPv6: " << strerror(errno);
	ASSERT_EQ(set_int(s.fd, SO_SNDBUF, 100000), 0);
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 200000), 0);
	EXPECT_EQ(sndbuf(s.fd), 200000);
	EXPECT_EQ(rcvbuf(s.fd), 400000);
	EXPECT_EQ(lock_bits(s.fd), 0);
}

TEST(Initial, SameSizesAsLibcForEveryRequest)
{
	REQUIRE_SHIM();
	const int requests[] = {1, 1000, 4097, 65536, 1 << 20, 64 << 20, INT_MAX / 2, INT_MAX};
	for (int v : requests) {
		fd_guard shimmed(tcp()), plain(tcp());
		ASSERT_EQ(set_int(shimmed.fd, SO_RCVBUF, v), 0) << v;
		ASSERT_EQ(plain_setsockopt(plain.fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
		EXPECT_EQ(rcvbuf(shimmed.fd), rcvbuf(plain.fd)) << "request " << v;
		EXPECT_EQ(lock_bits(shimmed.fd), 0) << "request " << v;
		EXPECT_EQ(lock_bits(plain.fd), 2) << "request " << v;
	}
	EXPECT_GT(rmem_max(), 0);
}

TEST(Initial, ZeroAndNegativeAreLeftToTheKernel)
{
	REQUIRE_SHIM();
	for (int v : {0, -1}) {
		fd_guard shimmed(tcp()), plain(tcp());
		ASSERT_EQ(set_int(shimmed.fd, SO_RCVBUF, v), 0);
		ASSERT_EQ(plain_setsockopt(plain.fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
		EXPECT_EQ(rcvbuf(shimmed.fd), rcvbuf(plain.fd)) << v;
		EXPECT_EQ(lock_bits(shimmed.fd), 2) << v;
	}
}

TEST(Initial, UdpAndUnixKeepTheKernelsBehaviour)
{
	REQUIRE_SHIM();
	fd_guard u(socket(AF_INET, SOCK_DGRAM, 0));
	ASSERT_EQ(set_int(u.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(lock_bits(u.fd), 2);
	int sv[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fd_guard a(sv[0]), b(sv[1]);
	ASSERT_EQ(set_int(a.fd, SO_SNDBUF, 65536), 0);
	EXPECT_EQ(lock_bits(a.fd), 1);
}

TEST(Initial, ErrorsAndErrnoAreLibcs)
{
	REQUIRE_SHIM();
	int v = 65536;
	errno = 0;
	EXPECT_EQ(setsockopt(-1, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), -1);
	EXPECT_EQ(errno, EBADF);
	int pipefd[2];
	ASSERT_EQ(pipe(pipefd), 0);
	fd_guard p0(pipefd[0]), p1(pipefd[1]);
	EXPECT_EQ(setsockopt(p0.fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), -1);
	EXPECT_EQ(errno, ENOTSOCK);
	fd_guard s(tcp());
	EXPECT_EQ(setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &v, 2), -1);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, nullptr, sizeof(v)), -1);
	EXPECT_EQ(errno, EFAULT);
	EXPECT_EQ(setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, reinterpret_cast<void *>(8), sizeof(v)),
		  -1)
	    << "a bad pointer is the kernel's EFAULT, not a crash in the shim";
	EXPECT_EQ(errno, EFAULT);
	EXPECT_EQ(lock_bits(s.fd), 0) << "failed calls change nothing";

	// A successful call leaves errno as it was, even though the shim
	// made several calls of its own.
	errno = EAGAIN;
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, v), 0);
	EXPECT_EQ(errno, EAGAIN);
	ASSERT_EQ(set_int(s.fd, SO_KEEPALIVE, 1), 0);
	EXPECT_EQ(get_int(s.fd, SOL_SOCKET, SO_KEEPALIVE), 1) << "other options pass through";
}

TEST(Initial, GetsockoptRestoresTheFloor)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0); // floor 131072
	// Shrink it behind the shim's back, as memory pressure would.
	int small = 4096;
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	ASSERT_EQ(plain_get_int(s.fd, SOL_SOCKET, SO_RCVBUF), 8192);
	EXPECT_EQ(rcvbuf(s.fd), 131072) << "the read-back a program checks still holds";
	EXPECT_EQ(lock_bits(s.fd), 0);
}

TEST(Initial, ReusedFdNumberDoesNotInheritAFloor)
{
	REQUIRE_SHIM();
	int fd = tcp();
	ASSERT_EQ(set_int(fd, SO_RCVBUF, 65536), 0);
	close(fd);
	fd_guard again(tcp());
	ASSERT_EQ(again.fd, fd) << "the test needs the same fd number back";
	int small = 4096;
	ASSERT_EQ(plain_setsockopt(again.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(rcvbuf(again.fd), 8192) << "a different socket: no restore";
	EXPECT_EQ(lock_bits(again.fd), 2);
}

// A repeated request takes the shim's short way (no protocol check, no
// read-back, no publication): what it keeps from the first call must
// still be true of the socket.
TEST(Initial, RepeatedRequestReadsTheOtherDirectionsLockEachTime)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	int v = 65536;
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), 0);
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, v), 0);
	EXPECT_EQ(lock_bits(s.fd), 1) << "the send buffer's lock is the program's";
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, v), 0);
	EXPECT_EQ(lock_bits(s.fd), 1);
	// Unlocked behind the shim's back (another tool, io_uring): a lock
	// state remembered from the first call would set it again.
	int none = 0;
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_BUF_LOCK, &none, sizeof(none)), 0);
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, v), 0);
	EXPECT_EQ(lock_bits(s.fd), 0);
}

TEST(Initial, RepeatedRequestKeepsItsFloorAndANewOneTakesANewFloor)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	int small = 4096;
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0);
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0); // floor not read back
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(rcvbuf(s.fd), 131072) << "the floor the first call found";
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 100000), 0);
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(rcvbuf(s.fd), 200000) << "a different request: its own floor";
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 1000), 0);
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	EXPECT_EQ(rcvbuf(s.fd), 8192) << "a floor below the buffer: nothing raised";
}

TEST(Initial, ReusedFdNumberForUdpIsNotTakenForTcp)
{
	REQUIRE_SHIM();
	int fd = tcp();
	ASSERT_EQ(set_int(fd, SO_RCVBUF, 65536), 0); // the entry notes TCP
	close(fd);
	fd_guard u(socket(AF_INET, SOCK_DGRAM, 0));
	ASSERT_EQ(u.fd, fd) << "the test needs the same fd number back";
	ASSERT_EQ(set_int(u.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(lock_bits(u.fd), 2) << "UDP keeps the kernel's behaviour";
}

TEST(Initial, NoAllocationOrLockInTheInterposedCalls)
{
	REQUIRE_SHIM();
	fd_guard s(tcp()), u(socket(AF_INET, SOCK_DGRAM, 0));
	// The counters work: prove it before trusting a zero.
	watching = true;
	void *volatile p = malloc(16); // volatile: the pair must not be optimised away
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&m);
	watching = false;
	pthread_mutex_unlock(&m);
	free(p);
	ASSERT_GE(allocations.load(), 1);
	ASSERT_GE(mutex_locks.load(), 1);

	allocations = 0;
	mutex_locks = 0;
	int small = 4096;
	watching = true;
	for (int i = 0; i < 50; i++) {
		set_int(s.fd, SO_RCVBUF, 65536 + i);
		set_int(s.fd, SO_SNDBUF, 65536 + i);
		set_int(u.fd, SO_RCVBUF, 65536);
		plain_setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		rcvbuf(s.fd); // the floor-restore path
	}
	watching = false;
	EXPECT_EQ(allocations.load(), 0);
	EXPECT_EQ(mutex_locks.load(), 0);
	EXPECT_EQ(lock_bits(s.fd), 0);
}

TEST(Initial, ManyThreadsAtOnce)
{
	REQUIRE_SHIM();
	constexpr int threads = 4, per_thread = 200;
	std::atomic<int> unlocked{0}, wrong{0};
	std::vector<std::thread> pool;
	for (int t = 0; t < threads; t++)
		pool.emplace_back([&, t] {
			for (int i = 0; i < per_thread; i++) {
				int fd = tcp();
				int v = 8192 * (1 + (i + t) % 16);
				if (set_int(fd, (i & 1) ? SO_SNDBUF : SO_RCVBUF, v) == 0 &&
				    lock_bits(fd) == 0)
					unlocked++;
				if (((i & 1) ? sndbuf(fd) : rcvbuf(fd)) != 2 * v)
					wrong++;
				close(fd);
			}
		});
	for (auto &th : pool)
		th.join();
	EXPECT_EQ(unlocked.load(), threads * per_thread);
	EXPECT_EQ(wrong.load(), 0);
}

namespace
{
int g_handler_fd = -1;
std::atomic<int> g_handler_runs{0}, g_handler_unlocked{0};
std::atomic<bool> g_in_handler{false};
std::atomic<long> g_handler_allocations{0};

void on_alarm(int)
{
	int saved = errno;
	long before = allocations.load();
	int v = 32768 + 4096 * (g_handler_runs.load() % 8);
	if (setsockopt(g_handler_fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0 &&
	    lock_bits(g_handler_fd) == 0)
		g_handler_unlocked++;
	g_handler_allocations += allocations.load() - before;
	g_handler_runs++;
	errno = saved;
}
} // namespace

TEST(Initial, CalledFromASignalHandlerInterruptingMallocAndTheShim)
{
	REQUIRE_SHIM();
	fd_guard hs(tcp()), ms(tcp());
	g_handler_fd = hs.fd;
	struct sigaction sa {
	};
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	ASSERT_EQ(sigaction(SIGALRM, &sa, nullptr), 0);
	itimerval every{{0, 200}, {0, 200}};
	allocations = 0;
	watching = true; // count allocations everywhere; the handler takes its delta
	ASSERT_EQ(setitimer(ITIMER_REAL, &every, nullptr), 0);
	// The main thread keeps malloc and the shim busy; the handler lands
	// inside either.  Bounded by iterations; a deadlock hits the ctest
	// timeout.
	for (int i = 0; i < 20000 && g_handler_runs.load() < 200; i++) {
		void *p = malloc(64 + i % 512);
		set_int(ms.fd, SO_RCVBUF, 65536 + (i % 64) * 1024);
		free(p);
	}
	itimerval off{};
	setitimer(ITIMER_REAL, &off, nullptr);
	watching = false;
	signal(SIGALRM, SIG_DFL);
	ASSERT_GT(g_handler_runs.load(), 0) << "the timer never fired";
	EXPECT_EQ(g_handler_unlocked.load(), g_handler_runs.load());
	EXPECT_EQ(g_handler_allocations.load(), 0);
	EXPECT_EQ(lock_bits(ms.fd), 0);
}

TEST(Initial, ForkFromAMultithreadedProcess)
{
	REQUIRE_SHIM();
	std::atomic<bool> stop{false};
	std::vector<std::thread> busy;
	for (int t = 0; t < 2; t++)
		busy.emplace_back([&] {
			for (int i = 0; i < 100000 && !stop; i++) {
				int fd = tcp();
				set_int(fd, SO_RCVBUF, 65536);
				close(fd);
			}
		});
	int failures = 0;
	for (int k = 0; k < 20; k++) {
		pid_t pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			alarm(10); // a deadlock in the child ends as SIGALRM
			int fd = tcp();
			int ok = set_int(fd, SO_RCVBUF, 65536) == 0 && lock_bits(fd) == 0 &&
				 rcvbuf(fd) == 131072;
			_exit(ok ? 0 : 1);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failures++;
	}
	stop = true;
	for (auto &th : busy)
		th.join();
	EXPECT_EQ(failures, 0);
}

TEST(Initial, ExecutedProgramsInheritTheShim)
{
	REQUIRE_SHIM();
	EXPECT_TRUE(child_prints("shim=1 lock=0 rcvbuf=131072"));
}

// ---- policy:initial,exec:drop --------------------------------------------

TEST(ExecDrop, ThisProcessIsShimmedItsChildrenAreNot)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(lock_bits(s.fd), 0);
	const char *preload = getenv("LD_PRELOAD");
	EXPECT_TRUE(!preload || !strstr(preload, "libsockbuf-shim.so")) << preload;
	EXPECT_TRUE(child_prints("shim=0 lock=2 rcvbuf=131072"));
}

// ---- policy:passthrough ---------------------------------------------------

TEST(Passthrough, ExactlyLibc)
{
	REQUIRE_SHIM();
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(rcvbuf(s.fd), 131072);
	EXPECT_EQ(lock_bits(s.fd), 2);
	fd_guard l(tcp());
	ASSERT_EQ(listener_on(l.fd, 0), 0);
	EXPECT_EQ(lock_bits(l.fd), 0);
	EXPECT_EQ(rcvbuf(l.fd), plain_get_int(l.fd, SOL_SOCKET, SO_RCVBUF));
}

// ---- roles, ports, defaults (see SHIM_RULES in CMakeLists.txt) ------------
// SOCKBUF_SHIM=policy:initial,default_rcv:256K,connecting.rcv:64K,
//   accepted.rcv:512K,port=<SHIM_LOCK_PORT>:lock,log:<file>,log_rate:5

namespace
{
uint16_t lock_port()
{
	const char *p = getenv("SHIM_LOCK_PORT");
	return p ? uint16_t(atoi(p)) : 0;
}
} // namespace

TEST(Rules, ListenerGetsTheDefaultBeforeListen)
{
	REQUIRE_SHIM();
	fd_guard l(tcp());
	EXPECT_EQ(rcvbuf(l.fd), 131072) << "untouched until listen()";
	ASSERT_EQ(listener_on(l.fd, 0), 0);
	EXPECT_EQ(rcvbuf(l.fd), 262144);
	EXPECT_EQ(lock_bits(l.fd), 0);

	fd_guard c(tcp());
	ASSERT_EQ(connect_to(c.fd, port_of(l.fd)), 0);
	EXPECT_EQ(rcvbuf(c.fd), 65536) << "connecting.rcv, over default_rcv, before the handshake";
	EXPECT_EQ(lock_bits(c.fd), 0);

	fd_guard a(accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
	ASSERT_GE(a.fd, 0);
	EXPECT_EQ(rcvbuf(a.fd), 524288) << "accepted.rcv, over the listener's 256 KB";
	EXPECT_EQ(lock_bits(a.fd), 0);
}

TEST(Rules, TheProgramsOwnRequestBeatsTheDefault)
{
	REQUIRE_SHIM();
	fd_guard l(tcp());
	ASSERT_EQ(set_int(l.fd, SO_RCVBUF, 32768), 0);
	ASSERT_EQ(listener_on(l.fd, 0), 0);
	EXPECT_EQ(rcvbuf(l.fd), 65536);
	EXPECT_EQ(lock_bits(l.fd), 0);
}

TEST(Rules, PortRuleLocksAtListenAndTheAcceptedSocketInherits)
{
	REQUIRE_SHIM();
	uint16_t port = lock_port();
	ASSERT_NE(port, 0) << "SHIM_LOCK_PORT not set";
	fd_guard l(tcp());
	ASSERT_EQ(set_int(l.fd, SO_RCVBUF, 65536), 0);
	EXPECT_EQ(lock_bits(l.fd), 0) << "the port is not known yet: global policy";
	int ret = listener_on(l.fd, port);
	if (ret == -EADDRINUSE)
		GTEST_SKIP() << "port " << port << " is in use on this machine";
	ASSERT_EQ(ret, 0);
	EXPECT_EQ(lock_bits(l.fd), 2) << "port=" << port << ":lock";
	EXPECT_EQ(rcvbuf(l.fd), 131072);

	fd_guard c(tcp());
	ASSERT_EQ(set_int(c.fd, SO_RCVBUF, 65536), 0);
	ASSERT_EQ(connect_to(c.fd, port), 0);
	EXPECT_EQ(lock_bits(c.fd) & 2, 2) << "the remote port's rule applies to the client";
	fd_guard a(accept(l.fd, nullptr, nullptr));
	ASSERT_GE(a.fd, 0);
	EXPECT_EQ(lock_bits(a.fd) & 2, 2);
	EXPECT_EQ(rcvbuf(a.fd), 524288) << "accepted.rcv, locked under the port's policy";
}

TEST(Rules, NonBlockingConnectPolledAgainChangesNothing)
{
	REQUIRE_SHIM();
	fd_guard l(tcp());
	ASSERT_EQ(listener_on(l.fd, 0), 0);
	fd_guard c(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	int first = connect_to(c.fd, port_of(l.fd));
	ASSERT_TRUE(first == 0 || first == -EINPROGRESS) << first;
	int small = 4096;
	ASSERT_EQ(plain_setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	int again = connect_to(c.fd, port_of(l.fd));
	EXPECT_TRUE(again == -EISCONN || again == -EALREADY || again == 0) << again;
	EXPECT_EQ(plain_get_int(c.fd, SOL_SOCKET, SO_SNDBUF), 8192)
	    << "no default applied after the handshake";
}

TEST(Rules, LogIsRateLimited)
{
	REQUIRE_SHIM();
	const char *path = getenv("SHIM_LOG_FILE");
	ASSERT_TRUE(path);
	fd_guard s(tcp());
	for (int i = 0; i < 300; i++)
		set_int(s.fd, SO_RCVBUF, 65536 + i);
	std::ifstream f(path);
	int lines = 0;
	std::string line;
	while (std::getline(f, line))
		lines++;
	// log_rate:5, one-second windows: this test spans at most a few.
	EXPECT_GE(lines, 1);
	EXPECT_LE(lines, 40) << "300 calls must not give 300 lines";
}

// ---- reserve:on -----------------------------------------------------------

namespace
{
std::vector<std::string> log_lines(const char *path)
{
	std::vector<std::string> lines;
	std::ifstream f(path);
	std::string line;
	while (std::getline(f, line))
		lines.push_back(line);
	return lines;
}

bool has_line(const std::vector<std::string> &lines, const std::string &part)
{
	for (const auto &l : lines)
		if (l.find(part) != std::string::npos)
			return true;
	return false;
}
} // namespace

// The listener gets sized but no reservation (its accepted sockets would
// not inherit one); each accepted socket gets its own attempt, of the floor
// it inherited, and the log says how it went.
TEST(Reserve, AcceptedSocketsAreReservedListenersAreNot)
{
	REQUIRE_SHIM();
	const char *path = getenv("SHIM_LOG_FILE");
	ASSERT_TRUE(path);
	const int kernel = plain_set_result(SO_RESERVE_MEM);
	if (kernel == -ENOPROTOOPT)
		GTEST_SKIP() << "kernel has no SO_RESERVE_MEM (before 5.16)";
	fd_guard l(tcp());
	ASSERT_EQ(listener_on(l.fd, 0), 0);
	ASSERT_EQ(rcvbuf(l.fd), 262144) << "listener.rcv:256K";
	fd_guard c(tcp());
	ASSERT_EQ(connect_to(c.fd, port_of(l.fd)), 0);
	fd_guard a(accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC));
	ASSERT_GE(a.fd, 0);

	const auto lines = log_lines(path);
	const std::string listener = "fd " + std::to_string(l.fd) + " listener reserve";
	EXPECT_FALSE(has_line(lines, listener));
	// The floor inherited from the listener: its 256 KB receive floor
	// and the send floor 0 (never sized).
	const std::string accepted =
	    "fd " + std::to_string(a.fd) + " accepted reserve for floor 0/262144 -> ";
	if (kernel == 0)
		EXPECT_TRUE(has_line(lines, accepted + "reserved")) << accepted;
	else
		EXPECT_TRUE(
		    has_line(lines, accepted + "not reserved: error " + std::to_string(kernel)))
		    << accepted << " with " << kernel;
	// The client was never sized: no floor, nothing to reserve.
	EXPECT_FALSE(has_line(lines, "fd " + std::to_string(c.fd) + " connecting reserve"));
}

// ---- FORCE -----------------------------------------------------------------

namespace
{
// Both FORCE suites: the program's own SO_RCVBUFFORCE of twice rmem_max on
// socket s, which only CAP_NET_ADMIN lets through; the suites differ in
// what the shim's configuration lets it do with that.
class force_request : public testing::Test
{
protected:
	void SetUp() override
	{
		REQUIRE_SHIM();
		if (plain_set_result(SO_RCVBUFFORCE) != 0)
			GTEST_SKIP() << "needs CAP_NET_ADMIN";
	}

	int big = rmem_max() * 2;
	fd_guard s{tcp()};
};
using ForceAllowed = force_request;
using ForceDenied = force_request;
} // namespace

TEST_F(ForceAllowed, ForceRequestStaysUnlockedPastRmemMax)
{
	ASSERT_EQ(set_int(s.fd, SO_RCVBUFFORCE, big), 0);
	EXPECT_EQ(rcvbuf(s.fd), 2 * big);
	EXPECT_EQ(lock_bits(s.fd), 0);
	fd_guard p(tcp());
	ASSERT_EQ(set_int(p.fd, SO_RCVBUF, big), 0);
	EXPECT_EQ(rcvbuf(p.fd), 2 * rmem_max()) << "plain requests never use FORCE";
	EXPECT_EQ(lock_bits(p.fd), 0);
}

TEST_F(ForceDenied, ForceRequestIsLeftAsTheKernelSetIt)
{
	ASSERT_EQ(set_int(s.fd, SO_RCVBUFFORCE, big), 0);
	EXPECT_EQ(rcvbuf(s.fd), 2 * big) << "the program's own FORCE call";
	EXPECT_EQ(lock_bits(s.fd), 2) << "force:allow not set: the shim does not touch it";
}

// ---- guard:MS ------------------------------------------------------------
// SHIM_GUARD_EXPECTED=1: the configuration has guard:5, and a buffer pushed
// below its floor behind the shim's back comes back without any call of
// the program's; 0: no guard, and it stays down (the control).

namespace
{

// Sockets this process holds (the guard's inet_diag netlink socket among
// them once it made its guard).
int socket_fds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (const struct dirent *e = readdir(d)) {
		char path[300], link[64];
		std::snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		const ssize_t len = readlink(path, link, sizeof(link) - 1);
		if (len > 0 && std::strncmp(link, "socket:", 7) == 0)
			n++;
	}
	closedir(d);
	return n;
}

// The shim's guard thread ("sockbuf-guard"), 0 if there is none.
pid_t guard_tid()
{
	pid_t tid = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	while (const struct dirent *e = readdir(d)) {
		std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
		std::string name;
		if (std::getline(comm, name) && name == "sockbuf-guard")
			tid = pid_t(std::atoi(e->d_name));
	}
	closedir(d);
	return tid;
}

// How many times thread @tid went to sleep by itself.
long voluntary_switches(pid_t tid)
{
	std::ifstream st("/proc/self/task/" + std::to_string(tid) + "/status");
	std::string line;
	while (std::getline(st, line))
		if (line.rfind("voluntary_ctxt_switches:", 0) == 0)
			return std::atol(line.c_str() + 24);
	return -1;
}

} // namespace

// The guard (and with it BPF programs and its netlink socket) is made
// only once the process has a socket with a floor: a program's children
// that never set one pay nothing.  The thread is waited for until it has
// gone round its wait three times with no floor in the process; a guard
// made eagerly would hold its socket by then.  This test runs first in
// its process: no test before it has made a socket.
TEST(FloorGuard, NoGuardUntilTheProcessHasAFloor)
{
	REQUIRE_SHIM();
	const char *expected = std::getenv("SHIM_GUARD_EXPECTED");
	ASSERT_NE(expected, nullptr) << "the ctest suite sets SHIM_GUARD_EXPECTED";
	pid_t tid = 0;
	for (int i = 0; i < 2000 && !(tid = guard_tid()); i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	if (std::strcmp(expected, "1") != 0) {
		EXPECT_EQ(tid, 0) << "a guard thread without guard:MS";
		return;
	}
	ASSERT_NE(tid, 0) << "no sockbuf-guard thread within 2 s";
	for (int i = 0; i < 2000 && voluntary_switches(tid) < 3; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	ASSERT_GE(voluntary_switches(tid), 3) << "the guard thread never waited";
	ASSERT_EQ(socket_fds(), 0) << "a guard made with no floor in the process (or a socket "
				      "from before the test)";
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_SNDBUF, 65536), 0); // a floor: the guard comes
	int n = 1;
	for (int i = 0; i < 2000 && (n = socket_fds()) < 2; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	EXPECT_GE(n, 2) << "no guard (its inet_diag socket) within 2 s of the first floor";
}

TEST(FloorGuard, BufferPushedBelowComesBackOnlyWithTheGuard)
{
	REQUIRE_SHIM();
	const char *expected = std::getenv("SHIM_GUARD_EXPECTED");
	ASSERT_NE(expected, nullptr) << "the ctest suite sets SHIM_GUARD_EXPECTED";
	const bool guarded = std::strcmp(expected, "1") == 0;
	fd_guard s(tcp());
	ASSERT_EQ(set_int(s.fd, SO_SNDBUF, 65536), 0); // floor 131072
	if (lock_bits(s.fd) != 0)
		GTEST_SKIP() << "kernel has no SO_BUF_LOCK: the send floor cannot be restored "
				"unlocked";
	int small = 4096;
	ASSERT_EQ(plain_setsockopt(s.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ASSERT_EQ(plain_get_int(s.fd, SOL_SOCKET, SO_SNDBUF), 8192);
	// Bounded: 2 s for the guard (5 ms passes), 300 ms for the control.
	const int limit_ms = guarded ? 2000 : 300;
	int now = 8192;
	for (int waited = 0; waited < limit_ms && now < 131072; waited++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
		now = plain_get_int(s.fd, SOL_SOCKET, SO_SNDBUF);
	}
	if (guarded) {
		EXPECT_GE(now, 131072) << "the guard thread did not restore the floor in 2 s";
		EXPECT_EQ(lock_bits(s.fd), 0);
	} else {
		EXPECT_EQ(now, 8192) << "without guard:MS nothing may touch the socket";
	}
}

// A pre-fork server's worker: the sockets it makes after fork() get their
// floor from the shim in the child, and only a guard thread of the
// child's own can restore them (the parent's guard never sees the child's
// fd table).  Fails when the child has no guard thread.
TEST(FloorGuard, ForkedWorkerHasAGuardOfItsOwn)
{
	REQUIRE_SHIM();
	const char *expected = std::getenv("SHIM_GUARD_EXPECTED");
	ASSERT_NE(expected, nullptr) << "the ctest suite sets SHIM_GUARD_EXPECTED";
	const bool guarded = std::strcmp(expected, "1") == 0;
	{
		fd_guard probe(tcp());
		ASSERT_EQ(set_int(probe.fd, SO_SNDBUF, 65536), 0);
		if (lock_bits(probe.fd) != 0)
			GTEST_SKIP() << "kernel has no SO_BUF_LOCK: the send floor cannot be "
					"restored unlocked";
	}
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(10); // a child that hangs is killed, and fails the test
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || set_int(s, SO_SNDBUF, 65536) != 0) // floor 131072
			_exit(2);
		int small = 4096;
		if (plain_setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) != 0)
			_exit(3);
		// Bounded: 2 s for the guard (5 ms passes), 300 ms for the control.
		const int limit_ms = guarded ? 2000 : 300;
		int now = plain_get_int(s, SOL_SOCKET, SO_SNDBUF);
		for (int waited = 0; waited < limit_ms && now < 131072; waited++) {
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
			now = plain_get_int(s, SOL_SOCKET, SO_SNDBUF);
		}
		const bool restored = now >= 131072 && lock_bits(s) == 0;
		_exit(restored == guarded ? 0 : 1);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
	EXPECT_EQ(WEXITSTATUS(status), 0)
	    << (guarded ? "the forked child's socket was not restored within 2 s"
			: "without guard:MS nothing may touch the child's socket");
}
