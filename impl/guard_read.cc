// SPDX-License-Identifier: MIT
// Where a pass reads the guarded sockets' sizes: one inet_diag dump, a
// batch of getsockopt() over io_uring, one BPF iterator or one
// getsockopt() per socket, and the choice between them.
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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace sockbuf::guard
{

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

} // namespace sockbuf::guard
