// SPDX-License-Identifier: MIT
// Client-to-server flows on every connection of a scenario, through the
// poll engine, with one sender and one reader policy; and the plan of one
// such flow per arm that most scenarios are made of.
#pragma once

#include "engine.h"
#include "scenario.h"

namespace sockbuf::contract
{

traffic_fn flow_traffic(uint64_t bytes_per_flow, send_policy sp, read_policy rp, int threads);

// Sizes most scenarios start from: below what bulk traffic needs, so
// autotuning has to grow them (C2) and the floor means something (C3).
inline arm_sizes default_sizes()
{
	return {131072, 131072, false};
}

// A value for quick runs and one for full runs.
template <class T> struct by_run {
	T quick, full;
	T of(const profile &p) const { return p.quick ? quick : full; }
};

// One flow per arm at default_sizes(), moved by two threads: all that
// differs between such plans.
struct one_flow {
	by_run<double> seconds;
	by_run<uint64_t> bytes; // per flow
	send_policy sp = {};
	read_policy rp = {};
	// Why C2 is not judged; nullptr: the flows need the buffers to grow.
	const char *no_growth_reason = nullptr;
};

// Fills @plan with @f as a run of profile @p has it.
void plan_one_flow(const profile &p, const one_flow &f, scenario_plan *plan);

// A scenario whose plan is @f's alone.
scenario_spec one_flow_scenario(const char *name, const char *summary, const one_flow &f);

} // namespace sockbuf::contract
