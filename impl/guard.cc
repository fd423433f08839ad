// SPDX-License-Identifier: MIT
#include "guard.h"

#include "buffer.h"
#include "exec.h"
#include "floor_registry.h"
#include "probe.h"
#include "sys.h"
#include "validate.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{

constexpr unsigned int known_flags = SOCKBUF_GUARD_ALLOW_FORCE | SOCKBUF_GUARD_RESERVE_MEM |
				     SOCKBUF_GUARD_NO_DIAG | SOCKBUF_GUARD_RUN_IN_CHILD |
				     SOCKBUF_GUARD_NO_URING | SOCKBUF_GUARD_BPF;
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
}

floor_guard::~floor_guard()
{
	stop();
	for (const entry &e : entries_)
		registry::withdraw(e.inode, registry::by_guard);
	if (timer_fd_ >= 0)
		::close(timer_fd_);
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
	try {
		entries_.push_back({fd, family, uint32_t(inode), cookie, floor});
		by_inode_.emplace(uint32_t(inode), entries_.size() - 1);
	} catch (const std::bad_alloc &) {
		if (entries_.size() > by_inode_.size())
			entries_.pop_back();
		return -ENOMEM;
	}
	stats_.sockets = int(entries_.size());
	max_fd_ = std::max(max_fd_, fd);
	// A number past the loaded slots waits for the next pass to load
	// more room.
	if (bpf_.is_open() && fd < bpf_.room())
		bpf_.at(fd) = {uint32_t(inode), 0, 0, 0};
	if (flags_ & SOCKBUF_GUARD_RESERVE_MEM)
		reserve_at_add(fd, floor);
	registry::publish(inode, floor.snd, floor.rcv, registry::by_guard);
	return 0;
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

int floor_guard::remove(int fd)
{
	std::lock_guard<std::mutex> lock(mu_);
	for (size_t i = 0; i < entries_.size(); i++) {
		if (entries_[i].fd != fd)
			continue;
		registry::withdraw(entries_[i].inode, registry::by_guard);
		bpf_forget(entries_[i]);
		sweep_forget(i);
		entries_.erase(entries_.begin() + long(i));
		rebuild_index();
		stats_.sockets = int(entries_.size());
		return 0;
	}
	return -ENOENT;
}

void floor_guard::rebuild_index()
{
	by_inode_.clear();
	for (size_t i = 0; i < entries_.size(); i++)
		by_inode_.emplace(entries_[i].inode, i);
}

// Asked for by the flag (or by the test seam), and not failed.
bool floor_guard::bpf_wanted() const
{
	return bpf_err_ == 0 && ((flags_ & SOCKBUF_GUARD_BPF) ||
				 g_forced_source.load(std::memory_order_relaxed) == src_bpf);
}

// Entry @e leaves: its slot is emptied, unless the number now belongs to
// another entry (a reused fd added again).
void floor_guard::bpf_forget(const entry &e)
{
	if (bpf_.is_open() && e.fd < bpf_.room() && bpf_.at(e.fd).ino == e.inode)
		bpf_.at(e.fd) = {};
}

int floor_guard::choose_source() const
{
	if (entries_.empty())
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

// Which entries this pass checks the identity of.  A round's step is fixed
// when it begins, so a round lasts at most sweep_passes passes however the
// set changes meanwhile.
void floor_guard::plan_sweep()
{
	const size_t n = entries_.size();
	if (sweep_next_ >= sweep_end_) {
		sweep_next_ = 0;
		sweep_end_ = n;
		sweep_step_ = std::max<size_t>(1, (n + sweep_passes - 1) / sweep_passes);
	}
	sweep_lo_ = sweep_next_;
	sweep_next_ = std::min(sweep_end_, sweep_lo_ + sweep_step_);
}

bool floor_guard::in_sweep(size_t i) const
{
	return i >= sweep_lo_ && i < sweep_next_;
}

// Entry i leaves: the sweep's indices keep naming the same entries.  With
// several leaving, call it from the highest index down.
void floor_guard::sweep_forget(size_t i)
{
	if (i < sweep_lo_)
		sweep_lo_--;
	if (i < sweep_next_)
		sweep_next_--;
	if (i < sweep_end_)
		sweep_end_--;
}

// Does the fd still name the socket added?  Its cookie says so for sure;
// without one (a kernel before 4.12), its inode.
bool floor_guard::same_socket(const entry &e) const
{
	if (e.cookie == 0)
		return diag::socket_inode(e.fd) == int64_t(e.inode);
	return socket_cookie(e.fd) == e.cookie;
}

// One dump of this namespace's TCP sockets; only the guarded ones are kept.
void floor_guard::read_sizes_from_dump()
{
	diag::filter f;
	f.states = full_socket_states();
	f.tcp_info = false;
	// One family guarded: the other family's dump (a second walk of the
	// same table) is left out.
	f.family = entries_.front().family;
	for (const entry &e : entries_)
		if (e.family != f.family) {
			f.family = 0;
			break;
		}
	int ret = diag_.each(f, [this](const diag::socket_info &s) {
		auto it = by_inode_.find(s.inode);
		if (it != by_inode_.end())
			now_[it->second] = {s.sndbuf, s.rcvbuf, false};
	});
	if (ret < 0) {
		// Partly filled sizes are still true; the rest fall back.
		diag_err_ = ret;
		stats_.diag_err = ret;
	}
}

// The floored directions of every socket through io_uring, a few
// io_uring_enter calls for the whole guard; the cookie only of the
// sockets in this pass's identity sweep.  A socket whose cookie does not
// match leaves; one whose reads failed is left unread: the pass reads it
// with getsockopt, which also finds out whether it is gone.  Sockets
// without a cookie are read with getsockopt too.
bool floor_guard::read_sizes_from_ring(pid_t self)
{
	int ret = ring_.open(self);
	if (ret == 0) {
		ring_vals_.resize(entries_.size());
		ring_reads_.clear();
		for (size_t i = 0; i < entries_.size(); i++) {
			const entry &e = entries_[i];
			ring_vals &v = ring_vals_[i];
			v = {};
			if (e.cookie == 0)
				continue;
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
		stats_.uring_err = ret;
		return false;
	}
	size_t k = 0;
	for (size_t i = 0; i < entries_.size(); i++) {
		const entry &e = entries_[i];
		if (e.cookie == 0)
			continue;
		const ring_vals &v = ring_vals_[i];
		bool ok = true;
		sizes got{-1, -1, false};
		if (v.cookie_read) {
			ok = ring_reads_[k++].res == int(sizeof(uint64_t));
			if (ok && v.cookie != e.cookie) {
				gone_[i] = 1; // the number now names another socket
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
bool floor_guard::read_sizes_from_bpf(pid_t self)
{
	const int loaded = bpf_.open(self, max_fd_ + 1);
	if (loaded == 1) // empty slots: a first pass, more room, or a forked child
		for (const entry &e : entries_) // in the order added: the last wins a number
			bpf_.at(e.fd) = {e.inode, 0, 0, 0};
	// A failed open() or run() has closed the iterator already.
	const int64_t stamp = loaded < 0 ? loaded : bpf_.run();
	if (stamp < 0) {
		bpf_err_ = int(stamp);
		stats_.bpf_err = bpf_err_;
		return false;
	}
	for (size_t i = 0; i < entries_.size(); i++) {
		const entry &e = entries_[i];
		const bpf::slot &sl = bpf_.at(e.fd);
		if (sl.ino == e.inode && sl.stamp == uint32_t(stamp))
			now_[i] = {sl.snd, sl.rcv, true};
		else
			gone_[i] = 1;
	}
	return true;
}

// The floored directions by getsockopt, without asking whether the fd
// still names the socket (the pass asks where it matters).  False when
// the fd no longer names a socket: closed, or reused for another file.
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

void floor_guard::check_one(const entry &e, const sizes &now, struct sockbuf_guard_report *p,
			    bool *gone)
{
	const int64_t size[2] = {now.snd, now.rcv};
	const int want[2] = {e.floor.snd, e.floor.rcv};
	int below = 0;
	for (int i = 0; i < 2; i++) {
		if (want[i] == 0 || size[i] < 0 || size[i] >= want[i])
			continue;
		below++;
		p->worst_depth = std::max(p->worst_depth, int(want[i] - size[i]));
	}
	if (below == 0)
		return;
	p->below += below;
	// The sizes read may be another socket's (the number closed and
	// reused; a dump speaks of the socket, not of this fd): make sure the
	// fd still names the socket added before changing anything through it.
	if (!now.verified && !same_socket(e)) {
		*gone = true;
		return;
	}
	unsigned int flags = SOCKBUF_F_FALLBACK_DEFAULT;
	if (flags_ & SOCKBUF_GUARD_ALLOW_FORCE)
		flags |= SOCKBUF_F_ALLOW_FORCE;
	if (flags_ & SOCKBUF_GUARD_RESERVE_MEM)
		flags |= SOCKBUF_F_RESERVE_MEM;
	struct sockbuf_report rep;
	if (sockbuf_restore_floor(e.fd, &e.floor, flags, &rep) < 0) {
		p->errors++;
		return;
	}
	count_reservation(rep);
	if (e.floor.snd && rep.snd.strategy != SOCKBUF_STRAT_HELD &&
	    rep.snd.strategy != SOCKBUF_STRAT_DEFAULT)
		p->restored++;
	if (e.floor.rcv && rep.rcv.strategy != SOCKBUF_STRAT_HELD &&
	    rep.rcv.strategy != SOCKBUF_STRAT_DEFAULT)
		p->restored++;
}

int floor_guard::pass(struct sockbuf_guard_report *out)
{
	const pid_t self = getpid();
	if (!(flags_ & SOCKBUF_GUARD_RUN_IN_CHILD) && self != owner_)
		return -ECHILD;
	struct sockbuf_guard_report p = {};
	std::lock_guard<std::mutex> lock(mu_);
	const int64_t t0 = now_ns();
	// Sources are compared by the CPU time a pass took, not its wall
	// time: a pass preempted on a busy host must not make its source look
	// dear (or a dump cheap).
	const int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	if (timer_fd_ >= 0) {
		uint64_t expirations;
		ssize_t n = ::read(timer_fd_, &expirations, sizeof(expirations));
		(void)n; // EAGAIN: called before the timer fired
	}
	now_.assign(entries_.size(), sizes{});
	gone_.assign(entries_.size(), 0);
	plan_sweep();
	int source = choose_source();
	p.diag = src_getsockopt;
	if (source == src_bpf) {
		if (read_sizes_from_bpf(self))
			p.diag = src_bpf;
		else
			source = choose_source(); // bpf_err_ set: the other sources
	}
	if (source == src_diag) {
		read_sizes_from_dump();
		if (diag_err_ == 0)
			p.diag = src_diag;
	} else if (source == src_uring && read_sizes_from_ring(self)) {
		p.diag = src_uring;
	}
	for (size_t i = 0; i < entries_.size(); i++) {
		const entry &e = entries_[i];
		sizes &now = now_[i];
		bool seen = now.snd >= 0 || now.rcv >= 0;
		if (gone_[i] || (!seen && !read_sizes_one(e, &now)) ||
		    (in_sweep(i) && !now.verified && !same_socket(e))) {
			gone_[i] = 1;
			continue;
		}
		bool g = false;
		check_one(e, now, &p, &g);
		gone_[i] = g;
	}
	p.sockets = int(entries_.size());
	for (size_t i = entries_.size(); i-- > 0;)
		if (gone_[i]) {
			registry::withdraw(entries_[i].inode, registry::by_guard);
			bpf_forget(entries_[i]);
			sweep_forget(i);
		}
	size_t kept = 0;
	for (size_t i = 0; i < entries_.size(); i++)
		if (!gone_[i])
			entries_[kept++] = entries_[i];
	p.removed = int(entries_.size() - kept);
	if (p.removed) {
		entries_.resize(kept);
		rebuild_index();
	}
	p.duration_ns = now_ns() - t0;
	// The source that did the work; at least 1 ns: 0 means "not timed".
	source_ns_[p.diag] = std::max<int64_t>(1, now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
	passes_++;

	stats_.passes++;
	stats_.below += uint64_t(p.below);
	stats_.restored += uint64_t(p.restored);
	stats_.errors += uint64_t(p.errors);
	stats_.removed += uint64_t(p.removed);
	stats_.sockets = int(entries_.size());
	stats_.worst_depth = std::max(stats_.worst_depth, p.worst_depth);
	stats_.last_pass_ns = p.duration_ns;
	stats_.max_pass_ns = std::max(stats_.max_pass_ns, p.duration_ns);
	stats_.total_pass_ns += p.duration_ns;
	stats_.source = p.diag;
	if (out)
		*out = p;
	return 0;
}

// The thread sleeps on a futex (stop_word_) with an absolute
// CLOCK_MONOTONIC deadline: one syscall per wakeup, where a condition
// variable's wait_until also unlocks and relocks its mutex and keeps its
// own counters (about 20 % more CPU per wakeup on a 2-vCPU VM).  stop()
// sets the word and wakes it.
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
	interval_us_ = interval_us;
	try {
		thread_ = std::thread([this, interval_us] { run_thread(interval_us); });
	} catch (const std::system_error &) {
		interval_us_ = 0;
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
	t.join();
	std::lock_guard<std::mutex> lock(run_mu_);
	interval_us_ = 0;
	return 0;
}

int floor_guard::timerfd(unsigned int interval_us)
{
	if (!interval_ok(interval_us))
		return -EINVAL;
	std::lock_guard<std::mutex> run_lock(run_mu_);
	if (thread_.joinable() || interval_us_)
		return -EALREADY;
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
	interval_us_ = interval_us;
	std::lock_guard<std::mutex> lock(mu_);
	timer_fd_ = fd;
	return fd;
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

} // namespace sockbuf::guard
