// SPDX-License-Identifier: MIT
// sockbuf_guard_add_listener(): connections accepted by code the program
// does not control (a framework's thread) get the listener's floor; other
// listeners' connections, and other processes', are left alone.
#include "guard_util.h"
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace sockbuf::test;

namespace
{

// A listener on @addr (host order) and port @port (0: any), listening.
int listen_on(uint32_t addr, uint16_t port)
{
	int s = tcp();
	int one = 1;
	::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(addr);
	sa.sin_port = htons(port);
	if (::bind(s, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) || ::listen(s, 8)) {
		::close(s);
		return -1;
	}
	return s;
}

uint16_t port_of(int s)
{
	struct sockaddr_in sa = {};
	socklen_t len = sizeof(sa);
	::getsockname(s, reinterpret_cast<sockaddr *>(&sa), &len);
	return ntohs(sa.sin_port);
}

int connect_to(uint32_t addr, uint16_t port)
{
	int s = tcp();
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(addr);
	sa.sin_port = htons(port);
	if (::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof(sa))) {
		::close(s);
		return -1;
	}
	return s;
}

// A "framework": a thread of its own accepts on a listener and keeps the
// connections; the test only asks it, after the fact, which fd it got
// (to cut the buffer from outside, as the kernel would).
class acceptor
{
public:
	explicit acceptor(int listener) : l_(listener), t_([this] { run(); }) {}
	~acceptor()
	{
		::shutdown(l_, SHUT_RD); // wakes accept() with EINVAL
		t_.join();
		for (int f : fds_)
			::close(f);
	}
	acceptor(const acceptor &) = delete;
	acceptor &operator=(const acceptor &) = delete;
	// The @n-th connection accepted (from 0), waiting up to 5 s; -1 if none.
	int nth(size_t n)
	{
		std::unique_lock<std::mutex> lock(mu_);
		cv_.wait_for(lock, std::chrono::seconds(5), [&] { return fds_.size() > n; });
		return fds_.size() > n ? fds_[n] : -1;
	}

private:
	void run()
	{
		for (;;) {
			const int c = ::accept4(l_, nullptr, nullptr, SOCK_CLOEXEC);
			if (c < 0)
				return;
			std::lock_guard<std::mutex> lock(mu_);
			fds_.push_back(c);
			cv_.notify_all();
		}
	}
	int l_;
	std::mutex mu_;
	std::condition_variable cv_;
	std::vector<int> fds_;
	std::thread t_;
};

constexpr uint32_t lo = INADDR_LOOPBACK; // 127.0.0.1
constexpr uint32_t lo2 = 0x7f000002;	 // 127.0.0.2

void skip_without_buf_lock()
{
	if (!has_buf_lock())
		GTEST_SKIP()
		    << "kernel has no SO_BUF_LOCK: a send floor cannot be restored unlocked";
}

} // namespace

// With inet_diag (the default) and without it (the descriptor table walk):
// a guard and a listener on 127.0.0.1 for it to watch at fl.
class GuardListener : public ::testing::TestWithParam<unsigned int>
{
protected:
	void SetUp() override
	{
		ASSERT_GE(g.id, 0);
		ASSERT_GE(l, 0);
	}
	void watch() const { ASSERT_EQ(sockbuf_guard_add_listener(g.id, l, &fl), 0); }

	guard_id g{GetParam()};
	fd l{listen_on(lo, 0)};
	struct sockbuf_floor fl = {floor_size, 0};
};

INSTANTIATE_TEST_SUITE_P(Sources, GuardListener,
			 ::testing::Values(0u, unsigned(SOCKBUF_GUARD_NO_DIAG)),
			 [](const auto &p) { return p.param ? "walk" : "diag"; });

// A connection the test never handed to the guard, accepted by a thread
// it does not drive, cut below the floor: the pass takes it and restores
// it, unlocked; a connection of another listener on the same port (other
// address) and one on another port stay cut.
TEST_P(GuardListener, AcceptedByAnotherThreadIsRestoredOthersUntouched)
{
	skip_without_buf_lock();
	if (IsSkipped())
		return;
	const uint16_t port = port_of(l);
	fd same_port(listen_on(lo2, port)); // another listener, same port, other address
	ASSERT_GE(same_port, 0) << "bind 127.0.0.2:" << port;
	fd other_port(listen_on(lo, 0));
	ASSERT_GE(other_port, 0);

	ASSERT_NO_FATAL_FAILURE(watch());
	acceptor a1(l), a2(same_port), a3(other_port);
	fd c1(connect_to(lo, port)), c2(connect_to(lo2, port)),
	    c3(connect_to(lo, port_of(other_port)));
	ASSERT_GE(c1, 0);
	ASSERT_GE(c2, 0);
	ASSERT_GE(c3, 0);
	const int s1 = a1.nth(0), s2 = a2.nth(0), s3 = a3.nth(0);
	ASSERT_GE(s1, 0);
	ASSERT_GE(s2, 0);
	ASSERT_GE(s3, 0);
	push_below(s1);
	push_below(s2);
	push_below(s3);
	const int cut2 = sndbuf(s2), cut3 = sndbuf(s3);

	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 1) << "only the watched listener's connection";
	EXPECT_EQ(rep.sockets, 1);
	EXPECT_EQ(rep.below, 1);
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(s1), floor_size);
	EXPECT_EQ(buflock(s1), 0) << "restored unlocked";
	EXPECT_EQ(sndbuf(s2), cut2) << "same port, other address: not this listener's";
	EXPECT_EQ(sndbuf(s3), cut3) << "another listener's connection was touched";
	EXPECT_NE(buflock(s3), 0);

	// Taken once: the next pass adopts nothing and finds it at its floor.
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 0);
	EXPECT_EQ(rep.sockets, 1);
	EXPECT_EQ(rep.restored, 0);
	// Cut again: restored as any guarded socket.
	push_below(s1);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.restored, 1);
	EXPECT_GE(sndbuf(s1), floor_size);
}

// The guard's own thread: a connection accepted after the watch began is
// cut and comes back without the caller doing anything.
TEST_P(GuardListener, BackgroundThreadRestoresAConnectionItNeverSawAccepted)
{
	skip_without_buf_lock();
	if (IsSkipped())
		return;
	ASSERT_EQ(sockbuf_set_initial_bufsize(l, floor_size, 0, 0, nullptr), 0);
	ASSERT_NO_FATAL_FAILURE(watch());
	ASSERT_EQ(sockbuf_guard_start(g.id, 2000), 0);
	acceptor a(l);
	fd c(connect_to(lo, port_of(l)));
	ASSERT_GE(c, 0);
	const int s = a.nth(0);
	ASSERT_GE(s, 0);
	push_below(s);
	struct sockbuf_guard_totals t = {};
	for (int i = 0; i < 4000 && t.restored == 0; i++) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 1);
		ASSERT_EQ(sockbuf_guard_stats(g.id, &t), 0);
	}
	EXPECT_EQ(t.restored, 1u) << "no restore within 4 s of 2 ms passes";
	EXPECT_EQ(t.sockets, 1);
	EXPECT_GE(sndbuf(s), floor_size);
	EXPECT_EQ(buflock(s), 0);
}

// A connection of the listener held only by another process (a forked
// worker accepted it) is in the dump but not in this process's table:
// never taken.
TEST_P(GuardListener, AnotherProcesssConnectionIsNotTaken)
{
	ASSERT_NO_FATAL_FAILURE(watch());
	int ready[2], hold[2];
	ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
	ASSERT_EQ(::pipe2(hold, O_CLOEXEC), 0);
	const pid_t child = ::fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		::close(hold[1]); // the parent's close is the signal to go
		const int s = ::accept(l, nullptr, nullptr);
		char b = s >= 0 ? 'y' : 'n';
		(void)!::write(ready[1], &b, 1);
		(void)!::read(hold[0], &b, 1); // until the parent is done
		_exit(0);
	}
	fd c(connect_to(lo, port_of(l)));
	ASSERT_GE(c, 0);
	char b = 0;
	ASSERT_EQ(::read(ready[0], &b, 1), 1);
	EXPECT_EQ(b, 'y');
	struct sockbuf_guard_report rep = {};
	for (int i = 0; i < 4; i++) { // past the three passes it is looked for
		ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
		EXPECT_EQ(rep.adopted, 0) << "pass " << i;
		EXPECT_EQ(rep.sockets, 0) << "pass " << i;
	}
	::close(hold[1]);
	int status = 0;
	::waitpid(child, &status, 0);
	for (int f : {ready[0], ready[1], hold[0]})
		::close(f);
}

// The watch ends when the listener's number names another socket, and
// with sockbuf_guard_remove() on it; the connections taken stay guarded.
TEST_P(GuardListener, WatchEndsWithItsListener)
{
	ASSERT_NO_FATAL_FAILURE(watch());
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, &fl), -EEXIST);
	fd c(connect_to(lo, port_of(l)));
	ASSERT_GE(c, 0);
	fd s(::accept4(l, nullptr, nullptr, SOCK_CLOEXEC));
	ASSERT_GE(s, 0);
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 1);

	// The number now names another listener: its connections are not
	// the watched one's.
	fd l2(listen_on(lo, 0));
	ASSERT_GE(l2, 0);
	ASSERT_EQ(::dup3(l2, l, O_CLOEXEC), int(l));
	fd c2(connect_to(lo, port_of(l2)));
	ASSERT_GE(c2, 0);
	fd s2(::accept4(l2, nullptr, nullptr, SOCK_CLOEXEC));
	ASSERT_GE(s2, 0);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 0) << "a reused listener number kept the watch";
	EXPECT_EQ(rep.sockets, 1) << "the connection taken stays guarded";
	EXPECT_EQ(sockbuf_guard_remove(g.id, l), -ENOENT) << "the watch had ended";

	// remove() on a watched listener ends its watch.
	ASSERT_EQ(sockbuf_guard_add_listener(g.id, l2, &fl), 0);
	EXPECT_EQ(sockbuf_guard_remove(g.id, l2), 0);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 0) << "removed, yet its connection was taken";
}

TEST(GuardListenerInput, BadInputHasPreciseErrors)
{
	guard_id g(0);
	ASSERT_GE(g.id, 0);
	struct sockbuf_floor fl = {65536, 0};
	fd l(listen_on(lo, 0));
	ASSERT_GE(l, 0);
	EXPECT_EQ(sockbuf_guard_add_listener(-1, l, &fl), -EBADF);
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, -1, &fl), -EBADF);
	int closed = tcp();
	::close(closed);
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, closed, &fl), -EBADF);
	fd file(::open("/proc/self/stat", O_RDONLY | O_CLOEXEC));
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, file, &fl), -ENOTSOCK);
	fd u(udp());
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, u, &fl), -EPROTOTYPE);
	fd unbound(tcp());
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, unbound, &fl), -EINVAL) << "not listening";
	fd c(connect_to(lo, port_of(l)));
	ASSERT_GE(c, 0);
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, c, &fl), -EINVAL) << "connected, not listening";
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, nullptr), -EINVAL);
	struct sockbuf_floor zero = {0, 0}, huge = {SOCKBUF_SIZE_MAX + 1, 0};
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, &zero), -EINVAL);
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, &huge), -EOVERFLOW);
	struct sockbuf_probe_info p;
	ASSERT_EQ(sockbuf_probe(&p, 0), 0);
	if (p.sndbuf_max > 0 && p.sndbuf_max < SOCKBUF_SIZE_MAX) {
		struct sockbuf_floor above = {p.sndbuf_max + 2, 0};
		EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, &above), -ERANGE);
	}
	// Nothing refused was watched: a connection stays untaken.
	fd s(::accept4(l, nullptr, nullptr, SOCK_CLOEXEC));
	ASSERT_GE(s, 0);
	struct sockbuf_guard_report rep = {};
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 0);
	EXPECT_EQ(sockbuf_guard_add_listener(g.id, l, &fl), 0);
	ASSERT_EQ(sockbuf_guard_pass(g.id, &rep), 0);
	EXPECT_EQ(rep.adopted, 1);
}
