// SPDX-License-Identifier: MIT
// The size source "getsockopt": one socket's floored directions by
// getsockopt(), the fallback of every other source.
#include "guard.h"

#include "buffer.h"
#include "guard_internal.h"

#include <cerrno>

namespace sockbuf::guard
{

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
