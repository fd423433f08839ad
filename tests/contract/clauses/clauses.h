// SPDX-License-Identifier: MIT
// The clauses of docs/contract.md, one judge each.  A judge reads one
// scenario's result and gives two verdicts: the raw kernel property (plain
// setsockopt, no library) and the library guarantee (sockbuf calls, with
// the floor restored when sockbuf_check_floor reports a violation).
#pragma once

#include "model.h"

#include <sockbuf/sockbuf.h>

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

// What C3 (library) allows a guard's pass over @sockets sockets, in
// microseconds: a fixed cost plus a cost per socket.  The defaults are
// this suite's constants (docs/contract.md, "Bounds known in advance",
// says how they were measured); `sockbuf-contract --pass-cost F,S` sets
// them for a slower machine (a qemu guest without KVM), before the run,
// and the JSON records the ones used.  Nothing the guard measures of
// itself enters a bound: a guard that sleeps in its pass fails, however
// long it says it slept.
struct pass_cost {
	int64_t fixed_us = 5000;
	int64_t per_socket_us = 20;
};
inline constexpr pass_cost default_pass_cost{};
inline int64_t guard_pass_cost_us(int64_t sockets, const pass_cost &c = default_pass_cost)
{
	return c.fixed_us + std::max<int64_t>(0, sockets) * c.per_socket_us;
}

// How long a library-guarded buffer may stay under its floor when a
// polling guard holds it, from its configuration alone: one period of
// the guard's passes plus one pass (a cut just after the pass read the
// socket waits for the next pass to reach it), a pass costing
// guard_pass_cost_us(@sockets).  The period is the interval, or more when
// passes are long: the library's thread rests at least as long as a pass
// took (it never takes more than half a core), so it is twice the pass
// there; the caller's loop around sockbuf_guard_timerfd() passes again as
// soon as it can (@rests false).  Time the guard's thread spent runnable
// and not run is the scheduler's, measured by the judge apart
// (harness/floor_judge.h, sched_wait_us), never part of the bound.
// Recorded per scenario and driver as guard_stats.bound_us; for an events
// guard it is the safety net's bound (its interval).
inline int64_t repair_bound_us(int64_t interval_us, int64_t sockets, bool rests = true,
			       const pass_cost &c = default_pass_cost)
{
	const int64_t pass = guard_pass_cost_us(sockets, c);
	const int64_t period = std::max(interval_us, (rests ? 2 : 1) * pass);
	return period + pass;
}

// How long a cut that an events guard's programs saw may last: the
// header's SOCKBUF_GUARD_EVENT_BOUND_US.
inline constexpr int64_t guard_event_bound_us = SOCKBUF_GUARD_EVENT_BOUND_US;

// How long a cut may last when the kernel skipped a run of the events
// guard's own programs during it (the cut may have posted nothing): the
// guard's thread reads the skipped runs at least once a second
// (sockbuf_guard_event_totals.lost), then makes a full pass; the event
// bound covers that pass.
inline constexpr int64_t guard_skip_bound_us = 1'000'000 + guard_event_bound_us;

} // namespace sockbuf::contract
