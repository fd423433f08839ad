// SPDX-License-Identifier: MIT
// What the floor guard's files (guard.cc, guard_source*.cc, guard_pass.cc,
// guard_round.cc, guard_drivers.cc) share and nothing else sees: the
// flags and intervals it accepts, the size sources' numbers, and a few
// small helpers.
#pragma once

#include "sys.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace sockbuf::guard
{

constexpr unsigned int known_flags = SOCKBUF_GUARD_ALLOW_FORCE | SOCKBUF_GUARD_RESERVE_MEM |
				     SOCKBUF_GUARD_NO_DIAG | SOCKBUF_GUARD_RUN_IN_CHILD |
				     SOCKBUF_GUARD_NO_URING | SOCKBUF_GUARD_BPF |
				     SOCKBUF_GUARD_EVENTS | SOCKBUF_GUARD_NO_DAEMON;
// 100 us to 10 minutes, for polling and for the safety net alike.
constexpr unsigned int min_interval_us = 100, max_interval_us = 600'000'000;

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

// Set by force_source() (test seam), read when a pass picks its source.
inline std::atomic<int> g_forced_source{-1};

// The kernel's cookie of the socket @fd names, 0 without one (a kernel
// before 4.12, or the read failed).
inline uint64_t socket_cookie(int fd)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	if (sys::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0 || len != sizeof(cookie))
		return 0;
	return cookie;
}

inline int64_t now_ns(clockid_t clock = CLOCK_MONOTONIC)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Full sockets only: request and time-wait minisocks have no inode and no
// buffers of their own.
inline uint32_t full_socket_states()
{
	return ~((1u << TCP_SYN_RECV) | (1u << TCP_TIME_WAIT) | (1u << 12 /* NEW_SYN_RECV */));
}

inline bool interval_ok(unsigned int us)
{
	return us >= min_interval_us && us <= max_interval_us;
}

} // namespace sockbuf::guard
