// SPDX-License-Identifier: MIT
// "Already stored: unlock it and report", for the preload shim and the
// seccomp supervisor of `sockbuf run`.  They make the program's own
// setsockopt(SO_SNDBUF/SO_RCVBUF) first, so that its errors, clamps and
// doubling are exactly the kernel's; the size is then stored and the
// direction's lock bit set.  What sockbuf_set_initial_bufsize() would add
// to that is one bit cleared: this does it without validating again,
// reading the TCP state or setting the size a second time.
#pragma once

#include <sockbuf/sockbuf.h>

namespace sockbuf::stored
{

struct request {
	int dir;	 // 0 the send buffer, 1 the receive buffer
	int size;	 // the program's value in the library's unit (2x, capped)
	bool forced;	 // the call was SO_SNDBUFFORCE/SO_RCVBUFFORCE
	int known_floor; // the floor the same request on the same socket got
			 // before (its entry said so), or 0: read the size back
};

// Clears @rq.dir's SO_BUF_LOCK bit on @fd, a TCP socket (the caller
// checked) whose size the program's own call has just stored, keeping the
// other direction's bit as it is; the same per-fd serialisation as the
// public calls.  Fills @rep as sockbuf_set_initial_bufsize() would for that
// direction (strategy unlock or force-unlock, locked 0, requested, floor),
// except that with @rq.known_floor > 0 nothing is read back: effective is
// 0 (not read) and the floor is the known one.  tcp_state is -1.
//
// Returns 0; -EOPNOTSUPP where this kernel needs the whole call (no
// SO_BUF_LOCK; a receive buffer on a kernel whose SO_RCVBUF leaves a
// window clamp), before touching the socket; or the -errno of the call
// that failed (the report then says what the socket holds).
int keep_unlocked(int fd, const request &rq, struct sockbuf_report *rep);

} // namespace sockbuf::stored
