// SPDX-License-Identifier: MIT
// The data a scenario run produces and the clauses judge: sockets with
// their setup facts and sampled life, verdicts and violations.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sockbuf::contract
{

// How a connection's sockets were set up.  Every scenario runs all arms
// side by side in one network namespace, so they share the same load.
enum class arm : int {
	untouched,   // kernel defaults: the window-scale baseline
	raw_unlock,  // setsockopt(SO_*BUF) then SO_BUF_LOCK 0, nothing else
	lib_initial, // sockbuf_set_initial_bufsize + floor guard (restore)
	raw_locked,  // setsockopt(SO_*BUF): locked
	lib_locked,  // sockbuf_lock_bufsize
	lib_reserve, // sockbuf_set_initial_bufsize + SOCKBUF_F_RESERVE_MEM, then
		     // a floor guard made with SOCKBUF_GUARD_RESERVE_MEM and
		     // SOCKBUF_GUARD_EVENTS (reserve mode's promise needs one:
		     // docs/contract.md); accepted sockets reserve again
};
constexpr int arm_count = 6;
const char *arm_name(arm a);
// The arms whose C3 library verdict has a time bound (a dip is allowed if
// its guard repaired it within the bound): their samples' gaps decide
// whether that verdict can be verified, so the sampler reads them on
// every cycle.
constexpr bool time_bounded(arm a)
{
	return a == arm::lib_initial || a == arm::lib_reserve;
}

enum class role : int { client, server, listener };
const char *role_name(role r);

// How the library's floor guard is driven on a lib_initial socket, as a
// user drives it: the library's own thread (sockbuf_guard_start()), a
// timerfd (sockbuf_guard_timerfd()) in the user's poll() loop that calls
// sockbuf_guard_pass() when it is readable, or the library's thread woken
// by the kernel's cuts (SOCKBUF_GUARD_EVENTS; it polls like the thread
// driver where the event source does not load, and says why).  The
// lib_reserve arm's own guard is an events guard too.
//
// guard_driver::daemon: the library's thread in a process of its own
// that hands its sockets over to a sockbufd the scenario starts in its
// namespace (harness/served.h); only in scenarios that ask for it
// (scenario_plan::daemon_mode), never in the drivers' rotation.
enum class guard_driver : int { thread, timerfd, events, daemon };
constexpr int guard_driver_count = 3; // the rotation: daemon is not in it
const char *driver_name(guard_driver d);
// Back from driver_name()'s text; thread for an unknown name.
guard_driver driver_from_name(const std::string &name);

// One series of values of one buffer of one socket, recorded as changes.
struct series_point {
	uint32_t t_us; // since the scenario's traffic started
	int32_t value;
};

// What the sampler saw of one buffer (send or receive) from one source.
struct track {
	int64_t min = -1, max = -1, first = -1, last = -1;
	uint64_t samples = 0;
	uint64_t below_floor = 0;	  // samples under the floor
	int64_t first_below_us = -1;	  // time of the first such sample
	int64_t lowest_below = -1;	  // lowest value under the floor
	int64_t longest_below_us = 0;	  // longest run under the floor, first to
					  // last sample (a lower bound)
	int64_t below_since_us = -1;	  // open stretch (sampler-internal)
	int64_t last_t_us = 0;		  // time of the last sample (from 0)
	int64_t max_gap_us = 0;		  // longest time this track went unread:
					  // between two samples, from the start
					  // to the first, from the last to the end
	std::vector<series_point> series; // changes only, capped
	bool series_truncated = false;

	void add(int64_t value, int64_t floor, int64_t t_us);
	void close(int64_t t_us); // ends an open under-floor stretch
	void end(int64_t t_us);	  // sampling stopped at @t_us
};

// One dip of one buffer (a socket direction) under its floor, as the
// samples saw it: the times of its first and last sample under the floor,
// from either source, and of the samples at or above it around them.
// Its length is bounded both ways: last - first (seen_us()) is a lower
// bound (a slow sampler cannot inflate it), and from the last sample
// above before it to the first above after it (us()) an upper bound (a
// slow sampler cannot hide it).  A dip at the first sample starts at the
// traffic's start; one still open when sampling stopped ends there.
struct dip {
	int64_t first_us = -1, last_us = -1;
	int64_t before_us = -1, after_us = -1; // -1: none (start, end of sampling)
	int64_t seen_us() const { return last_us - first_us; }
	int64_t us() const
	{
		return (after_us >= 0 ? after_us : last_us) - (before_us >= 0 ? before_us : 0);
	}
};

// The dips of one buffer, over both sources (getsockopt and inet_diag
// read the socket in the same sampling cycle, which gives both samples
// the same time).  A cycle in which any source read the buffer under its
// floor keeps a dip going; a later cycle in which every source read it at
// or above the floor ends it, at its last sample under.
class dip_log
{
public:
	static constexpr size_t cap = 4096; // dips kept; the rest counted
	std::vector<dip> dips;
	uint64_t dropped = 0;
	dip open;	       // first_us < 0: none open
	int64_t above_us = -1; // a sample at or above the floor after open
	void note(int64_t t_us, bool below);
	void end(int64_t t_us); // closes the open dip (sampling stopped at @t_us)
	// The longest dip by its upper bound, kept or not (first_us < 0: none).
	const dip &longest() const { return longest_; }
	// The longest by its lower bound.
	const dip &longest_seen() const { return longest_seen_; }

private:
	void close(int64_t after_us);
	dip longest_, longest_seen_;
	// The last two times a source read the buffer at or above the floor
	// (one source may read above and the other under in the same cycle:
	// under wins, and a dip starting there starts after the one before).
	int64_t above_last_ = -1, above_prev_ = -1;
};

// One dip on the kernel's clock (judge/kernel_clock.h): from the exit of
// the kernel function that left the buffer below its floor to the exit of
// the one that found it back at or above (the write that restored it, or
// growth), in microseconds from the traffic's start.  Ids name the
// functions in floor_clock::functions; end_fn -1: still below when the
// scenario ended.
struct kernel_dip {
	int64_t start_us = 0, end_us = 0;
	int start_fn = -1, end_fn = -1;
	int64_t us() const { return end_us - start_us; }
};

// What the judge read of the kernel's counters between two of its
// readings (judge/cycle_watch.h): from the start of one reading to the
// end of the next, in microseconds from the traffic's start, how much a
// counter grew (a thread's run-queue wait in microseconds, or program
// runs the kernel skipped).  Only steps where it grew are kept.
struct counter_step {
	int64_t from_us = 0, to_us = 0;
	int64_t grew = 0;
};

// Which instrument timed a scenario's dips: the kernel's clock, or (where
// its programs cannot load, and why) the samples.  With it, host-wide
// counters the judge read each cycle: huge pages khugepaged collapsed
// (/proc/vmstat thp_collapse_alloc; a collapse holds the mm of the
// process whose pages it takes, so the guard's thread can wait on it).
struct floor_clock {
	std::vector<counter_step> thp;
	std::string thp_why;
	bool kernel = false;
	std::string why;
	std::vector<std::string> functions; // by id; "" where not attached
	uint64_t lost = 0;		    // records the ring had no room for
	uint64_t skipped = 0;		    // program runs the kernel skipped (recursion)
	// When they were skipped, as the judge's cycles read the programs'
	// counts (their sum can be less than skipped: runs skipped outside
	// the sampled time).
	std::vector<counter_step> skips;
	// Ids 0-3 are where cuts are made (judge/floor_judge.bpf.c).
	bool cut_point(int id) const { return id >= 0 && id <= 3; }
	const char *function(int id) const
	{
		return id >= 0 && size_t(id) < functions.size() && !functions[size_t(id)].empty()
			   ? functions[size_t(id)].c_str()
			   : "?";
	}
};

struct dir_setup {
	int requested = 0;   // kernel unit; 0 = not touched
	int after_call = -1; // getsockopt right after the setup call returned
	int reported = -1;   // library report's effective (lib arms)
	int floor = 0;	     // what must hold (0 = none)
	uint32_t clamps = 0; // library report clamp bits
	int report_locked = -2;
	int strategy = -1; // library report's enum sockbuf_strategy
};

// SK_MEMINFO of one inet_diag sample: what moderation works from
// (sk_stream_moderate_sndbuf() keeps max(min(sndbuf, wmem_queued / 2),
// reserved - wmem_queued - rmem_alloc)).  t_ms < 0: none taken.
struct mem_state {
	double t_ms = -1;
	int64_t sndbuf = -1, rcvbuf = -1, wmem_queued = -1, rmem_alloc = -1, fwd_alloc = -1;
};

struct socket_record {
	std::string name; // "bulk/lib_initial/c0/server"
	arm a = arm::untouched;
	role r = role::client;
	int fd = -1;
	uint32_t inode = 0;
	int conn = -1;

	dir_setup snd, rcv;
	int lock_after_call = -1; // SO_BUF_LOCK after setup
	int setup_err = 0;	  // -errno of a failed setup call
	// lib_reserve: SO_RESERVE_MEM in force on this socket, or why not
	// (the report's reserve_err; 0 while not asked).
	bool reserved = false;
	int reserve_err = 0;

	// Accepted sockets: what they carried from the listener at accept().
	int accept_sndbuf = -1, accept_rcvbuf = -1, accept_lock = -1;
	int listener_sndbuf = -1, listener_rcvbuf = -1, listener_lock = -1;

	// TCP_INFO after the handshake.
	int snd_wscale = -1, rcv_wscale = -1;
	// Ports from this socket's side (kernel events name sockets by them).
	int local_port = -1, peer_port = -1;

	// Quiescent comparisons (C7): before traffic and after it.
	struct snapshot {
		int gs_snd = -1, gs_rcv = -1, gs_lock = -1;    // getsockopt
		int64_t diag_snd = -1, diag_rcv = -1;	       // inet_diag SK_MEMINFO
		int lib_snd = -1, lib_rcv = -1, lib_lock = -2; // sockbuf_get_state
		bool taken = false;
	} before, after;

	// lib_initial and lib_reserve: the driver of the floor guard this
	// socket is in.
	guard_driver driver = guard_driver::thread;

	// Sampled during traffic.
	track gs_snd, gs_rcv, diag_snd, diag_rcv;
	// Dips under the floor per direction, both sources together.
	dip_log snd_dips, rcv_dips;
	// The same on the kernel's clock, where it ran (floor_clock).
	std::vector<kernel_dip> snd_kdips, rcv_kdips;
	// The memory state at the first inet_diag sample under a floor.
	mem_state first_below_mem;
};

// Floor guard (library arm): what check/restore did, from the library's
// own totals (sockbuf_guard_stats()): per driver, and summed over both
// drivers in scenario_result::guard.
struct guard_stats {
	std::string driver;	  // driver_name(); empty for the sum
	arm a = arm::lib_initial; // the arm it guards (lib_initial, lib_reserve)
	int sockets = 0;	  // sockets registered with this guard
	uint32_t interval_us = 0;
	uint64_t passes = 0, violations = 0, restores = 0, restore_errors = 0;
	int64_t max_pass_us = 0; // the longest library pass
	int64_t max_late_us = 0; // the latest a due pass started
	// Wall time in full passes and in rounds on records, summed: over
	// the scenario's length, an upper bound on the guard's share of a core.
	int64_t pass_total_us = 0, round_total_us = 0;
	int64_t bound_us = 0;		 // how long a dip may last (guard.h)
	int source = -1;		 // SOCKBUF_GUARD_SRC_* of the last pass
	std::vector<std::string> events; // first few, for the report
	// SOCKBUF_GUARD_EVENTS (sockbuf_guard_event_stats()): 0 while events
	// drove the guard, else why it polled (-errno); 1: not asked.
	int events_err = 1;
	unsigned attached = 0; // SOCKBUF_GUARD_EV_* bits
	uint64_t records = 0, restored_events = 0, restored_passes = 0;
	// What became of what the rounds read: records whose socket had left
	// (dropped), sockets read at or above their floor, failed clears of
	// a pending mark.
	uint64_t dropped = 0, not_below = 0, clear_failed = 0;
	// The longest a record waited for the guard's thread (max_wait_ns):
	// the scheduler's share of the event path.
	int64_t max_wait_us = 0;
	// Records per function that posted them (records_at).
	uint32_t records_at[4] = {};
	// The thread that runs this guard's passes (the library's, or the
	// caller's timerfd loop), found when it started (0: not found), and
	// its run-queue wait as the judge read it from the kernel
	// (/proc/<pid>/task/<tid>/schedstat, judge/cycle_watch.h), or why
	// not (sched_why non-empty: no wait is excused).
	int tid = 0;
	std::vector<counter_step> sched;
	std::string sched_why;
	// The same thread's time blocked (uninterruptible sleep: a lock, a
	// page fault waiting for the mm), sum_block_runtime of
	// /proc/<pid>/task/<tid>/sched (schedstats on), in microseconds, or
	// why not: reported per dip, never excused (its own calls block too).
	std::vector<counter_step> blocked;
	std::string blocked_why;
	// Runs of the guard's own programs the kernel skipped (events), read
	// by the judge (judge/prog_skips.h), or why not.
	std::vector<counter_step> skips;
	std::string skips_why;
	// guard_driver::daemon (sockbuf_guard_daemon_stats() of the guard in
	// the served process, and the daemon's own figures): the sockbufd
	// that served it at the end (0: none), why not (-errno; 1: not
	// asked), its hand-overs and resumes, the time served, and the
	// restores the daemon made (its metrics, source "daemon").
	int daemon_pid = 0, daemon_err = 1;
	uint32_t handovers = 0, resumes = 0;
	int64_t served_us = 0;
	int64_t daemon_restores = -1; // -1: the daemon's metrics unread
	uint32_t daemon_interval_us = 0;
};

struct sampler_stats {
	uint64_t cycles = 0;
	double seconds = 0;
	double rate_hz = 0;
	double max_gap_ms = 0;	  // longest time between two samples
	double mean_cycle_us = 0; // time one sampling cycle takes
	double max_cycle_us = 0;  // the longest one took (a sample carries its
				  // cycle's start time, read up to this later)
	int diag_err = 0;
	std::string scheduling; // how the sampler thread was scheduled
};

struct integrity {
	uint64_t flows = 0, bytes_sent = 0, bytes_verified = 0;
	uint64_t corrupt = 0, short_flows = 0;
	std::vector<std::string> errors;
	// The drain after the deadline (harness/engine.h): flows that ended
	// after its base (their last bytes were still being retransmitted),
	// and flows whose bytes were still held by a live connection when
	// its hard limit came (not lost, not seen to arrive: unverified).
	uint64_t late_flows = 0, unfinished_flows = 0;
	std::vector<std::string> unfinished;
	double drain_s = 0, drain_base_s = 0, drain_cap_s = 0;
	bool ok() const { return corrupt == 0 && short_flows == 0 && errors.empty(); }
};

// unverified: nothing wrong was seen, but the evidence cannot support a
// pass (samples further apart than the clause's time bound).  It does not
// fail a run; reports show it, with the gap and the bound, and count it
// apart from passes.
enum class outcome : int { pass, fail, skip, unverified };
inline constexpr outcome all_outcomes[] = {outcome::pass, outcome::fail, outcome::skip,
					   outcome::unverified};
// The one mapping from outcome to text, used by every report format.
const char *outcome_name(outcome o);
// Back from outcome_name()'s text (a JSON document); false if unknown.
bool outcome_from_name(const std::string &name, outcome *out);

struct violation {
	std::string clause, scenario, socket, what;
	double t_ms = -1;
	int64_t value = -1, floor = -1;
	mem_state mem; // the socket's first_below_mem, where there is one
};

struct half_verdict {
	outcome o = outcome::skip;
	std::string why; // reason for skip, summary for fail, evidence for pass
	std::vector<violation> violations;
	// Time-bounded clauses: the longest sampling gap and the bound it was
	// held to, in ms (-1: not a time-bounded verdict).
	double gap_ms = -1, bound_ms = -1;
};

struct verdict {
	std::string clause, scenario;
	half_verdict raw, lib;
};

// The cuts a scenario made on purpose (harness/cutter.h): planned and
// made, with the seed, by direction, by what SO_BUF_LOCK was left at,
// and per guard mode (mode_name()).
struct cut_summary {
	bool ran = false;
	uint64_t seed = 0;
	int planned = 0, made = 0, failed = 0;
	int snd = 0, rcv = 0;				 // made, per direction
	int lock_on = 0, lock_off = 0, lock_refused = 0; // SO_BUF_LOCK 3, 0, refused
	std::map<std::string, int> by_mode;
	std::string first_error; // of a cut not made
};

struct scenario_result {
	std::string name;
	std::string skip_reason; // non-empty: did not run
	std::string aborted;	 // non-empty: setup failed, no traffic ran
	double seconds = 0;
	int64_t t0_ns = 0; // CLOCK_MONOTONIC when the traffic started
	integrity data;
	sampler_stats sampler;
	floor_clock clock;		 // what timed the dips
	guard_stats guard;		 // both drivers together
	std::vector<guard_stats> guards; // per driver that guarded sockets
	std::vector<socket_record> sockets;
	std::vector<std::string> notes;
	cut_summary cuts;
	// Sizes of this scenario's arms (kernel unit).
	int initial_snd = 0, initial_rcv = 0;
	bool needs_growth = false; // bandwidth-delay product exceeds initial
	std::string no_growth_reason;
	int tcp_rmem2 = -1, tcp_wmem2 = -1;
};

} // namespace sockbuf::contract
