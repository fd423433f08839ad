// SPDX-License-Identifier: MIT
// A pass: every socket's sizes checked against its floor, those below
// restored after their identity is checked, and the closed ones dropped.
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

// Entry i's sizes against its floor; below it, the restore.  True when it
// was below.
bool floor_guard::check_one(size_t i, struct sockbuf_guard_report *p)
{
	const entry &e = entries_.at(i);
	const sizes &now = now_[i];
	const int64_t size[2] = {now.snd, now.rcv};
	const int want[2] = {e.floor.snd, e.floor.rcv};
	int below = 0;
	for (int d = 0; d < 2; d++) {
		if (want[d] == 0 || size[d] < 0 || size[d] >= want[d])
			continue;
		below++;
		p->worst_depth = std::max(p->worst_depth, int(want[d] - size[d]));
	}
	if (below == 0)
		return false;
	p->below += below;
	// One restore under the set's lock: a remove() that returned before
	// it is seen here, and one called during it waits for this socket
	// only.
	std::lock_guard<std::mutex> lock(mu_);
	if (e.removed.load(std::memory_order_relaxed))
		return true;
	// Identity at the write: whatever read the sizes, and however long
	// ago, the socket written must be the one added.  The number is the
	// program's: it can close it and a new socket can take it at any
	// moment, between a check and a write too.  So the check and the
	// writes go through a duplicate taken first: whatever the number
	// names later, the duplicate names what was checked.  No fork()
	// copies it (before_fork() waits for mu_); exec closes it.  At the
	// descriptor limit the duplicate goes into the guard's spare slot.
	int pin = sys::dup_cloexec(e.fd);
	bool in_spare = false;
	if ((pin == -EMFILE || pin == -ENFILE) && spare_fd_ >= 0) {
		pin = ::dup3(e.fd, spare_fd_, O_CLOEXEC) == spare_fd_ ? spare_fd_ : -errno;
		in_spare = pin == spare_fd_;
	}
	if (pin < 0) {
		if (pin == -EBADF)
			verdict_[i] = gone;
		else
			p->errors++; // no slot at all: never a write by number; next pass
		return true;
	}
	const verdict v = identity_on(pin, e);
	if (v != keep)
		verdict_[i] = char(v);
	else
		restore_one(pin, e, now, p);
	// The socket closes here if the program closed it meanwhile; the
	// spare slot goes back to the guard's eventfd, still held.
	if (!in_spare)
		sys::close(pin);
	else if (::dup3(hold_fd_, spare_fd_, O_CLOEXEC) != spare_fd_) {
		::close(spare_fd_); // never left pointing at a socket
		spare_fd_ = -1;
	}
	return true;
}

// Raises the directions found below from the sizes the pass read: size,
// then clear the lock bit, one read-back per direction (exec::restore()),
// all through @pin, the guard's duplicate of e.fd.  Caller holds mu_ and
// has checked the identity on @pin.
void floor_guard::restore_one(int pin, const entry &e, const sizes &now,
			      struct sockbuf_guard_report *p)
{
	struct sockbuf_report rep;
	op o{};
	o.fd = pin;
	o.program_fd = e.fd;
	o.protocol = IPPROTO_TCP;
	o.flags = SOCKBUF_F_FALLBACK_DEFAULT;
	if (flags_ & SOCKBUF_GUARD_ALLOW_FORCE)
		o.flags |= SOCKBUF_F_ALLOW_FORCE;
	if (flags_ & SOCKBUF_GUARD_RESERVE_MEM)
		o.flags |= SOCKBUF_F_RESERVE_MEM;
	o.rep = &rep;
	o.reserve_bytes = exec::reserve_amount(e.floor.snd, e.floor.rcv);
	const int64_t size[2] = {now.snd, now.rcv};
	const int want[2] = {e.floor.snd, e.floor.rcv};
	for (int d = 0; d < 2; d++)
		o.size[d] = want[d] && size[d] >= 0 && size[d] < want[d] ? want[d] : 0;
	if (probe::cached(&o.facts) < 0 || exec::restore(o) < 0) {
		p->errors++;
		return;
	}
	count_reservation(rep);
	for (int d = 0; d < 2; d++) {
		const struct sockbuf_dir_report &r = d == 0 ? rep.snd : rep.rcv;
		if (o.size[d] && r.strategy != SOCKBUF_STRAT_HELD &&
		    r.strategy != SOCKBUF_STRAT_DEFAULT && r.strategy != SOCKBUF_STRAT_NONE)
			p->restored++;
	}
}

// Entries that left (closed, reused, removed) go: the last entry takes
// each one's place, so this costs what left, not the whole set.  Caller
// holds mu_; @n entries had a verdict this pass.
void floor_guard::compact(size_t n, struct sockbuf_guard_report *p)
{
	for (size_t i = entries_.size(); i-- > 0;) {
		entry &e = entries_.at(i);
		const bool removed = e.removed.load(std::memory_order_relaxed);
		const char v = i < n ? verdict_[i] : char(keep);
		if (!removed && v == keep)
			continue;
		if (!removed) {
			registry::withdraw(e.inode, registry::by_guard);
			stats_.sockets--;
			p->removed++;
			if (v == reused)
				p->reused++;
		}
		auto owner = by_inode_.find(e.inode);
		if (!removed && owner != by_inode_.end() && owner->second == i)
			ev_.unwatch(e.inode); // a removed one left the map in remove()
		erase(i);
	}
}

// A pass's or a round's findings added to the guard's totals (a full
// pass and an events round count alike).  Caller holds mu_.
void floor_guard::count(const struct sockbuf_guard_report &p)
{
	stats_.below += uint64_t(p.below);
	stats_.restored += uint64_t(p.restored);
	stats_.errors += uint64_t(p.errors);
	stats_.removed += uint64_t(p.removed);
	stats_.reused += uint64_t(p.reused);
	stats_.worst_depth = std::max(stats_.worst_depth, p.worst_depth);
}

// Entry i goes for good; the last entry takes its place.  Caller holds
// mu_ and pass_mu_ (no pass reads the entries).
void floor_guard::erase(size_t i)
{
	bpf_release(entries_.at(i));
	index_drop(i);
	const size_t last = entries_.size() - 1;
	if (i != last) {
		index_drop(last);
		entries_.at(i) = entries_.at(last);
		index_add(i); // cannot throw: the entries it replaces are gone
	}
	entries_.pop_back();
}

int floor_guard::pass(struct sockbuf_guard_report *out)
{
	const pid_t self = getpid();
	if (!(flags_ & SOCKBUF_GUARD_RUN_IN_CHILD) && self != owner_)
		return -ECHILD;
	std::lock_guard<std::mutex> pass_lock(pass_mu_);
	bool full = true;
	if (events_on()) {
		// Driven by an events timer (timerfd()): a full pass only when
		// it fired; otherwise the sockets the records name.
		std::lock_guard<std::mutex> lock(mu_);
		if (epoll_fd_ >= 0 && timer_fd_ >= 0 && timer_owner_ == self) {
			uint64_t expirations = 0;
			full = ::read(timer_fd_, &expirations, sizeof(expirations)) ==
				   ssize_t(sizeof(expirations)) &&
			       expirations > 0;
		}
	}
	const int ret = run_pass(full, out);
	rearm_for_unclear();
	return ret;
}

// The records first (with events on), then a full pass if @full or records
// were lost; nothing but the daemon's pidfd while sockbufd serves and the
// net's pass is not due (guard_handover.cc).  Caller holds pass_mu_.
int floor_guard::run_pass(bool full, struct sockbuf_guard_report *out)
{
	struct sockbuf_guard_report p = {};
	if (handover_step(now_ns())) {
		// sockbufd serves these floors and the net's pass is not due.
		drain_timer();
		if (out)
			*out = p;
		return 0;
	}
	int64_t round_ns = 0;
	if (events_on()) {
		const int64_t r0 = now_ns();
		if (events_round(&p))
			full = true;
		round_ns = now_ns() - r0;
	}
	const int by_events = p.restored;
	if (full) {
		// Connections accepted since the last pass first: checked in
		// this same pass.
		if (watching_.load(std::memory_order_relaxed))
			p.adopted = adopt_accepted();
		full_pass(getpid(), &p);
	}
	// Taken back from sockbufd: the programs load after the restores.
	if (events_parked_ && served_fd_.load(std::memory_order_relaxed) < 0)
		reload_events();
	{
		std::lock_guard<std::mutex> lock(mu_);
		ev_stats_.restored_events += uint64_t(by_events);
		ev_stats_.total_round_ns += uint64_t(round_ns);
		ev_stats_.restored_passes += uint64_t(p.restored - by_events);
	}
	if (out)
		*out = p;
	return 0;
}

// Every socket once.  Adds what it found and did to @out.  Caller holds
// pass_mu_.
void floor_guard::full_pass(pid_t self, struct sockbuf_guard_report *out)
{
	struct sockbuf_guard_report p = {};
	const int64_t t0 = now_ns();
	const int64_t late = late_ns(t0);
	// Sources are compared by the CPU time a pass took, not its wall
	// time: a pass preempted on a busy host must not make its source look
	// dear (or a dump cheap).
	const int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	size_t n;
	{
		std::lock_guard<std::mutex> lock(mu_);
		n = entries_.size();
		max_fd_seen_ = max_fd_;
		if (timer_fd_ >= 0 && timer_owner_ == self) {
			uint64_t expirations;
			ssize_t r = ::read(timer_fd_, &expirations, sizeof(expirations));
			(void)r; // EAGAIN: called before the timer fired
		}
	}
	if (diag_reopen_ && diag_err_ == 0) { // a forked child's own netlink socket
		diag_err_ = diag_.open();
		diag_reopen_ = false;
	}
	// Entries [0, n) do not move or change until compact(), but for their
	// removed mark; entries added meanwhile wait for the next pass.
	now_.assign(n, sizes{});
	verdict_.assign(n, char(keep));
	plan_sweep(n);
	int source = choose_source(n);
	p.diag = src_getsockopt;
	if (source == src_bpf) {
		if (read_sizes_from_bpf(self, n))
			p.diag = src_bpf;
		else
			source = choose_source(n); // bpf_err_ set: the other sources
	}
	if (source == src_diag) {
		read_sizes_from_dump(n);
		if (diag_err_ == 0)
			p.diag = src_diag;
	} else if (source == src_uring && read_sizes_from_ring(self, n)) {
		p.diag = src_uring;
	}
	int looked = 0;
	for (size_t i = 0; i < n; i++) {
		const entry &e = entries_.at(i);
		if (verdict_[i] != keep || e.removed.load(std::memory_order_relaxed))
			continue;
		looked++;
		sizes &now = now_[i];
		const bool seen = now.snd >= 0 || now.rcv >= 0;
		if (!seen && !read_sizes_one(e, &now)) {
			verdict_[i] = gone;
			continue;
		}
		// Below its floor: the restore checks the identity itself.
		if (check_one(i, &p) || !in_sweep(i) || now.verified)
			continue;
		const verdict v = identity(e);
		if (v != keep)
			verdict_[i] = char(v);
	}
	p.sockets = looked;
	p.duration_ns = now_ns() - t0;
	plan_due(t0, p.duration_ns);
	// The source that did the work; at least 1 ns: 0 means "not timed".
	source_ns_[p.diag] = std::max<int64_t>(1, now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
	passes_++;

	std::lock_guard<std::mutex> lock(mu_);
	compact(n, &p);
	stats_.passes++;
	count(p);
	stats_.last_pass_ns = p.duration_ns;
	stats_.max_pass_ns = std::max(stats_.max_pass_ns, p.duration_ns);
	stats_.total_pass_ns += p.duration_ns;
	stats_.max_late_us = std::max(
	    stats_.max_late_us, uint32_t(std::min<int64_t>(late / 1000, int64_t(UINT32_MAX))));
	stats_.source = p.diag;
	stats_.diag_err = diag_err_;
	stats_.uring_err = uring_err_;
	stats_.bpf_err = bpf_err_;
	out->sockets += p.sockets;
	out->below += p.below;
	out->restored += p.restored;
	out->errors += p.errors;
	out->removed += p.removed;
	out->reused += p.reused;
	out->worst_depth = std::max(out->worst_depth, p.worst_depth);
	out->diag = p.diag;
	out->duration_ns = p.duration_ns;
}

} // namespace sockbuf::guard
