// SPDX-License-Identifier: MIT
// TCP plumbing for the example transports: sockets sized through the
// sockbuf public API before listen()/connect(), and full reads/writes.
#pragma once

#include "options.h"

#include <cstddef>
#include <string>

namespace examples
{

// Sizes @fd's buffers as @mode says (both directions, @size each, in the
// unit getsockopt reads back) and returns one line saying what the kernel
// made of it, with the clamps that cut the size.  @force passes
// SOCKBUF_F_ALLOW_FORCE: past net.core.[wr]mem_max with CAP_NET_ADMIN,
// "force-denied" in the line without it.  Throws std::runtime_error when
// the call fails.
std::string apply_bufs(int fd, bufs_mode mode, int size, bool force = false);

// A listening TCP socket on @ep, sized before listen() so that accepted
// sockets inherit the sizes and lock bits.  @note receives apply_bufs' line.
int listen_on(const endpoint &ep, bufs_mode mode, int size, std::string *note, bool force = false);

// A connected TCP socket, sized before connect().
int connect_to(const endpoint &ep, bufs_mode mode, int size, std::string *note, bool force = false);

// TCP_NODELAY on an accepted socket: request-response servers answer with
// records whose tail is smaller than a segment; with Nagle on, that tail
// waits for the peer's delayed ACK (SUNRPC's server sets it too).
void set_nodelay(int fd);

// The port a bound socket got (for --listen=ADDR:0).
uint16_t local_port(int fd);

// Whole buffers or nothing.  read_full: false on a clean EOF before the first
// byte; a short read after that, or any error, throws.  write_full throws.
bool read_full(int fd, void *buf, size_t len);
void write_full(int fd, const void *buf, size_t len, int flags = 0);

// Monotonic clock in seconds.
double now_seconds();

} // namespace examples
