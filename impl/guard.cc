// SPDX-License-Identifier: MIT
// The floor guard's set of sockets: making and destroying a guard, adding
// and removing sockets (with their identity and reservation), and its totals.
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
#include <fcntl.h>
#include <functional>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <new>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

int check_flags(unsigned int flags)
{
	return (flags & ~known_flags) ? -EINVAL : 0;
}

#ifdef SOCKBUF_TEST_SEAM
void force_source(int source)
{
	g_forced_source.store(source, std::memory_order_relaxed);
}
#endif

floor_guard::floor_guard(unsigned int flags) : flags_(flags), owner_(getpid())
{
	if (flags_ & SOCKBUF_GUARD_NO_DIAG)
		diag_err_ = -EPERM;
	else
		diag_err_ = diag_.open();
	if (flags_ & SOCKBUF_GUARD_NO_URING)
		uring_err_ = -EPERM;
	stats_.diag_err = diag_err_;
	stats_.uring_err = uring_err_;
	if (flags_ & SOCKBUF_GUARD_EVENTS)
		ev_err_ = ev_.open();
	// Without them (the process at its limit already) a restore at the
	// limit fails and is counted, as before.
	hold_fd_ = eventfd(0, EFD_CLOEXEC);
	if (hold_fd_ >= 0)
		spare_fd_ = ::fcntl(hold_fd_, F_DUPFD_CLOEXEC, 0);
}

floor_guard::~floor_guard()
{
	stop();
	const int served = served_fd_.exchange(-1);
	if (served >= 0)
		::close(served);
	close_progress();
	for (size_t i = 0; i < entries_.size(); i++)
		if (!entries_.at(i).removed.load(std::memory_order_relaxed))
			registry::withdraw(entries_.at(i).inode, registry::by_guard);
	if (timer_fd_ >= 0)
		::close(timer_fd_);
	if (epoll_fd_ >= 0)
		::close(epoll_fd_);
	if (wake_fd_ >= 0)
		::close(wake_fd_);
	if (spare_fd_ >= 0)
		::close(spare_fd_);
	if (hold_fd_ >= 0)
		::close(hold_fd_);
}

int floor_guard::check_range(const struct sockbuf_floor &floor) const
{
	struct sockbuf_probe_info info;
	const int ret = probe::get(&info, false);
	if (ret < 0)
		return ret;
	const bool may_force =
	    (flags_ & SOCKBUF_GUARD_ALLOW_FORCE) && (info.features & SOCKBUF_FEAT_FORCE);
	if (!may_force && ((info.sndbuf_max > 0 && floor.snd > info.sndbuf_max) ||
			   (info.rcvbuf_max > 0 && floor.rcv > info.rcvbuf_max)))
		return -ERANGE;
	return 0;
}

int floor_guard::add(int fd, const struct sockbuf_floor &floor, uint32_t expect_inode, int read_fd)
{
	const int rfd = read_fd >= 0 ? read_fd : fd;
	int ret = validate::sizes(floor.snd, floor.rcv, false);
	if (ret == 0)
		ret = validate::tcp_socket(rfd);
	if (ret == 0)
		ret = validate::tcp_type(rfd, -1); // a raw socket of protocol TCP
	if (ret == 0)
		ret = check_range(floor);
	if (ret < 0)
		return ret;
	int64_t inode = diag::socket_inode(rfd);
	if (inode < 0)
		return int(inode);
	if (expect_inode && uint32_t(inode) != expect_inode)
		return -ESTALE;
	int family = 0;
	ret = sys::get_int(rfd, SOL_SOCKET, SO_DOMAIN, &family);
	if (ret < 0)
		return ret;
	// Without one, io_uring passes read this socket by getsockopt.
	uint64_t cookie = socket_cookie(rfd);

	std::lock_guard<std::mutex> lock(mu_);
	if (by_inode_.count(uint32_t(inode)))
		return -EEXIST;
	entry e;
	e.fd = fd;
	e.family = family;
	e.inode = uint32_t(inode);
	e.cookie = cookie;
	e.seq = next_seq_;
	e.floor = floor;
	const long i = entries_.push_back(e);
	if (i < 0)
		return int(i);
	try {
		index_add(size_t(i));
	} catch (const std::bad_alloc &) {
		index_drop(size_t(i));
		entries_.pop_back();
		return -ENOMEM;
	}
	next_seq_++;
	stats_.sockets++;
	if (events_on()) {
		// Not in the map: passes still guard it (the safety net).
		ret = ev_.watch(e.inode, floor.snd, floor.rcv);
		if (ret < 0)
			ev_stats_.watch_err = ret;
	}
	max_fd_ = std::max(max_fd_, fd);
	if (flags_ & SOCKBUF_GUARD_RESERVE_MEM)
		reserve_at_add(rfd, floor);
	if (registry::publish(inode, floor.snd, floor.rcv, registry::by_guard) != 0) {
		publish_failed_.store(true, std::memory_order_relaxed);
		// sockbufd cannot see this floor: a served guard takes its
		// sockets back at its next pass, brought forward to now.
		if (served_fd_.load(std::memory_order_relaxed) >= 0)
			wake_for_handover();
	}
	return 0;
}

// Entry i in the indexes.  Caller holds mu_.
void floor_guard::index_add(size_t i)
{
	const entry &e = entries_.at(i);
	by_inode_.emplace(e.inode, i);
	by_fd_.emplace(e.fd, i);
}

// Entry i out of the indexes (where they name it).  Caller holds mu_.
void floor_guard::index_drop(size_t i)
{
	const entry &e = entries_.at(i);
	auto it = by_inode_.find(e.inode);
	if (it != by_inode_.end() && it->second == i)
		by_inode_.erase(it);
	auto range = by_fd_.equal_range(e.fd);
	for (auto f = range.first; f != range.second; ++f)
		if (f->second == i) {
			by_fd_.erase(f);
			break;
		}
}

// Accepted sockets do not inherit their listener's reservation: a
// transport that adds each one gets it here.  Caller holds mu_.
void floor_guard::reserve_at_add(int fd, const struct sockbuf_floor &floor)
{
	struct sockbuf_report rep;
	op o{};
	o.fd = fd;
	o.protocol = IPPROTO_TCP;
	o.flags = SOCKBUF_F_RESERVE_MEM;
	o.rep = &rep;
	if (probe::cached(&o.facts) < 0)
		return; // filled by add() already: cannot fail here
	// add() told TCP already: this cannot refuse the socket.
	if (exec::reserve_only(o, exec::reserve_amount(floor.snd, floor.rcv)) < 0)
		return;
	count_reservation(rep);
}

// Caller holds mu_.
void floor_guard::count_reservation(const struct sockbuf_report &rep)
{
	if (rep.flags & SOCKBUF_R_LISTENER)
		return; // never reserved: its accepted sockets would not inherit it
	if (rep.flags & SOCKBUF_R_RESERVED) {
		stats_.reserve_ok++;
	} else if (rep.flags & SOCKBUF_R_RESERVE_FAILED) {
		stats_.reserve_failed++;
		stats_.reserve_err = rep.reserve_err;
	}
}

// By the socket the fd names now (its inode), so that an entry left by a
// closed socket whose number was reused is never the one removed.  An fd
// that names no socket any more (closed) takes every entry under its
// number with it: each is stale.  O(1); waits for one restore at most.
int floor_guard::remove(int fd)
{
	if (fd < 0)
		return -ENOENT;
	const int64_t inode = diag::socket_inode(fd);
	std::lock_guard<std::mutex> lock(mu_);
	// No pass running: the entries go now, so a program that adds and
	// removes between passes keeps the set its own size.  Otherwise they
	// are marked, and that pass's compact() takes them (a try: the pass
	// lock is taken before mu_ everywhere else).
	std::unique_lock<std::mutex> no_pass(pass_mu_, std::try_to_lock);
	auto drop = [this](size_t i) {
		entry &e = entries_.at(i);
		e.removed.store(true, std::memory_order_relaxed);
		registry::withdraw(e.inode, registry::by_guard);
		// Parked for sockbufd (or never opened): nothing to unwatch.
		if (events_on())
			ev_.unwatch(e.inode);
		auto it = by_inode_.find(e.inode);
		if (it != by_inode_.end() && it->second == i)
			by_inode_.erase(it);
		stats_.sockets--;
	};
	if (inode >= 0) {
		auto it = by_inode_.find(uint32_t(inode));
		if (it == by_inode_.end())
			return end_watch(uint32_t(inode)) ? 0 : -ENOENT;
		const size_t i = it->second;
		drop(i);
		if (no_pass.owns_lock())
			erase(i);
		return 0;
	}
	// Every entry under a number that names no socket is stale.  Highest
	// index first, so that erasing one does not move another still to go.
	size_t stale[8];
	size_t found = 0;
	auto range = by_fd_.equal_range(fd);
	for (auto f = range.first; f != range.second; ++f) {
		if (entries_.at(f->second).removed.load(std::memory_order_relaxed))
			continue;
		drop(f->second);
		if (found < sizeof(stale) / sizeof(stale[0]))
			stale[found] = f->second;
		found++;
	}
	if (no_pass.owns_lock() && found <= sizeof(stale) / sizeof(stale[0])) {
		std::sort(stale, stale + found, std::greater<size_t>());
		for (size_t k = 0; k < found; k++)
			erase(stale[k]);
	}
	return found ? 0 : -ENOENT;
}

void floor_guard::stats(struct sockbuf_guard_totals *out)
{
	unsigned int interval;
	{
		std::lock_guard<std::mutex> run_lock(run_mu_);
		interval = interval_us_;
	}
	std::lock_guard<std::mutex> lock(mu_);
	*out = stats_;
	out->interval_us = interval;
	if (!(flags_ & SOCKBUF_GUARD_BPF) && out->bpf_err == 0)
		out->bpf_err = -EPERM; // not asked for
}

void floor_guard::event_stats(struct sockbuf_guard_event_totals *out)
{
	unsigned int net;
	{
		std::lock_guard<std::mutex> run_lock(run_mu_);
		net = net_interval_us_;
	}
	std::lock_guard<std::mutex> lock(mu_);
	*out = ev_stats_;
	out->err = ev_err_;
	out->attached = events_parked_ ? 0 : ev_.attached(); // parked: reopening
	out->net_interval_us = net;
}

int floor_guard::set_net_interval(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> run_lock(run_mu_);
	net_interval_us_ = interval_us;
	return 0;
}

#ifdef SOCKBUF_TEST_SEAM
void floor_guard::lose_records_for_test(uint64_t n)
{
	std::lock_guard<std::mutex> lock(pass_mu_);
	ev_.add_lost(n);
}

void floor_guard::fail_clears_for_test(int n)
{
	std::lock_guard<std::mutex> lock(pass_mu_);
	ev_.fail_clears(n);
}
#endif

} // namespace sockbuf::guard
