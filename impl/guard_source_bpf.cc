// SPDX-License-Identifier: MIT
// The size source "bpf": one BPF iterator walk of this process's files
// (bpf_pass.h), and the slots it reads.
#include "guard.h"

#include "guard_internal.h"

#include <algorithm>
#include <unistd.h>

namespace sockbuf::guard
{

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

} // namespace sockbuf::guard
