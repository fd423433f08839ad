// SPDX-License-Identifier: MIT
// Cuts made on purpose, from outside: a process of the suite's own (the
// cutter) that takes guarded sockets out of the scenario's process with
// pidfd_getfd(), as another process on the host would, and at seeded
// random times lowers one direction's size with setsockopt(SO_SNDBUF or
// SO_RCVBUF) (which also sets that direction's lock) and then flips
// SO_BUF_LOCK on (3, both directions) or off (0).  Each cut leaves the
// buffer under its floor until a guard (or the daemon that serves it)
// restores it: C3 then judges every guard mode on real dips, on any host.
//
// The cutter is forked before any thread of the scenario starts; it
// closes every descriptor it inherited (it holds no socket of the
// scenario's), waits for the traffic's start, makes at most @count cuts
// within its window, each a few system calls, and reports what it did.
// Bounded in count and in time: the scenario's process kills it at its
// window's end plus a second.
#pragma once

#include "model.h"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sockbuf::contract
{

struct cut_spec {
	int count = 0;	      // 0: no cutter
	double start_s = 0.5; // the window, from the traffic's start
	double end_s = 2.5;
	uint64_t seed = 1;
	int size = 4096; // what setsockopt() asks (the kernel doubles it)
};

// One cut, planned by the scenario's process and carried out (or not) by
// the cutter.
struct cut_record {
	int64_t at_us = 0;    // planned, from the traffic's start
	int64_t done_us = -1; // when the setsockopt() returned (-1: not made)
	int socket = -1;      // index in the scenario's sockets
	int target_fd = -1;   // its number in the scenario's process
	int dir = 0;	      // 0 SO_SNDBUF, 1 SO_RCVBUF
	int lock = 0;	      // SO_BUF_LOCK set after the size: 0 or 3
	int size_after = -1;  // getsockopt() of that direction right after
	int lock_after = -1;  // SO_BUF_LOCK right after (-1: unreadable)
	int err = 0;	      // -errno of the first call that failed
	int step = 0;	      // which call: 1 pidfd_getfd, 2 size, 3 lock
};

class cutter
{
public:
	cutter() = default;
	~cutter();
	cutter(const cutter &) = delete;
	cutter &operator=(const cutter &) = delete;

	// Plans the cuts over the guarded sockets of @sockets (lib_initial
	// and lib_reserve, not listeners, with a floor), round-robin over
	// them in a seeded order so that every guarded socket is cut, both
	// directions in turn, and forks the cutter.  "" or why it could not.
	std::string start(const std::vector<socket_record> &sockets, const cut_spec &spec);
	// The traffic started at @t0_ns (CLOCK_MONOTONIC): the cutter's clock.
	void go(int64_t t0_ns);
	// Waits for the cutter (at most until its window's end plus a second
	// from @t0_ns), then gives what it did.
	std::vector<cut_record> finish();
	pid_t pid() const { return pid_; }
	bool started() const { return pid_ > 0; }

private:
	void end_child();
	cut_spec spec_;
	std::vector<cut_record> plan_;
	pid_t pid_ = -1;
	int go_fd_ = -1;  // the cutter's clock, written by go()
	int out_fd_ = -1; // what it did
	int64_t t0_ns_ = 0;
};

// What @cuts (finish()'s) did, per direction, lock and mode.
cut_summary summarize_cuts(const std::vector<cut_record> &cuts,
			   const std::vector<socket_record> &sockets, const cut_spec &spec);

// "40 cuts from pid 123 through pidfd_getfd (seed 7, 0.5-2.5 s): 20 of
// SO_SNDBUF, 20 of SO_RCVBUF, 19 left locked, 21 unlocked; thread 10,
// timerfd 10, ...": the scenario's note.
std::string cuts_text(const cut_summary &c, const cut_spec &spec, pid_t pid);

} // namespace sockbuf::contract
