// SPDX-License-Identifier: MIT
// A round on the event source's records: only the sockets the kernel
// named are checked and restored, and their pending marks cleared.
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
		for (size_t k = 0; k < bpf::event_source::n_public_points; k++)
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
	count(p);
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

} // namespace sockbuf::guard
