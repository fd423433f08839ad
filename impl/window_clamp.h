// SPDX-License-Identifier: MIT
// Window clamps the buffer options leave behind.  A clamp present when the
// handshake runs makes tcp_select_initial_window() pick a small window
// scale, capping the connection near the initial size for its life, which
// is the very lock the library exists to avoid.  Two kernel paths set one:
// tcp_set_rcvlowat() before commit 21b29e74ffe5 (6.18), and SO_RCVBUF on
// newest kernels (about 7.1), even once SO_BUF_LOCK has cleared the lock.
#pragma once

#include "op.h"

namespace sockbuf::window_clamp
{

// TCP_WINDOW_CLAMP now (0: none).
int read(int fd, int *out);

// After a raise: if the socket had no clamp (@before == 0) and now has
// one, reset it to 0.  The kernel allows that only in TCP_CLOSE; on a
// listener it refuses, and the report gets SOCKBUF_R_WINDOW_CLAMPED.
int undo(op &o, int before);

} // namespace sockbuf::window_clamp
