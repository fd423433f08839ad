// SPDX-License-Identifier: MIT
// The guard's hand-over to sockbufd (SOCKBUF_GUARD_NO_DAEMON in sockbuf.h):
// while a root daemon serves this process's network namespace, every
// floor of this guard is in the floor registry where the daemon reads it,
// and the daemon keeps every kind of cut at least as soon as this guard
// would, the guard closes its event programs (one set per host is the
// daemon's, not one per process on every ACK) and runs a pass only at the
// safety net's interval.
//
// What the daemon keeps, it says in its progress file (daemon_progress.h):
// how late it sees a cut by memory pressure (0 with its event programs)
// and one by a socket-option write (setsockopt() of SO_SNDBUF or
// SO_RCVBUF, SO_BUF_LOCK: 0 where its programs watch the write, else its
// full passes' interval).  The guard compares both with its own
// (own_bounds()): a guard polling every 20 ms never stands down for a
// daemon that passes once a second, nor a polling guard for a daemon
// whose events leave setsockopt() cuts to its 60 s net (a kernel where
// sk_setsockopt() could not be attached: before 6.1).
//
// While served, the guard still wakes at its own interval, for a few
// microseconds: a poll() of the daemon's pidfd (readable when it exits)
// and a pread() of the progress file.  It takes its sockets back when the
// daemon exits, when its last pass is older than twice its loop's period
// (plus 5 ms) and this guard's interval (stopped with SIGSTOP, hung in a
// system call, overloaded), or when its bounds no longer cover this
// guard's: a cut made the moment the daemon stalls is back within about
// the guard's interval plus that age, not at the safety net's.
//
// The window: a floor added while served is the daemon's once it reads the
// table again (its --reread, 100 ms by default).
#include "daemon_presence.h"
#include "floor_registry.h"
#include "guard.h"
#include "guard_internal.h"

#include <algorithm>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{
// How often a guard that serves itself looks for a daemon: the presence
// file's stat and open, a few microseconds.
constexpr int64_t handover_check_ns = 1'000'000'000;

struct timespec timespec_of_ns(int64_t ns)
{
	return {time_t(ns / 1'000'000'000), long(ns % 1'000'000'000)};
}
} // namespace

// Whether this guard may stand down now, and if not why (the err of
// sockbuf_guard_daemon_totals).  Caller holds pass_mu_.
bool floor_guard::handover_wanted() const
{
	// sockbufd does not follow listeners: a guard that watches one
	// keeps its passes.
	return !(flags_ & SOCKBUF_GUARD_NO_DAEMON) && !forked_ &&
	       !watching_.load(std::memory_order_relaxed) &&
	       !publish_failed_.load(std::memory_order_relaxed) &&
	       interval_us_.load(std::memory_order_relaxed) != 0;
}

progress::bounds floor_guard::own_bounds() const
{
	const uint32_t poll = poll_us_.load(std::memory_order_relaxed);
	// Parked: the programs closed for the daemon load again at a resume.
	if (events_on() || events_parked_) {
		const unsigned int attached = events_parked_ ? parked_attached_ : ev_.attached();
		const bool writes = attached & bpf::ev_sk_setsockopt;
		return {poll, 0, writes ? 0 : net_interval_us_.load(std::memory_order_relaxed)};
	}
	return {poll, poll, poll};
}

// Caller holds pass_mu_.
int floor_guard::daemon_keeps(int64_t now)
{
	progress::reading r;
	int err = progress::read(progress_fd_, &r);
	if (err == -EAGAIN)
		err = progress::read(progress_fd_, &r); // caught mid-rewrite
	if (err == 0) {
		// The daemon's clock where it is this guard's; else the moment
		// this guard saw its count move.
		if (r.timens == own_timens_)
			dm_beat_ns_ = int64_t(r.beat_ns);
		else if (r.passes != dm_passes_)
			dm_beat_ns_ = now;
		dm_passes_ = r.passes;
		dm_bounds_ = r.b;
	} else if (err != -EAGAIN || dm_beat_ns_ == 0) {
		return err;
	}
	const progress::bounds own = own_bounds();
	if (dm_bounds_.mem_us > own.mem_us || dm_bounds_.set_us > own.set_us)
		return -ERANGE;
	const int64_t stale = std::max<int64_t>(
	    2 * int64_t(dm_bounds_.period_us) * 1000 + 5'000'000, int64_t(own.period_us) * 1000);
	if (now - dm_beat_ns_ > stale)
		return -ETIMEDOUT;
	return 0;
}

void floor_guard::close_progress()
{
	if (progress_fd_ >= 0)
		::close(progress_fd_);
	progress_fd_ = -1;
	dm_passes_ = 0;
	dm_beat_ns_ = 0;
	dm_bounds_ = {};
}

bool floor_guard::handover_step(int64_t now)
{
	const int served = served_fd_.load(std::memory_order_relaxed);
	if (served >= 0) {
		struct pollfd p = {served, POLLIN, 0};
		// Readable (or hung up) when the daemon exits; a failed poll()
		// (EINTR, ENOMEM) says nothing about it.
		const bool exited =
		    ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
		int why = 0;
		if (exited)
			why = -ENOENT;
		else if (!handover_wanted())
			why = publish_failed_ ? -ENOSPC : -ESRCH;
		else
			why = daemon_keeps(now); // stalled, or no longer as tight
		if (why) {
			resume(why);
			return false;
		}
		if (now < served_full_ns_)
			return true;
		served_full_ns_ =
		    now + int64_t(net_interval_us_.load(std::memory_order_relaxed)) * 1000;
		return false; // the safety net's pass
	}
	if (now < handover_check_ns_)
		return false;
	handover_check_ns_ = now + handover_check_ns;
	{
		// What `sockbuf show` says keeps this process's floors.
		const progress::bounds own = own_bounds();
		registry::publish_guard(own.mem_us, own.set_us, 0);
	}
	int why = 0;
	if (flags_ & SOCKBUF_GUARD_NO_DAEMON)
		why = -EPERM;
	else if (forked_)
		why = -ECHILD;
	else if (publish_failed_.load(std::memory_order_relaxed))
		why = -ENOSPC;
	else if (interval_us_.load(std::memory_order_relaxed) == 0)
		why = -ESRCH;
	presence::serving daemon;
	int pidfd = why ? why : presence::serving_pidfd(&daemon);
	if (pidfd >= 0) {
		// Only for a daemon that proves progress and keeps every kind
		// of cut within this guard's bound.
		close_progress();
		own_timens_ = progress::own_timens();
		progress_fd_ = progress::open_file();
		const int err = progress_fd_ < 0 ? progress_fd_ : daemon_keeps(now);
		if (err) {
			close_progress();
			::close(pidfd);
			pidfd = err;
		}
	}
	if (pidfd < 0) {
		std::lock_guard<std::mutex> lock(mu_);
		dm_stats_.err = pidfd;
		return false;
	}
	stand_down(pidfd, daemon.pid, now);
	return false; // this pass runs: the daemon may not have read the table yet
}

// Caller holds pass_mu_.
void floor_guard::stand_down(int pidfd, pid_t daemon, int64_t now)
{
	std::lock_guard<std::mutex> lock(mu_);
	if (events_on()) {
		// The ring's fd leaves the caller's epoll set as it closes; add()
		// and remove() leave the closed source alone while ev_err_ says
		// why.
		parked_attached_ = ev_.attached();
		ev_.close();
		ev_err_ = -EBUSY;
		events_parked_ = true;
		ev_unclear_.clear();
		ev_gen_.fetch_add(1, std::memory_order_release);
	}
	if (epoll_fd_ >= 0 && timer_owner_ == getpid()) {
		// The caller's epoll set wakes when the daemon exits.
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.fd = pidfd;
		(void)epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev);
	}
	if (events_parked_ && timer_fd_ >= 0 && timer_owner_ == getpid()) {
		// The caller's timer, set for the safety net, now wakes the
		// guard at its own interval: each tick looks at the daemon.
		const int64_t poll = int64_t(poll_us_.load(std::memory_order_relaxed)) * 1000;
		const struct itimerspec its = {timespec_of_ns(poll), timespec_of_ns(poll)};
		(void)timerfd_settime(timer_fd_, 0, &its, nullptr);
	}
	served_full_ns_ = now + int64_t(net_interval_us_.load(std::memory_order_relaxed)) * 1000;
	served_since_ns_ = now;
	dm_stats_.err = 0;
	dm_stats_.handovers++;
	dm_stats_.pid = daemon;
	const progress::bounds own = own_bounds();
	registry::publish_guard(own.mem_us, own.set_us, daemon);
	served_fd_.store(pidfd, std::memory_order_release);
}

// Caller holds pass_mu_.  The sockets are the guard's again from here;
// the event programs are loaded again by reload_events(), after the pass
// that follows has restored what is below (loading takes a while).
void floor_guard::resume(int why)
{
	std::lock_guard<std::mutex> lock(mu_);
	// Under mu_: a fork() (which waits for mu_) never copies the pidfd
	// between the two.
	const int pidfd = served_fd_.exchange(-1, std::memory_order_acq_rel);
	if (pidfd >= 0)
		::close(pidfd); // leaves the caller's epoll set with it
	close_progress();
	dm_stats_.pid = 0;
	dm_stats_.err = why;
	dm_stats_.resumes++;
	const progress::bounds own = own_bounds();
	registry::publish_guard(own.mem_us, own.set_us, 0);
	dm_stats_.served_ns += uint64_t(now_ns() - served_since_ns_);
	handover_check_ns_ = now_ns() + handover_check_ns;
	// A thread waiting on the daemon's pidfd (another thread resumed):
	// back to its own interval.
	if (wake_fd_ >= 0) {
		const uint64_t one = 1;
		ssize_t w = ::write(wake_fd_, &one, sizeof(one));
		(void)w; // EAGAIN: a wakeup is pending already
	}
}

// After the pass that follows a resume.  Caller holds pass_mu_.  Under
// mu_: add() and remove() wait for the load (hundreds of milliseconds
// under emulation, once per daemon exit), and a fork() never copies a
// half-made event source.
void floor_guard::reload_events()
{
	std::lock_guard<std::mutex> lock(mu_);
	if (!events_parked_ || served_fd_.load(std::memory_order_relaxed) >= 0)
		return;
	events_parked_ = false;
	ev_err_ = ev_.open();
	ev_lost_seen_ = 0;
	ev_gen_.fetch_add(1, std::memory_order_release);
	if (ev_err_ == 0)
		for (size_t i = 0; i < entries_.size(); i++) {
			const entry &e = entries_.at(i);
			if (e.removed.load(std::memory_order_relaxed))
				continue;
			const int ret = ev_.watch(e.inode, e.floor.snd, e.floor.rcv);
			if (ret < 0)
				ev_stats_.watch_err = ret;
		}
	if (epoll_fd_ < 0 || timer_fd_ < 0 || timer_owner_ != getpid())
		return;
	if (ev_err_ == 0) {
		struct epoll_event ev = {};
		ev.events = EPOLLIN;
		ev.data.fd = ev_.fd();
		if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0) {
			// The timer back to the safety net's period.
			const int64_t net =
			    int64_t(net_interval_us_.load(std::memory_order_relaxed)) * 1000;
			const struct itimerspec its = {timespec_of_ns(net), timespec_of_ns(net)};
			(void)timerfd_settime(timer_fd_, 0, &its, nullptr);
			return;
		}
	}
	// The programs would not load again: the caller's timer, set for the
	// safety net, now drives polling.
	const int64_t poll = int64_t(poll_us_.load(std::memory_order_relaxed)) * 1000;
	const struct itimerspec its = {timespec_of_ns(poll), timespec_of_ns(poll)};
	(void)timerfd_settime(timer_fd_, 0, &its, nullptr);
}

// add() found a floor it could not publish while served: the next pass
// (which resumes) now, not at the net's.  Caller holds mu_.
void floor_guard::wake_for_handover()
{
	if (wake_fd_ >= 0) {
		const uint64_t one = 1;
		ssize_t w = ::write(wake_fd_, &one, sizeof(one));
		(void)w;
	}
	// The caller's timer fires now and keeps its period: the polling
	// interval without events, the safety net's with them (a period set
	// to the polling interval here would outlive the resume, and a guard
	// whose programs load again would run a full pass at every tick).
	struct itimerspec soon;
	if (timer_fd_ >= 0 && timer_owner_ == getpid() && timerfd_gettime(timer_fd_, &soon) == 0) {
		soon.it_value = {0, 1};
		(void)timerfd_settime(timer_fd_, 0, &soon, nullptr);
	}
}

// Caller holds pass_mu_.
void floor_guard::drain_timer()
{
	std::lock_guard<std::mutex> lock(mu_);
	if (timer_fd_ >= 0 && timer_owner_ == getpid()) {
		uint64_t expirations;
		ssize_t r = ::read(timer_fd_, &expirations, sizeof(expirations));
		(void)r; // EAGAIN: not due
	}
}

void floor_guard::daemon_stats(struct sockbuf_guard_daemon_totals *out)
{
	std::lock_guard<std::mutex> lock(mu_);
	*out = dm_stats_;
	if (served_fd_.load(std::memory_order_relaxed) >= 0)
		out->served_ns += uint64_t(now_ns() - served_since_ns_);
}

} // namespace sockbuf::guard
