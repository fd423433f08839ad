// SPDX-License-Identifier: MIT
// What the judge reads from the kernel once a sampling cycle, beside the
// buffers: how long each guard's thread waited runnable and not run
// (the second field of /proc/<pid>/task/<tid>/schedstat, run_delay, in
// nanoseconds: the time the task spent on a run queue, which the
// scheduler adds up each time the task gets a CPU; CONFIG_SCHED_INFO),
// and how many runs of the kernel clock's programs the kernel skipped
// (kernel_clock::skipped_now()).  Each reading is timed before and after
// it; a step is kept where a counter grew (model.h, counter_step).
//
// A guard's sleep, a wait on a lock or in a blocking call, is not in
// run_delay: only time its thread could have run and did not.  So a
// guard that sleeps in its pass gets nothing excused.
//
// For the report, never excused: each guard thread's time blocked
// (sum_block_runtime of /proc/<pid>/task/<tid>/sched, where schedstats
// are on: the guests boot with schedstats=enable), the runs of each
// guard's own programs the kernel skipped (judge/prog_skips.h), and the
// huge pages khugepaged collapsed (/proc/vmstat thp_collapse_alloc).
//
// Written by the sampler's thread (read()), threads added by the
// scenario's thread while it runs (add_thread()); the steps are read
// after the sampler stopped.
#pragma once

#include "model.h"

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace sockbuf::contract
{

class cycle_watch
{
public:
	static constexpr int max_threads = 8;
	// @t0_ns: the traffic's start; @skips: read the kernel clock's
	// skipped runs (where it timed the dips).
	cycle_watch(int64_t t0_ns, bool skips);
	~cycle_watch();
	cycle_watch(const cycle_watch &) = delete;
	cycle_watch &operator=(const cycle_watch &) = delete;

	// Watches thread @tid of this process in slot @slot (< max_threads),
	// or records why it cannot (@tid 0: the guard's thread was not found).
	void add_thread(int slot, int tid);
	// Reads the skipped runs of the programs @fds (a guard's, owned by
	// the caller, open while this lives) in slot @slot, or records @why
	// not (@fds empty).
	void add_programs(int slot, const std::vector<int> &fds, const std::string &why);
	// One reading of every counter (the sampler's thread).
	void read();
	// After the sampler stopped.
	const std::vector<counter_step> &sched(int slot) const { return slots_[slot].steps; }
	const std::string &sched_why(int slot) const { return slots_[slot].why; }
	const std::vector<counter_step> &blocked(int slot) const { return blocked_[slot].steps; }
	const std::string &blocked_why(int slot) const { return blocked_[slot].why; }
	const std::vector<counter_step> &guard_skips(int slot) const { return gskips_[slot].steps; }
	const std::string &guard_skips_why(int slot) const { return gskips_[slot].why; }
	const std::vector<counter_step> &thp() const { return thp_.steps; }
	const std::string &thp_why() const { return thp_.why; }
	// The skipped runs' steps, and where the clock's count for the
	// scenario, @total, is more than they add up to (runs skipped after
	// the last reading), one more step from that reading on.
	std::vector<counter_step> skips(uint64_t total) const;

private:
	struct counter {
		int fd = -1;
		bool have = false; // a reading was taken
		int64_t last = 0, last_from_us = 0;
		std::vector<counter_step> steps;
		std::string why = "no thread watched";
		void note(int64_t value, int64_t from_us, int64_t to_us);
	};
	int64_t t0_ns_;
	bool read_skips_;
	counter slots_[max_threads];
	counter blocked_[max_threads];		// fd: /proc/self/task/<tid>/sched
	counter gskips_[max_threads];		// fd unused: progs_ holds them
	std::vector<int> progs_[max_threads];	// the caller's fds
	std::atomic<unsigned> live_{0};		// bit per slot, published after its fd
	std::atomic<unsigned> live_blocked_{0}; // the same, for blocked_
	std::atomic<unsigned> live_progs_{0};	// the same, for progs_
	counter thp_;				// fd: /proc/vmstat
	counter skips_;
	int64_t last_read_us_ = 0;
};

// The ids of this process's threads now (/proc/self/task).
std::set<int> task_ids();
// The one thread of @after that @before lacks; where several are new,
// the one named @name; 0 where none can be told.
int new_thread(const std::set<int> &before, const std::set<int> &after, const char *name);

// How long of [@start_us, @end_us] the thread whose steps are @steps is
// known to have waited runnable and not run (a lower bound): a step whose
// first reading lies inside counts what it grew, less what can lie
// outside: before the dip, the part of its first wait further back than
// the first reading (the waits end one after another between the two
// readings, so only the first can have begun before), and after the dip,
// up to the time from the dip's end to the second reading
// (docs/contract.md).
int64_t sched_wait_us(const std::vector<counter_step> &steps, int64_t start_us, int64_t end_us);

// Whether the kernel may have skipped a clock program run between
// @start_us and @end_us: a step of @steps (cycle_watch::skips()) overlaps
// it.
bool skipped_during(const std::vector<counter_step> &steps, int64_t start_us, int64_t end_us);

} // namespace sockbuf::contract
