// SPDX-License-Identifier: MIT
// Which size source a pass uses, and what each pass looks at besides the
// sizes: the identity sweep and the identity check.
#include "guard.h"

#include "guard_internal.h"

#include <algorithm>
#include <cstdint>

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

} // namespace sockbuf::guard
