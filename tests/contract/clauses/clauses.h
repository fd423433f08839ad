// SPDX-License-Identifier: MIT
// The clauses of docs/contract.md, one judge each.  A judge reads one
// scenario's result and gives two verdicts: the raw kernel property (plain
// setsockopt, no library) and the library guarantee (sockbuf calls, with
// the floor restored when sockbuf_check_floor reports a violation).
#pragma once

#include "model.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sockbuf::contract
{

struct clause_info {
	const char *id;
	const char *title;
	verdict (*judge)(const scenario_result &);
};

const std::vector<clause_info> &all_clauses();

// Every judge; the pseudo-clause "I" (integrity) first.
std::vector<verdict> judge_all(const scenario_result &r, const std::vector<std::string> &only);

verdict judge_c1(const scenario_result &r);
verdict judge_c2(const scenario_result &r);
verdict judge_c3(const scenario_result &r);
verdict judge_c4(const scenario_result &r);
verdict judge_c5(const scenario_result &r);
verdict judge_c6(const scenario_result &r);
verdict judge_c7(const scenario_result &r);
verdict judge_integrity(const scenario_result &r);

// C2's test on one arm (public so the suite's own tests can aim it at a
// locked arm, which must fail).
half_verdict judge_growth(const scenario_result &r, arm a);

// How long a library-guarded buffer may stay under its floor before the
// guard's restore counts as too late: the documented bound, one period of
// the guard's passes plus its longest pass (max_pass_ns of
// sockbuf_guard_stats(); a cut just after the pass read the socket waits
// for the next pass to reach it), plus the time the thread that runs the
// passes was scheduled late.  The period is the interval, or more when
// passes are long: the library's thread rests at least as long as a pass
// took (it never takes more than half a core), so it is twice the longest
// pass there; the caller's loop around sockbuf_guard_timerfd() passes
// again as soon as it can (@rests false).  Both threads run with an
// application's ordinary scheduling, which the library cannot promise
// away on a loaded machine: the guard measures how late its due passes
// began (max_late_us of sockbuf_guard_stats()), and the bound allows
// that, or this allowance where the guard saw less (a pass can be due and
// not yet begun when the run ends, unmeasured).  Recorded per scenario
// and driver as guard_stats.bound_us.
inline constexpr int64_t guard_sched_allowance_us = 50'000;
inline int64_t repair_bound_us(int64_t interval_us, int64_t max_pass_us, int64_t max_late_us,
			       bool rests = true)
{
	const int64_t period = std::max(interval_us, (rests ? 2 : 1) * max_pass_us);
	return period + max_pass_us + std::max(guard_sched_allowance_us, max_late_us);
}
// The bound of a result that predates guard_stats.bound_us.
inline int64_t repair_bound_us_of(const guard_stats &g)
{
	return g.bound_us > 0 ? g.bound_us : guard_sched_allowance_us;
}

} // namespace sockbuf::contract
