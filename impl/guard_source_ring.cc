// SPDX-License-Identifier: MIT
// The size source "ring": the floored directions of every socket by
// getsockopt() batched over io_uring.
#include "guard.h"

#include "buffer.h"
#include "guard_internal.h"

#include <cerrno>
#include <sys/socket.h>

namespace sockbuf::guard
{

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

} // namespace sockbuf::guard
