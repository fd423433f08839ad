// SPDX-License-Identifier: MIT
// What runs the passes: the library's thread (polling, or woken by the
// event source), the caller's timerfd, and the guard across fork().
#include "guard.h"

#include "guard_internal.h"

#include "buffer.h"
#include "exec.h"
#include "floor_registry.h"
#include "op.h"
#include "probe.h"
#include "sys.h"
#include "validate.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <functional>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <new>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{
// A timer's period or first expiry from microseconds.
timespec timespec_of_us(unsigned int us)
{
	return {time_t(us / 1'000'000), long(us % 1'000'000) * 1000};
}
} // namespace

void floor_guard::before_fork()
{
	run_mu_.lock();
	mu_.lock();
}

void floor_guard::after_fork_parent()
{
	mu_.unlock();
	run_mu_.unlock();
}

// The forking thread holds mu_ and run_mu_ (before_fork()), so the set and
// the totals are whole; what a pass in another thread owned may be caught
// half-done, and is forgotten, never freed: the pass lock, the per-pass
// vectors, the netlink socket, the BPF iterator (bpf_pass.h).  The io_uring
// ring is made anew by its next open() (uring.h).  The thread is not in the
// child; the timer is the parent's (the child's passes do not read it).
void floor_guard::after_fork_child()
{
	new (&pass_mu_) std::mutex();
	new (&now_) std::vector<sizes>();
	new (&verdict_) std::vector<char>();
	new (&ring_vals_) std::vector<ring_vals>();
	new (&ring_reads_) std::vector<uring::sockopt_read>();
	new (&bpf_seq_) std::vector<uint64_t>();
	diag_.after_fork();
	diag_reopen_ = true;
	bpf_.after_fork();
	bpf_claimed_seq_ = 0;
	// The parent's programs, ring and eventfd: the child's copy of the
	// guard polls (a child's stop() must not wake the parent's thread).
	ev_.after_fork();
	if (ev_err_ == 0 || events_parked_)
		ev_err_ = -ECHILD;
	// The parent's hand-over: the child's copy serves itself (its floors
	// are in its parent's table, not a table of its own).
	events_parked_ = false;
	forked_ = true;
	if (served_fd_.load(std::memory_order_relaxed) >= 0)
		::close(served_fd_.exchange(-1, std::memory_order_relaxed));
	close_progress();
	dm_stats_.pid = 0;
	dm_stats_.err = -ECHILD;
	new (&ev_inodes_) std::vector<uint32_t>();
	new (&ev_index_) std::vector<size_t>();
	new (&ev_unclear_) std::vector<uint32_t>();
	if (wake_fd_ >= 0)
		::close(wake_fd_);
	wake_fd_ = -1;
	sweep_lo_ = sweep_hi_ = 0;
	new (&thread_) std::thread();
	stop_word_.store(0, std::memory_order_relaxed);
	set_interval(0);
	mu_.unlock();
	run_mu_.unlock();
}

// The thread sleeps on a futex (stop_word_) with an absolute
// CLOCK_MONOTONIC deadline: one syscall per wakeup, where a condition
// variable's wait_until also unlocks and relocks its mutex and keeps its
// own counters (about 20 % more CPU per wakeup on a 2-vCPU VM).  stop()
// sets the word and wakes it.
// With events on: one epoll set holds the ring and the stop eventfd;
// the wait ends on records, on stop, or when the safety net's full pass
// is due.  A round on records restores the sockets named; the full pass
// keeps the rule of the polling thread (rest at least as long as it took).
void floor_guard::run_thread_events(unsigned int net_us, unsigned int poll_us)
{
	const int64_t net_ns = int64_t(net_us) * 1000;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {};
	ev.events = EPOLLIN;
	// The ring's fd and its generation under the pass lock: another
	// thread's pass may close the source (a hand-over) at any time; the
	// loop leaves when the generation moves.
	uint64_t gen;
	{
		std::lock_guard<std::mutex> pass_lock(pass_mu_);
		if (!events_on()) {
			if (ep >= 0)
				::close(ep);
			return; // drive() goes on polling
		}
		ev.data.fd = ev_.fd();
		gen = ev_gen_.load(std::memory_order_acquire);
	}
	bool ok = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0;
	ev.data.fd = wake_fd_;
	ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd_, &ev) == 0;
	if (!ok) {
		if (ep >= 0)
			::close(ep);
		run_thread(poll_us, false); // never unguarded: polling, as without events
		return;
	}
	int64_t next_full = 0;
	while (stop_word_.load(std::memory_order_acquire) == 0) {
		const int64_t begin = now_ns();
		const bool due = begin >= next_full;
		bool unclear;
		{
			std::lock_guard<std::mutex> pass_lock(pass_mu_);
			run_pass(due, nullptr);
			unclear = !ev_unclear_.empty();
		}
		if (ev_gen_.load(std::memory_order_acquire) != gen)
			break; // closed for sockbufd, or opened again: drive() goes on
		if (due) {
			const int64_t end = now_ns();
			next_full = std::max(begin + net_ns, end + (end - begin));
		}
		int64_t left = next_full - now_ns();
		// A socket whose mark stuck posts no record: look again at the
		// polling interval, not at the net's.
		if (unclear)
			left = std::min(left, int64_t(poll_us) * 1000);
		// At least once a second a round without records: it reads
		// the runs the kernel skipped (event_source::lost()), cuts no
		// record will ever name, and looks for a daemon that started
		// (a round costs a drain of the empty ring and a bpf() call
		// per program).
		left = std::min<int64_t>(left, 1'000'000'000);
		const int timeout_ms = left <= 0 ? 0 : int((left + 999'999) / 1'000'000);
		struct epoll_event got[2];
		const int r = epoll_wait(ep, got, 2, timeout_ms);
		for (int k = 0; k < r; k++)
			if (got[k].data.fd == wake_fd_) {
				uint64_t v;
				ssize_t rd = ::read(wake_fd_, &v, sizeof(v));
				(void)rd; // the stop word says why
			}
	}
	::close(ep);
}

// The thread's body: events while they drive the guard, polling
// otherwise; each returns when the other is to take over (the event
// programs closed for sockbufd, or loaded again after it).
void floor_guard::drive(unsigned int net_us, unsigned int poll_us, bool events)
{
	while (stop_word_.load(std::memory_order_acquire) == 0) {
		if (events && events_on_locked())
			run_thread_events(net_us, poll_us);
		else
			run_thread(poll_us, events);
	}
}

// While sockbufd serves (served_wait_fd()), the wait is on its pidfd and
// the stop eventfd: the guard takes its sockets back the moment the daemon
// exits, and otherwise sleeps until its next look at the daemon's
// progress.  Returns 1 when the
// daemon's pidfd or a stop woke it, 0 at the deadline.
int floor_guard::wait_served(int pidfd, int64_t until_ns)
{
	int64_t left = until_ns - now_ns();
	// Without the stop eventfd (eventfd() failed) stop() only sets the
	// word: look at it every 100 ms rather than once a net interval.
	if (wake_fd_ < 0)
		left = std::min<int64_t>(left, 100'000'000);
	const int timeout_ms =
	    left <= 0 ? 0 : int(std::min<int64_t>((left + 999'999) / 1'000'000, INT_MAX));
	struct pollfd p[2] = {{pidfd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
	const int r = ::poll(p, wake_fd_ >= 0 ? 2 : 1, timeout_ms);
	if (r > 0 && (p[1].revents & POLLIN)) {
		uint64_t v;
		ssize_t rd = ::read(wake_fd_, &v, sizeof(v));
		(void)rd; // the stop word says why
	}
	return r > 0 ? 1 : 0;
}

void floor_guard::run_thread(unsigned int interval_us, bool events)
{
	const int64_t interval_ns = int64_t(interval_us) * 1000;
	while (stop_word_.load(std::memory_order_acquire) == 0) {
		const int64_t begin = now_ns();
		pass(nullptr);
		if (events && events_on_locked())
			return; // the programs are back (sockbufd exited)
		const int64_t end = now_ns();
		// Never more than half a core: rest at least as long as the
		// pass took.
		int64_t next = std::max(begin + interval_ns, end + (end - begin));
		const int served = served_wait_fd();
		if (served >= 0) {
			// Until the next look at the daemon (its progress, at
			// this guard's own interval: the pass skips the sockets
			// while it keeps them), the daemon going (its pidfd), or
			// a stop.
			wait_served(served, next);
			continue;
		}
		struct timespec deadline;
		deadline.tv_sec = time_t(next / 1'000'000'000);
		deadline.tv_nsec = long(next % 1'000'000'000);
		// Bounded: each wait ends at the deadline, on stop, or on a
		// signal; the deadline only moves forward.
		while (stop_word_.load(std::memory_order_acquire) == 0) {
			long r =
			    syscall(SYS_futex, &stop_word_, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
				    0u, &deadline, nullptr, FUTEX_BITSET_MATCH_ANY);
			if (r != 0 && errno == ETIMEDOUT)
				break;
		}
	}
}

int floor_guard::start(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> lock(run_mu_);
	if (thread_.joinable() || interval_us_)
		return -EALREADY;
	stop_word_.store(0, std::memory_order_release);
	// The stop eventfd wakes the events thread, and a polling thread
	// that waits on sockbufd's pidfd.
	if (wake_fd_ < 0)
		wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	const bool events = events_on() && wake_fd_ >= 0; // no eventfd: poll at @interval_us
	const unsigned int net_us = net_interval_us_;
	set_interval(events ? net_us : interval_us);
	poll_us_.store(interval_us, std::memory_order_relaxed);
	try {
		thread_ = std::thread([this, net_us, interval_us, events] {
			name_thread();
			drive(net_us, interval_us, events);
		});
	} catch (const std::system_error &) {
		set_interval(0);
		return -EAGAIN;
	}
	return 0;
}

// The guard's thread says whose it is in top -H, ps -L and
// /proc/PID/task/TID/comm, among the program's own threads.  A failure
// (a name too long cannot happen) costs nothing but the name.
void floor_guard::name_thread()
{
	(void)pthread_setname_np(pthread_self(), "sockbuf-guard");
}

int floor_guard::stop()
{
	std::thread t;
	{
		std::lock_guard<std::mutex> lock(run_mu_);
		if (!thread_.joinable())
			return -ENOENT;
		stop_word_.store(1, std::memory_order_release);
		t = std::move(thread_);
	}
	syscall(SYS_futex, &stop_word_, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr,
		0);
	if (wake_fd_ >= 0) {
		const uint64_t one = 1;
		ssize_t w = ::write(wake_fd_, &one, sizeof(one));
		(void)w; // EAGAIN: a wakeup is pending already
	}
	t.join();
	{
		// Without a driver the guard serves itself again (a pass now
		// would; stop() says so at once).
		std::lock_guard<std::mutex> pass_lock(pass_mu_);
		if (served_fd_.load(std::memory_order_relaxed) >= 0) {
			resume(-ESRCH);
			reload_events();
		}
	}
	std::lock_guard<std::mutex> lock(run_mu_);
	set_interval(0);
	registry::publish_no_guard(); // no driver: `sockbuf show` says none
	return 0;
}

int floor_guard::timerfd(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> run_lock(run_mu_);
	if (thread_.joinable() || interval_us_)
		return -EALREADY;
	// With events on the timer is the safety net's, and the caller gets
	// an epoll fd holding it and the ring.
	const bool events = events_on();
	poll_us_.store(interval_us, std::memory_order_relaxed);
	if (events)
		interval_us = net_interval_us_;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	const struct itimerspec its = {timespec_of_us(interval_us), timespec_of_us(interval_us)};
	if (timerfd_settime(fd, 0, &its, nullptr) < 0) {
		int err = -errno;
		::close(fd);
		return err;
	}
	int ep = -1;
	if (events) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.fd = fd;
		bool ok = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0;
		ev.data.fd = ev_.fd();
		ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0;
		if (!ok) {
			const int err = errno > 0 ? -errno : -ENOMEM;
			if (ep >= 0)
				::close(ep);
			::close(fd);
			return err;
		}
	}
	set_interval(interval_us);
	std::lock_guard<std::mutex> lock(mu_);
	if (timer_fd_ >= 0)
		::close(timer_fd_); // a forked child's copy of its parent's timer
	timer_fd_ = fd;
	epoll_fd_ = ep;
	timer_owner_ = getpid();
	return ep >= 0 ? ep : fd;
}

void floor_guard::rearm_for_unclear()
{
	if (ev_unclear_.empty())
		return;
	std::lock_guard<std::mutex> lock(mu_);
	if (epoll_fd_ < 0 || timer_fd_ < 0 || timer_owner_ != getpid())
		return;
	const unsigned int poll = poll_us_.load(std::memory_order_relaxed);
	const unsigned int net = interval_us_.load(std::memory_order_relaxed);
	// First at the polling interval, then the net's.
	const struct itimerspec its = {timespec_of_us(net), timespec_of_us(poll)};
	// Fails only on a bad fd: the net's timer then stays as it was.
	(void)timerfd_settime(timer_fd_, 0, &its, nullptr);
}

void floor_guard::set_interval(unsigned int interval_us)
{
	interval_us_.store(interval_us, std::memory_order_relaxed);
	drive_epoch_.fetch_add(1, std::memory_order_release);
}

// How late a full pass starting at @t0 is: 0 unless a driver runs and
// planned this pass (plan_due() under the same driver: a restarted or
// stopped driver owes nothing).  Caller holds pass_mu_.
int64_t floor_guard::late_ns(int64_t t0) const
{
	if (due_ns_ <= 0 || due_epoch_ != drive_epoch_.load(std::memory_order_acquire))
		return 0;
	return std::max<int64_t>(0, t0 - due_ns_);
}

// The driver's rule (run_thread()): the next pass one interval after this
// one began, or resting as long as this one took, whichever is later.
// The caller's timer keeps its own period, so for sockbuf_guard_timerfd()
// this errs early: lateness is never overstated.  Caller holds pass_mu_.
void floor_guard::plan_due(int64_t t0, int64_t duration_ns)
{
	due_epoch_ = drive_epoch_.load(std::memory_order_acquire);
	const int64_t every = int64_t(interval_us_.load(std::memory_order_relaxed)) * 1000;
	due_ns_ = every ? std::max(t0 + every, t0 + 2 * duration_ns) : 0;
}

} // namespace sockbuf::guard
