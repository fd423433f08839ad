// SPDX-License-Identifier: MIT
// A scenario: traffic of one shape, run with every arm side by side in its
// own network namespace, bounded in bytes and seconds.
#pragma once

#include "clauses.h"
#include "conn.h"
#include "cutter.h"
#include "model.h"
#include "sampler.h"
#include "served.h"

#include <functional>
#include <string>
#include <vector>

namespace sockbuf::contract
{

struct profile {
	bool quick = true;
	bool allow_global = false; // may change host-wide settings (qemu guest)
	bool privileged = false;   // CAP_NET_ADMIN in the initial namespace
	uint32_t sample_period_us = 500;
	// The floor guards' polling interval: the library's usual 10 ms (the
	// events driver's safety net keeps the library's default, a minute).
	uint32_t guard_period_us = 10000;
	// The floor guard's driver of a scenario's first lib_initial
	// connection (int(guard_driver)); the arm's connections alternate
	// from it.  -1: alternate with the scenario's place in
	// all_scenarios().
	int first_driver = -1;
	// The seed of the cuts scenarios make on purpose (scenario_plan::cuts);
	// 0: one from the clock, reported in the scenario's notes.
	uint64_t seed = 0;
	// The daemon mode's intervals (scenario_plan::daemon_mode).
	daemon_spec daemon;
	// What a guard's pass may cost in C3's bounds (clauses.h).
	pass_cost cost;
};

// Test hooks: change what a run sees, to prove the suite can fail.
struct run_hooks {
	setup_hooks setup;
	sample_filter filter;
	// Runs on its own thread once traffic started; must return by itself
	// (bounded) and is joined after the traffic ends.
	std::function<void(connection_set &, int64_t t0_ns)> during;
	// After the traffic and the floor guard's schedule stopped, before
	// the end-of-run snapshot that C3 and C7 judge.
	std::function<void(connection_set &)> at_end;
};

// The traffic itself: move bytes over @set's connections until done or
// @deadline_ns, checking every byte into @data.
using traffic_fn = std::function<void(connection_set &set, int64_t deadline_ns, integrity *data)>;

struct scenario_plan {
	std::vector<arm> arms; // one entry per connection
	arm_sizes sizes;
	double seconds = 5;
	bool needs_growth = false;
	// Why C2 is not judged when needs_growth is false.
	std::string no_growth_reason = "traffic here does not need more than the initial size";
	traffic_fn traffic;
	// Optional: set up inside the namespace before connections (tc, sysctl).
	// Returns "" or a skip reason.
	std::function<std::string()> prepare;
	std::function<void()> cleanup;
	// Optional: runs on its own thread while traffic flows (bounded).
	std::function<void(connection_set &, int64_t t0_ns)> during;
	// Cuts from outside (harness/cutter.h): count 0, none.  The seed is
	// the profile's.
	cut_spec cuts;
	// The lib_initial connections rotate over the daemon mode too
	// (harness/served.h): a sockbufd of the scenario's own serves them.
	bool daemon_mode = false;
	std::vector<std::string> notes;
};

struct scenario_spec {
	const char *name;
	const char *summary;
	// Builds the plan for a profile; returns "" or a skip reason.
	std::function<std::string(const profile &, scenario_plan *)> plan;
};

// Every arm @per_arm times, interleaved.
std::vector<arm> arms_times(int per_arm);

// Runs @spec in the current (fresh) namespace; fills @out.
void run_scenario(const scenario_spec &spec, const profile &prof, const run_hooks &hooks,
		  scenario_result *out);

const std::vector<scenario_spec> &all_scenarios();

} // namespace sockbuf::contract
