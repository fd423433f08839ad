// SPDX-License-Identifier: MIT
// sockbufd's proof of progress, and the bounds it keeps: what a floor
// guard that hands over (impl/guard_handover.cc) reads to know that the
// daemon still serves, and serves at least as well as the guard itself.
// A file "progress" in the daemon's run directory (daemon_presence.h:
// root's, checked by the same rules, opened through the directory's
// descriptor), 0644, one line of fixed width rewritten in place after
// every iteration of the daemon's serving loop:
//
//   sockbufd-progress 1 PASSES BEAT_NS PERIOD_US MEM_US SET_US TIMENS PASSES
//
//   PASSES     iterations of the serving loop so far; twice, first and
//              last: a line read while it was rewritten shows two numbers
//              and is read again
//   BEAT_NS    CLOCK_MONOTONIC at the end of the last iteration
//   PERIOD_US  the longest the loop waits between two iterations (its
//              --interval): a beat older than about twice this says the
//              daemon is stopped, hung or overloaded
//   MEM_US     how late at most a cut by memory pressure is seen: 0 when
//              its event programs see them, else its passes' interval
//   SET_US     the same for the cuts no event program sees (setsockopt()
//              of SO_SNDBUF or SO_RCVBUF, SO_BUF_LOCK): the interval of
//              its full passes (--interval polling, --net-interval with
//              events)
//   TIMENS     the inode of the daemon's time namespace (0 where the
//              kernel has none): BEAT_NS is on another clock for a reader
//              in another one, which then watches PASSES move instead
//
// Numbers are zero-padded to fixed widths, so a rewrite never changes the
// length and pwrite() at offset 0 replaces the whole line.
#pragma once

#include <cstdint>

namespace sockbuf::progress
{

inline constexpr const char *file_name = "progress";

struct bounds {
	uint32_t period_us = 0;
	uint32_t mem_us = 0;
	uint32_t set_us = 0;
};

struct reading {
	uint64_t passes = 0;
	uint64_t beat_ns = 0;
	bounds b;
	uint64_t timens = 0;
};

// The inode of this process's time namespace, or 0 (before Linux 5.6).
uint64_t own_timens();

// The daemon's side.  open() makes the file (a temporary renamed into
// place, in the run directory held and checked as presence::announce()
// does) and keeps it open; beat() rewrites the line.  Not thread-safe.
class writer
{
public:
	writer() = default;
	~writer();
	writer(const writer &) = delete;
	writer &operator=(const writer &) = delete;

	// 0 or -errno (-EPERM: the directory is not this user's alone).
	int open(const bounds &b);
	// One iteration done: 0 or -errno of pwrite().
	int beat();
	bool is_open() const { return fd_ >= 0; }

private:
	int fd_ = -1;
	uint64_t passes_ = 0;
	bounds b_;
	uint64_t timens_ = 0;
};

// The guard's side.  open_file(): a descriptor (O_RDONLY, O_CLOEXEC) of
// the file in the run directory, checked as presence::read_serving()
// checks its file (root's alone, a regular file, no link), or -errno.
int open_file();
// Reads the line at offset 0 of @fd: 0, -EAGAIN (caught mid-rewrite, or
// empty: read again later), -EINVAL (not the format), or -errno.
int read(int fd, reading *out);

} // namespace sockbuf::progress
