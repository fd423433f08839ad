// SPDX-License-Identifier: MIT
// C3 (library), each guard mode held to the promise its documentation
// makes: every dip of a guarded buffer under its floor, timed on the
// kernel's clock where the suite's programs load (judge/kernel_clock.h),
// else from the samples around it (an upper bound), against a bound
// computed before the run from the guard's configuration alone (its
// interval, its number of sockets, its mode: clauses.h):
//
// - thread, timerfd: one period plus one pass (repair_bound_us());
// - events, reserve (an events guard with SOCKBUF_GUARD_RESERVE_MEM): a
//   cut made in a function the guard's programs watch is restored on its
//   record within SOCKBUF_GUARD_EVENT_BOUND_US; a cut the clock saw made
//   by a socket-option write, or at a cut point the guard's programs are
//   not attached to, within the safety net's bound (its interval, a
//   minute by default, plus one pass).  A dip the clock saw begin
//   elsewhere (it missed the cut) is held to the event bound, past which
//   it is unverified: where the cut was made cannot be told.  Where the
//   kernel clock saw watched cuts restored by a write, some restore must
//   have come from a record.  Without the kernel clock the samples cannot
//   tell watched cuts from others: dips of an events guard then leave the
//   mode unverified.
//
// Every dip the kernel clock missed (the samples saw it, the clock did
// not) is judged by its samples against its mode's bound: seen past it
// fails, its upper bound alone past it is unverified.  A dip during
// which the kernel skipped a run of the clock's programs (its count is
// per program, not per socket) is unverified.  In the events modes, a
// dip during which the kernel skipped a run of the guard's own programs
// (read by the judge: judge/prog_skips.h) may have had no record: it is
// held to guard_skip_bound_us (clauses.h: the guard reads the skips at
// least once a second), and counted.
//
// The scheduler's share: the time a guard's thread waited runnable and
// not run inside a dip, as the judge read it from the kernel
// (judge/cycle_watch.h: run_delay of /proc/<pid>/task/<tid>/schedstat,
// a lower bound), is taken off that dip's length before it is compared
// (sched_wait_us, per dip).  Sleeping or blocking is never excused; the
// time the thread was blocked inside a dip (sum_block_runtime) and the
// huge pages khugepaged collapsed meanwhile are reported with it, to
// name a failure's cause.
//
// Used by C3 for its verdict and by the JSON report (floor_judge).
#pragma once

#include "dips.h"
#include "model.h"

#include <map>
#include <string>
#include <vector>

namespace sockbuf::contract
{

// A dip longer than its bound (kernel clock, or seen between samples), or
// one whose samples cannot rule it out (sampled clock: the upper bound is
// past the bound, the lower bound is not).
struct judged_dip {
	const socket_record *s = nullptr;
	const char *dir = ""; // SO_SNDBUF, SO_RCVBUF
	int64_t start_us = 0; // from the traffic's start
	int64_t us = 0;	      // its length (kernel) or upper bound (sampled)
	int64_t seen_us = 0;  // sampled: first to last sample under
	int64_t bound_us = 0;
	std::string how;	    // "cut in __sk_mem_raise_allocated, restored ..."
	int64_t sched_wait_us = 0;  // the guard's thread runnable, not run (excused)
	int64_t blocked_us = -1;    // ... blocked (not excused); -1: not read
	int64_t thp_collapses = -1; // huge pages collapsed during it; -1: not read
	bool guard_skipped = false; // a run of the guard's programs skipped during it
};

struct mode_judgment {
	std::string mode; // thread, timerfd, events, reserve
	arm a = arm::lib_initial;
	guard_driver d = guard_driver::thread;
	int sockets = 0;
	int64_t interval_us = 0;  // the configuration the bound is computed from
	dip_summary dips;	  // lengths in us (kernel) or upper bounds
	int64_t bound_us = 0;	  // the mode's bound: event bound where events ran
	int64_t net_bound_us = 0; // events, reserve: the safety net's bound
	// The scheduler's share excused: the most on one dip, and why none
	// could be (sched_why non-empty: no thread's wait was read).
	int64_t max_sched_wait_us = 0;
	std::string sched_why;
	// The guard's own account, reported for information and in no bound:
	// how late its passes began (max_late_us), or where records drive it
	// the longest a record waited (max_wait_ns); and its passes' lateness.
	int64_t late_us = 0, pass_late_us = 0;
	bool events_on = false; // the guard's programs drove it
	uint64_t restored_by_record = 0;
	uint64_t watched_cuts = 0; // kernel: dips that began at a watched cut
	uint64_t written_back = 0; // ... and ended at a socket-option write
	uint64_t skipped_dips = 0; // dips a skipped clock run left unverified
	// Dips during which the guard's own programs skipped a run (held to
	// guard_skip_bound_us), and the guard's skipped runs in all, or why
	// they were not read.
	uint64_t guard_skip_dips = 0;
	int64_t guard_skipped_runs = 0;
	std::string guard_skips_why;
	int64_t skip_bound_us = 0;
	// Blocked time and collapses: the most on one dip, or why unread.
	int64_t max_blocked_us = 0;
	std::string blocked_why, thp_why;
	std::map<std::string, uint64_t> cuts_by_function; // kernel: where dips began
	std::vector<judged_dip> over;			  // longer than their bound: fail
	std::vector<judged_dip> unproven;		  // cannot be ruled out
	std::vector<judged_dip> longest;		  // the longest few, for the report
	bool no_record_restores = false; // watched cuts written back, none by a record
	uint64_t dips_seen = 0;		 // dips judged by their samples
	// Events on, no kernel clock, and dips: whether they met the event
	// bound cannot be told (unverified, not a pass).
	bool events_unjudged = false;
	bool ok() const { return over.empty() && !no_record_restores; }
	bool verified() const { return unproven.empty() && !events_unjudged; }
};

struct floor_judgment {
	bool kernel = false; // the kernel's clock timed the dips
	std::string why;
	uint64_t missed = 0; // sampled dips no kernel dip covers (judged as sampled)
	// Kernel dips the samples saw end sooner (a missed end): cut at the
	// first sample at or above the floor.
	uint64_t cut_by_samples = 0;
	std::vector<mode_judgment> modes;
};

// The mode name of a guard ("reserve" for lib_reserve's).
std::string mode_name(arm a, guard_driver d);

floor_judgment judge_floors(const scenario_result &r);

} // namespace sockbuf::contract
