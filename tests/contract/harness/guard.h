// SPDX-License-Identifier: MIT
// The library's floor guarantee in action: the library's own floor guard
// (sockbuf_guard_*), started exactly as an application starts it, over the
// lib_initial sockets given to one driver:
//
// - guard_driver::thread: sockbuf_guard_start(), the library's thread;
// - guard_driver::timerfd: sockbuf_guard_timerfd() and the event loop a
//   user writes around it: a thread that poll()s the timerfd and calls
//   sockbuf_guard_pass() whenever it is readable (the timer decides when
//   a pass runs, never this code);
// - guard_driver::events: sockbuf_guard_start() on a guard made with
//   SOCKBUF_GUARD_EVENTS: the thread wakes on the kernel's cuts, passes
//   are the safety net (every minute, the library's default); where the
//   event source does not load it polls at the interval, and says why.
//
// The lib_reserve arm has a guard of its own: SOCKBUF_GUARD_RESERVE_MEM
// and SOCKBUF_GUARD_EVENTS in their default configuration (the safety net
// every minute), held to the events promise (harness/floor_judge.h).
//
// Neither driver's thread gets the sampler's real-time scheduling: both run
// as an application's threads run.  This adapter registers the sockets,
// starts and stops the driver, and reads the library's own totals
// (sockbuf_guard_stats()); checking and restoring are the library's.
#pragma once

#include "model.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace sockbuf::contract
{

struct pass_cost; // clauses.h

class floor_guard
{
public:
	// Guards the sockets of arm @a (lib_initial or lib_reserve) of
	// @sockets (not listeners) whose driver is @d.
	floor_guard(std::vector<socket_record> *sockets, arm a, guard_driver d,
		    uint32_t interval_us);
	~floor_guard();
	floor_guard(const floor_guard &) = delete;
	floor_guard &operator=(const floor_guard &) = delete;

	void start();
	void stop();
	// One sockbuf_guard_pass() after the driver stopped (the end of a
	// run, after the end-state reading).
	void last_pass();
	// The library's totals so far, with the bound: how long a dip may
	// last under this guard's passes, from its configuration alone (its
	// interval, the safety net's while events drive it, and its number of
	// sockets: clauses.h, repair_bound_us()), a pass costing @cost.
	guard_stats stats(const pass_cost &cost) const;
	int sockets() const { return sockets_; }
	// The thread that runs its passes, found as start() made it (0: not
	// found): the judge reads its run-queue wait (judge/cycle_watch.h).
	int tid() const { return tid_; }
	// The BPF programs the guard loaded (events), found by the judge in
	// the kernel's list (judge/prog_skips.h), or why none.
	const std::vector<int> &programs() const { return prog_fds_; }
	const std::string &programs_why() const { return prog_why_; }

private:
	void event_loop();
	void note_error(const char *call, int err);

	arm arm_;
	guard_driver driver_;
	uint32_t interval_us_;
	int id_ = -1;
	int sockets_ = 0;
	int tid_ = 0;
	std::vector<int> prog_fds_; // owned
	std::string prog_why_ = "no programs asked for";
	int timer_fd_ = -1; // owned by the guard
	int stop_fd_ = -1;  // eventfd: ends the event loop
	bool started_ = false;
	std::thread loop_;
	// Written by the event loop until it is joined; read after.
	uint64_t errors_ = 0;
	std::vector<std::string> events_;
};

// Assigns a driver to every lib_initial socket of @sockets: the arm's
// connections alternate between the drivers, the first getting
// driver @first (both ends of a connection share a driver), and over
// guard_driver::daemon too when @with_daemon.  lib_reserve sockets get
// guard_driver::events.
void assign_drivers(std::vector<socket_record> *sockets, guard_driver first,
		    bool with_daemon = false);

} // namespace sockbuf::contract
