// SPDX-License-Identifier: MIT
#include "guard.h"

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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{

constexpr unsigned int known_flags =
    SOCKBUF_GUARD_ALLOW_FORCE | SOCKBUF_GUARD_RESERVE_MEM | SOCKBUF_GUARD_NO_DIAG |
    SOCKBUF_GUARD_RUN_IN_CHILD | SOCKBUF_GUARD_NO_URING | SOCKBUF_GUARD_BPF | SOCKBUF_GUARD_EVENTS;
constexpr unsigned int min_interval_us = 100, max_interval_us = 60'000'000;

constexpr int src_getsockopt = SOCKBUF_GUARD_SRC_GETSOCKOPT;
constexpr int src_diag = SOCKBUF_GUARD_SRC_DIAG;
constexpr int src_uring = SOCKBUF_GUARD_SRC_URING;
constexpr int src_bpf = SOCKBUF_GUARD_SRC_BPF;
// A dump is first timed only when a pass by io_uring or getsockopt takes
// longer than this: below it a pass is cheap whatever the source, and a
// dump walks the namespace's whole socket table (tens of ms on a busy
// host, even for one guarded socket).
constexpr int64_t dump_try_ns = 1'000'000;

#ifndef SO_COOKIE
#define SO_COOKIE 57 // Linux 4.12 (asm-generic/socket.h)
#endif

std::atomic<int> g_forced_source{-1};

// The kernel's cookie of the socket @fd names, 0 without one (a kernel
// before 4.12, or the read failed).
uint64_t socket_cookie(int fd)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	if (sys::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0 || len != sizeof(cookie))
		return 0;
	return cookie;
}

int64_t now_ns(clockid_t clock = CLOCK_MONOTONIC)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Full sockets only: request and time-wait minisocks have no inode and no
// buffers of their own.
uint32_t full_socket_states()
{
	return ~((1u << TCP_SYN_RECV) | (1u << TCP_TIME_WAIT) | (1u << 12 /* NEW_SYN_RECV */));
}

bool interval_ok(unsigned int us)
{
	return us >= min_interval_us && us <= max_interval_us;
}

} // namespace

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
}

floor_guard::~floor_guard()
{
	stop();
	for (size_t i = 0; i < entries_.size(); i++)
		if (!entries_.at(i).removed.load(std::memory_order_relaxed))
			registry::withdraw(entries_.at(i).inode, registry::by_guard);
	if (timer_fd_ >= 0)
		::close(timer_fd_);
	if (epoll_fd_ >= 0)
		::close(epoll_fd_);
	if (wake_fd_ >= 0)
		::close(wake_fd_);
}

int floor_guard::add(int fd, const struct sockbuf_floor &floor)
{
	int ret = validate::sizes(floor.snd, floor.rcv, false);
	if (ret == 0)
		ret = validate::tcp_socket(fd);
	if (ret < 0)
		return ret;
	struct sockbuf_probe_info info;
	ret = probe::get(&info, false);
	if (ret < 0)
		return ret;
	const bool may_force =
	    (flags_ & SOCKBUF_GUARD_ALLOW_FORCE) && (info.features & SOCKBUF_FEAT_FORCE);
	if (!may_force && ((info.sndbuf_max > 0 && floor.snd > info.sndbuf_max) ||
			   (info.rcvbuf_max > 0 && floor.rcv > info.rcvbuf_max)))
		return -ERANGE;
	int64_t inode = diag::socket_inode(fd);
	if (inode < 0)
		return int(inode);
	int family = 0;
	ret = sys::get_int(fd, SOL_SOCKET, SO_DOMAIN, &family);
	if (ret < 0)
		return ret;
	// Without one, io_uring passes read this socket by getsockopt.
	uint64_t cookie = socket_cookie(fd);

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
		reserve_at_add(fd, floor);
	registry::publish(inode, floor.snd, floor.rcv, registry::by_guard);
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
	exec::reserve_only(o, exec::reserve_amount(floor.snd, floor.rcv));
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
		ev_.unwatch(e.inode);
		auto it = by_inode_.find(e.inode);
		if (it != by_inode_.end() && it->second == i)
			by_inode_.erase(it);
		stats_.sockets--;
	};
	if (inode >= 0) {
		auto it = by_inode_.find(uint32_t(inode));
		if (it == by_inode_.end())
			return -ENOENT;
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

// Asked for by the flag (or by the test seam), and not failed.
bool floor_guard::bpf_wanted() const
{
	return bpf_err_ == 0 && ((flags_ & SOCKBUF_GUARD_BPF) ||
				 g_forced_source.load(std::memory_order_relaxed) == src_bpf);
}

int floor_guard::choose_source(size_t n) const
{
	if (n == 0)
		return src_getsockopt;
	if (bpf_wanted())
		return src_bpf;
	bool avail[3] = {true, diag_err_ == 0, uring_err_ == 0};
	const int forced = g_forced_source.load(std::memory_order_relaxed);
	if (forced >= 0 && forced < 3)
		return avail[forced] ? forced : src_getsockopt;
	const int64_t *ns = source_ns_;
	if (avail[src_uring] && ns[src_uring] == 0)
		return src_uring; // time io_uring first,
	if (ns[src_getsockopt] == 0)
		return src_getsockopt; // then getsockopt,
	const int per_socket =
	    avail[src_uring] && ns[src_uring] < ns[src_getsockopt] ? src_uring : src_getsockopt;
	if (avail[src_diag] && ns[src_diag] == 0) // then a dump, if it might pay
		return ns[per_socket] > dump_try_ns ? src_diag : per_socket;
	int chosen = per_socket;
	if (avail[src_diag] && ns[src_diag] < ns[chosen])
		chosen = src_diag;
	for (int src = 0; src < 3; src++) {
		if (src == chosen || !avail[src] || ns[src] == 0)
			continue;
		const uint64_t retime = ns[src] < 4 * ns[chosen] ? 64 : 4096;
		if ((passes_ + uint64_t(src)) % retime == 0)
			return src;
	}
	return chosen;
}

// One SO_MEMINFO gives both sizes: worth it only when both are floored.
bool floor_guard::both_in_one_read(const entry &e) const
{
	return meminfo_ok_ && e.floor.snd && e.floor.rcv;
}

// Which entries this pass checks the identity of: the next
// ceil(n / sweep_passes), wrapping.
void floor_guard::plan_sweep(size_t n)
{
	const size_t step = std::max<size_t>(1, (n + sweep_passes - 1) / sweep_passes);
	if (sweep_hi_ >= n)
		sweep_hi_ = 0;
	sweep_lo_ = sweep_hi_;
	sweep_hi_ = std::min(n, sweep_lo_ + step);
}

bool floor_guard::in_sweep(size_t i) const
{
	return i >= sweep_lo_ && i < sweep_hi_;
}

// Does @fd (e.fd, or the restore's duplicate of it) name the socket
// added?  Its cookie says so for sure; without one (a kernel before
// 4.12), its inode.  gone: the fd names no socket (closed); reused:
// another socket.
floor_guard::verdict floor_guard::identity_on(int fd, const entry &e) const
{
	if (e.cookie == 0) {
		const int64_t ino = diag::socket_inode(fd);
		return ino < 0 ? gone : ino == int64_t(e.inode) ? keep : reused;
	}
	const uint64_t cookie = socket_cookie(fd);
	if (cookie == 0)
		return gone; // closed, or no longer a socket: never written through
	return cookie == e.cookie ? keep : reused;
}

// One dump of this namespace's TCP sockets; only the guarded ones are kept.
void floor_guard::read_sizes_from_dump(size_t n)
{
	diag::filter f;
	f.states = full_socket_states();
	f.tcp_info = false;
	// One family guarded: the other family's dump (a second walk of the
	// same table) is left out.
	f.family = entries_.at(0).family;
	for (size_t i = 0; i < n; i++)
		if (entries_.at(i).family != f.family) {
			f.family = 0;
			break;
		}
	// By inode, among the entries this pass looks at (the index is the
	// set's, under mu_: a small map of the pass's own instead).
	std::unordered_map<uint32_t, size_t> mine;
	try {
		mine.reserve(n);
		for (size_t i = 0; i < n; i++)
			mine.emplace(entries_.at(i).inode, i);
	} catch (const std::bad_alloc &) {
		return; // every socket is read with getsockopt instead
	}
	int ret = diag_.each(f, [this, &mine](const diag::socket_info &s) {
		auto it = mine.find(s.inode);
		if (it != mine.end())
			now_[it->second] = {s.sndbuf, s.rcvbuf, false};
	});
	if (ret < 0)
		diag_err_ = ret; // partly filled sizes are still true; the rest fall back
}

// The floored directions of every socket through io_uring, a few
// io_uring_enter calls for the whole guard; the cookie only of the
// sockets in this pass's identity sweep.  A socket whose cookie does not
// match leaves; one whose reads failed is left unread: the pass reads it
// with getsockopt, which also finds out whether it is gone.  Sockets
// without a cookie are read with getsockopt too.
bool floor_guard::read_sizes_from_ring(pid_t self, size_t n)
{
	int ret = ring_.open(self);
	if (ret == 0) {
		ring_vals_.resize(n);
		ring_reads_.clear();
		for (size_t i = 0; i < n; i++) {
			const entry &e = entries_.at(i);
			ring_vals &v = ring_vals_[i];
			v = {};
			if (e.cookie == 0 || e.removed.load(std::memory_order_relaxed))
				continue;
			v.asked = true;
			v.cookie_read = in_sweep(i);
			if (v.cookie_read)
				ring_reads_.push_back(
				    {e.fd, SO_COOKIE, &v.cookie, sizeof(v.cookie), 0});
			v.meminfo_read = both_in_one_read(e);
			if (v.meminfo_read) {
				ring_reads_.push_back(
				    {e.fd, SO_MEMINFO, v.mem, buffer::meminfo_len, 0});
				continue;
			}
			if (e.floor.snd)
				ring_reads_.push_back({e.fd, SO_SNDBUF, &v.snd, sizeof(v.snd), 0});
			if (e.floor.rcv)
				ring_reads_.push_back({e.fd, SO_RCVBUF, &v.rcv, sizeof(v.rcv), 0});
		}
		ret = ring_.run(ring_reads_.data(), ring_reads_.size());
	}
	if (ret < 0) {
		uring_err_ = ret;
		return false;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const ring_vals &v = ring_vals_[i];
		if (!v.asked)
			continue; // read with getsockopt, or removed
		const entry &e = entries_.at(i);
		bool ok = true;
		sizes got{-1, -1, false};
		if (v.cookie_read) {
			ok = ring_reads_[k++].res == int(sizeof(uint64_t));
			if (ok && v.cookie != e.cookie) {
				verdict_[i] = reused; // the number now names another socket
				k += v.meminfo_read ? 1 : !!e.floor.snd + !!e.floor.rcv;
				continue;
			}
			got.verified = ok;
		}
		if (v.meminfo_read) {
			const int res = ring_reads_[k++].res;
			if (res == -ENOPROTOOPT)
				meminfo_ok_ = false; // before 4.12: read separately from now on
			ok = ok && res == int(buffer::meminfo_len);
			got.snd = buffer::meminfo_snd(v.mem);
			got.rcv = buffer::meminfo_rcv(v.mem);
		}
		if (!v.meminfo_read && e.floor.snd) {
			ok = ok && ring_reads_[k++].res == int(sizeof(int));
			got.snd = v.snd;
		}
		if (!v.meminfo_read && e.floor.rcv) {
			ok = ok && ring_reads_[k++].res == int(sizeof(int));
			got.rcv = v.rcv;
		}
		if (ok)
			now_[i] = got;
	}
	return true;
}
// Every socket by one walk of this process's files (bpf_pass.h).  A slot
// not stamped by this pass, or holding another inode, is an entry whose
// fd closed or now names another file: it leaves.  False when the
// iterator cannot be loaded or fails: bpf_err_ says why, for good.
bool floor_guard::read_sizes_from_bpf(pid_t self, size_t n)
{
	const int loaded = bpf_.open(self, max_fd_seen_ + 1);
	if (loaded == 1) { // empty slots: a first pass, more room, or a forked child
		bpf_seq_.assign(size_t(bpf_.room()), 0);
		bpf_claimed_seq_ = 0;
	}
	if (loaded >= 0)
		bpf_claim(n);
	// A failed open() or run() has closed the iterator already.
	const int64_t stamp = loaded < 0 ? loaded : bpf_.run();
	if (stamp < 0) {
		bpf_err_ = int(stamp);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		const entry &e = entries_.at(i);
		if (e.fd >= bpf_.room())
			continue; // added during the last pass past the room: getsockopt
		const bpf::slot &sl = bpf_.at(e.fd);
		if (sl.ino == e.inode && sl.stamp == uint32_t(stamp))
			now_[i] = {sl.snd, sl.rcv, true};
		else if (bpf_seq_[size_t(e.fd)] == e.seq)
			verdict_[i] = gone; // its own slot, not stamped: closed or reused
		// else another entry holds the number: getsockopt reads this one
	}
	return true;
}

// Gives every entry added since the last claim its fd's slot, unless a
// later entry holds that number: of two entries on one number (the first
// closed, its number reused and added again), the later one is the live
// one.
void floor_guard::bpf_claim(size_t n)
{
	uint64_t top = bpf_claimed_seq_;
	for (size_t i = 0; i < n; i++) {
		const entry &e = entries_.at(i);
		if (e.seq <= bpf_claimed_seq_ || e.fd >= bpf_.room())
			continue;
		top = std::max(top, e.seq);
		if (e.removed.load(std::memory_order_relaxed))
			continue;
		uint64_t &owner = bpf_seq_[size_t(e.fd)];
		if (owner > e.seq)
			continue;
		owner = e.seq;
		bpf_.at(e.fd) = {e.inode, 0, 0, 0};
	}
	bpf_claimed_seq_ = top;
}

// Entry @e leaves: its slot is emptied, unless another entry holds it.
void floor_guard::bpf_release(const entry &e)
{
	if (!bpf_.is_open_here(getpid()) || e.fd >= bpf_.room() || bpf_seq_[size_t(e.fd)] != e.seq)
		return;
	bpf_seq_[size_t(e.fd)] = 0;
	bpf_.at(e.fd) = {};
}

// The floored directions by getsockopt, without asking whether the fd
// still names the socket (the restore asks).  False when the fd no longer
// names a socket: closed, or reused for another file.
bool floor_guard::read_sizes_one(const entry &e, sizes *out)
{
	int snd = -1, rcv = -1, ret = -ENOPROTOOPT;
	if (both_in_one_read(e)) {
		ret = buffer::get_sizes(e.fd, &snd, &rcv);
		if (ret == -ENOPROTOOPT)
			meminfo_ok_ = false; // before 4.12: read separately from now on
	}
	if (ret == -ENOPROTOOPT) {
		ret = 0;
		if (e.floor.snd)
			ret = buffer::get_size(e.fd, buffer::snd, &snd);
		if (ret == 0 && e.floor.rcv)
			ret = buffer::get_size(e.fd, buffer::rcv, &rcv);
	}
	if (ret == -EBADF || ret == -ENOTSOCK)
		return false;
	if (ret == 0) {
		out->snd = snd;
		out->rcv = rcv;
	}
	return true;
}

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
	// copies it (before_fork() waits for mu_); exec closes it.
	const int pin = sys::dup_cloexec(e.fd);
	if (pin < 0) {
		if (pin == -EBADF)
			verdict_[i] = gone;
		else
			p->errors++; // EMFILE or ENFILE: never a write by number; next pass
		return true;
	}
	const verdict v = identity_on(pin, e);
	if (v != keep)
		verdict_[i] = char(v);
	else
		restore_one(pin, e, now, p);
	sys::close(pin); // the socket closes here if the program closed it meanwhile
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
	return run_pass(full, out);
}

// The records first (with events on), then a full pass if @full or records
// were lost.  Caller holds pass_mu_.
int floor_guard::run_pass(bool full, struct sockbuf_guard_report *out)
{
	struct sockbuf_guard_report p = {};
	int64_t round_ns = 0;
	if (events_on()) {
		const int64_t r0 = now_ns();
		if (events_round(&p))
			full = true;
		round_ns = now_ns() - r0;
	}
	const int by_events = p.restored;
	if (full)
		full_pass(getpid(), &p);
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

// The sockets the ring's records name: each is read by getsockopt and, if
// below its floor, restored by check_one() (identity at the write); one
// that is not below has its identity checked all the same, so that a
// socket closed while its record was in flight leaves now.  The pending
// mark is cleared before the read: a cut after it posts again.  A clear
// that fails twice leaves the mark set and the socket silent: it is kept
// in ev_unclear_ and looked at, and cleared again, on every round until a
// clear succeeds (the rounds, the net's passes, or another socket's
// record wake).  True when the ring had lost records since the last round
// (the caller makes a full pass).  Caller holds pass_mu_.
bool floor_guard::events_round(struct sockbuf_guard_report *out)
{
	ev_inodes_.clear();
	int got = ev_.drain(&ev_inodes_);
	const uint64_t lost = ev_.lost();
	bool lost_more = lost > ev_lost_seen_;
	ev_lost_seen_ = lost;
	if (got < 0)
		got = 0;
	try {
		ev_inodes_.insert(ev_inodes_.end(), ev_unclear_.begin(), ev_unclear_.end());
		ev_unclear_.clear();
	} catch (const std::bad_alloc &) {
		lost_more = true; // ev_unclear_ is kept; the full pass reads them
	}
	if (ev_inodes_.empty()) {
		if (lost_more) {
			std::lock_guard<std::mutex> lock(mu_);
			ev_stats_.lost = lost;
		}
		return lost_more;
	}
	struct sockbuf_guard_report p = {};
	size_t n;
	uint64_t dropped = 0, not_below = 0;
	ev_index_.clear();
	{
		std::lock_guard<std::mutex> lock(mu_);
		n = entries_.size();
		for (const uint32_t ino : ev_inodes_) {
			auto it = by_inode_.find(ino);
			if (it == by_inode_.end() ||
			    entries_.at(it->second).removed.load(std::memory_order_relaxed)) {
				dropped++; // left the guard since the record was posted
				continue;
			}
			const entry &e = entries_.at(it->second);
			if (!clear_mark(ino, e))
				lost_more = true; // could not be kept for the next round
			try {
				ev_index_.push_back(it->second);
			} catch (const std::bad_alloc &) {
				lost_more = true; // the full pass finds it
			}
		}
		ev_stats_.records += uint64_t(got);
		ev_stats_.lost = lost;
		ev_stats_.max_wait_ns = ev_.max_wait_ns();
		// Wrapping 32-bit counters: the struct has no room for more.
		for (size_t k = 0; k < bpf::event_source::n_points; k++)
			ev_stats_.records_at[k] = uint32_t(ev_.records_at()[k]);
		if (got > 0)
			ev_stats_.rounds++;
	}
	std::sort(ev_index_.begin(), ev_index_.end());
	ev_index_.erase(std::unique(ev_index_.begin(), ev_index_.end()), ev_index_.end());
	try {
		if (now_.size() < n)
			now_.resize(n);
		verdict_.assign(n, char(keep));
	} catch (const std::bad_alloc &) {
		return true;
	}
	for (const size_t i : ev_index_) {
		const entry &e = entries_.at(i);
		now_[i] = sizes{};
		if (!read_sizes_one(e, &now_[i])) {
			verdict_[i] = gone;
			dropped++;
			continue;
		}
		p.sockets++;
		if (!check_one(i, &p)) {
			const verdict v = identity(e);
			if (v != keep)
				verdict_[i] = char(v);
			else
				not_below++;
		}
		if (verdict_[i] != keep)
			dropped++;
	}
	std::lock_guard<std::mutex> lock(mu_);
	compact(n, &p);
	ev_stats_.dropped += dropped;
	ev_stats_.not_below += not_below;
	stats_.below += uint64_t(p.below);
	stats_.restored += uint64_t(p.restored);
	stats_.errors += uint64_t(p.errors);
	stats_.removed += uint64_t(p.removed);
	stats_.reused += uint64_t(p.reused);
	stats_.worst_depth = std::max(stats_.worst_depth, p.worst_depth);
	*out = p;
	return lost_more;
}

// Clears @ino's pending mark, once more at once if that fails; a mark
// still set is counted and kept in ev_unclear_ for the next round.  False
// when it could not even be kept (no memory): the caller makes a full
// pass.  Caller holds pass_mu_ and mu_.
bool floor_guard::clear_mark(uint32_t ino, const entry &e)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (ev_.clear(ino, e.floor.snd, e.floor.rcv) == 0)
			return true;
		ev_stats_.clear_failed++;
	}
	try {
		ev_unclear_.push_back(ino);
	} catch (const std::bad_alloc &) {
		return false;
	}
	return true;
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
	stats_.below += uint64_t(p.below);
	stats_.restored += uint64_t(p.restored);
	stats_.errors += uint64_t(p.errors);
	stats_.removed += uint64_t(p.removed);
	stats_.reused += uint64_t(p.reused);
	stats_.worst_depth = std::max(stats_.worst_depth, p.worst_depth);
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
	if (ev_err_ == 0)
		ev_err_ = -ECHILD;
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
void floor_guard::run_thread_events(unsigned int net_us)
{
	const int64_t net_ns = int64_t(net_us) * 1000;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {};
	ev.events = EPOLLIN;
	ev.data.fd = ev_.fd();
	bool ok = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0;
	ev.data.fd = wake_fd_;
	ok = ok && epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd_, &ev) == 0;
	if (!ok) {
		if (ep >= 0)
			::close(ep);
		run_thread(net_us); // never unguarded: the net's interval, polling
		return;
	}
	int64_t next_full = 0;
	while (stop_word_.load(std::memory_order_acquire) == 0) {
		const int64_t begin = now_ns();
		const bool due = begin >= next_full;
		{
			std::lock_guard<std::mutex> pass_lock(pass_mu_);
			run_pass(due, nullptr);
		}
		if (due) {
			const int64_t end = now_ns();
			next_full = std::max(begin + net_ns, end + (end - begin));
		}
		const int64_t left = next_full - now_ns();
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

void floor_guard::run_thread(unsigned int interval_us)
{
	const int64_t interval_ns = int64_t(interval_us) * 1000;
	while (stop_word_.load(std::memory_order_acquire) == 0) {
		const int64_t begin = now_ns();
		pass(nullptr);
		const int64_t end = now_ns();
		// Never more than half a core: rest at least as long as the
		// pass took.
		const int64_t next = std::max(begin + interval_ns, end + (end - begin));
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
	bool events = events_on();
	if (events && wake_fd_ < 0) {
		wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		events = wake_fd_ >= 0; // no eventfd: poll at @interval_us
	}
	const unsigned int net_us = net_interval_us_;
	set_interval(events ? net_us : interval_us);
	try {
		if (events)
			thread_ = std::thread([this, net_us] { run_thread_events(net_us); });
		else
			thread_ = std::thread([this, interval_us] { run_thread(interval_us); });
	} catch (const std::system_error &) {
		set_interval(0);
		return -EAGAIN;
	}
	return 0;
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
	std::lock_guard<std::mutex> lock(run_mu_);
	set_interval(0);
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
	if (events)
		interval_us = net_interval_us_;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct itimerspec its = {};
	its.it_interval.tv_sec = interval_us / 1'000'000;
	its.it_interval.tv_nsec = long(interval_us % 1'000'000) * 1000;
	its.it_value = its.it_interval;
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
	out->attached = ev_.attached();
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
