// SPDX-License-Identifier: MIT
#include "floor_judge.h"

#include "clauses.h"
#include "cycle_watch.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>

namespace sockbuf::contract
{

namespace
{

// The kernel clock's id of the socket-option write (sk_setsockopt(), or
// sock_setsockopt() before 6.0): a write that cuts or that restores.
constexpr int setsockopt_fn = 7;

// Whether the guard's programs (SOCKBUF_GUARD_EV_* bits @attached) watch
// the kernel clock's cut point @id (judge/floor_judge.bpf.c's order).
bool guard_watches(int id, unsigned attached)
{
	switch (id) {
	case 0:
		return attached & SOCKBUF_GUARD_EV_MEM_RAISE;
	case 1:
		return attached &
		       (SOCKBUF_GUARD_EV_CHECK_SPACE | SOCKBUF_GUARD_EV_DUNDER_CHECK_SPACE);
	case 2:
		return attached & SOCKBUF_GUARD_EV_FRAG_REFILL;
	case 3:
		return attached &
		       (SOCKBUF_GUARD_EV_ALLOC_SKB | SOCKBUF_GUARD_EV_SK_STREAM_ALLOC_SKB);
	case setsockopt_fn:
		return attached & SOCKBUF_GUARD_EV_SK_SETSOCKOPT;
	default:
		return false;
	}
}

// A kernel dip's end_fn when the samples ended it (sampled_end()).
constexpr int ended_by_samples = -2;

// How a judged kernel dip ended, in words.
std::string end_words(const floor_clock &c, int end_fn)
{
	if (end_fn == ended_by_samples)
		return "back at or above by the samples (the clock missed its end)";
	if (end_fn < 0)
		return "still below at the end";
	return fmt::format("back at {}", c.function(end_fn));
}

// Slack when matching a sampled dip to a kernel one, and where the
// samples end a kernel dip: a cycle's samples carry the cycle's start
// time, read up to a cycle later, and a cycle can take far longer than
// its mean (the longest one, max_cycle_us).
int64_t match_slack_us(const scenario_result &r)
{
	return std::max({int64_t(2000), int64_t(2 * r.sampler.mean_cycle_us),
			 int64_t(r.sampler.max_cycle_us) + 1});
}

// How many dips each mode lists for the report (the longest).
constexpr size_t listed = 8;

void keep_longest(std::vector<judged_dip> *v, const judged_dip &j)
{
	v->push_back(j);
	std::sort(v->begin(), v->end(),
		  [](const judged_dip &a, const judged_dip &b) { return a.us > b.us; });
	if (v->size() > listed)
		v->pop_back();
}

// A sampled dip the kernel's clock saw: its first and its last sample
// under the floor each fall within a kernel dip (not necessarily one:
// between two samples the guard may restore and the kernel cut again).
// One that does not, the clock missed, in part or whole.
bool covered(const std::vector<kernel_dip> &k, const dip &d, int64_t slack)
{
	auto within = [&](int64_t t) {
		return std::any_of(k.begin(), k.end(), [&](const kernel_dip &x) {
			return x.start_us - slack <= t && t <= x.end_us + slack;
		});
	};
	return within(d.first_us) && within(d.last_us);
}

// The latest a kernel dip beginning at @start_us can have ended, by the
// samples: their first reading at or above the floor from then on (a
// sample's reading falls within @slack of its time).  A kernel dip that
// lasts past it was not one dip: the clock missed its end, and a later
// cut began another, which the samples judge.  A run of the programs the
// kernel skips (one program's run on a CPU that is already running it: a
// softirq over a process-context run) is such a miss.  -1: the samples
// show none (sampling ended below).
int64_t sampled_end(const dip_log &log, int64_t start_us, int64_t max_gap_us, int64_t slack)
{
	for (const auto &d : log.dips) {
		// Samples at or above the floor lie outside the sampled dips: at
		// d.before_us, d.after_us and every sample between two dips.
		if (d.before_us >= 0 && start_us < d.before_us)
			break; // start_us lies between dips: the next sample is above
		if (start_us < d.after_us || d.after_us < 0)
			return d.after_us < 0 ? -1 : d.after_us + slack;
	}
	return start_us + max_gap_us + slack;
}

} // namespace

std::string mode_name(arm a, guard_driver d)
{
	return a == arm::lib_reserve ? "reserve" : driver_name(d);
}

floor_judgment judge_floors(const scenario_result &r)
{
	floor_judgment fj;
	fj.kernel = r.clock.kernel && r.clock.lost == 0;
	fj.why = r.clock.why.empty() ? "no kernel clock in this result" : r.clock.why;
	const int64_t slack = match_slack_us(r);
	const int64_t cycle_us = int64_t(r.sampler.max_cycle_us) + 1;
	for (const auto &g : r.guards) {
		if (!g.sockets)
			continue;
		mode_judgment m;
		m.a = g.a;
		m.d = driver_from_name(g.driver);
		m.mode = mode_name(m.a, m.d);
		m.sockets = g.sockets;
		m.interval_us = g.interval_us;
		m.net_bound_us = g.bound_us;
		m.events_on = m.d == guard_driver::events && g.events_err == 0;
		// From the configuration alone (clauses.h): nothing the guard
		// measured of itself.
		m.bound_us = m.events_on ? guard_event_bound_us : g.bound_us;
		m.sched_why = g.sched_why.empty() && g.tid == 0 ? "the guard's thread was not found"
								: g.sched_why;
		// The guard's thread's wait inside [@from, @to], read by the
		// judge from the kernel (0 where it could not be read).
		auto excused = [&](int64_t from, int64_t to) -> int64_t {
			if (!m.sched_why.empty() || to <= from)
				return 0;
			return sched_wait_us(g.sched, from, to);
		};
		m.blocked_why = m.sched_why.empty() ? g.blocked_why : m.sched_why;
		m.thp_why = r.clock.thp_why;
		m.guard_skips_why = m.events_on ? g.skips_why : "";
		m.skip_bound_us = m.events_on ? guard_skip_bound_us : 0;
		for (const auto &s : g.skips)
			m.guard_skipped_runs += s.grew;
		// What else the judge read of [@from, @to] (reported, never
		// excused), and whether the guard's programs skipped a run.
		auto annotate = [&](judged_dip *j, int64_t from, int64_t to) {
			if (m.blocked_why.empty() && to > from)
				j->blocked_us = sched_wait_us(g.blocked, from, to);
			if (m.thp_why.empty()) {
				j->thp_collapses = 0;
				for (const auto &s : r.clock.thp)
					if (s.from_us <= to && s.to_us >= from)
						j->thp_collapses += s.grew;
			}
			m.max_blocked_us = std::max(m.max_blocked_us, j->blocked_us);
			j->guard_skipped = m.events_on && m.guard_skips_why.empty() &&
					   skipped_during(g.skips, from, to);
			if (j->guard_skipped) {
				m.guard_skip_dips++;
				j->bound_us = std::max(j->bound_us, m.skip_bound_us);
				j->how += ", a run of the guard's programs skipped during it";
			}
		};
		m.late_us = m.events_on ? g.max_wait_us : g.max_late_us;
		m.pass_late_us = g.max_late_us;
		m.restored_by_record = g.restored_events;
		std::vector<int64_t> lengths;
		for (const auto &s : r.sockets) {
			if (s.a != m.a || s.driver != m.d || s.r == role::listener)
				continue;
			struct one_dir {
				const char *name;
				const dip_log &log;
				const std::vector<kernel_dip> &k;
				int floor;
				int64_t max_gap_us; // the longest the samples left it unread
			};
			for (const one_dir &od :
			     {one_dir{"SO_SNDBUF", s.snd_dips, s.snd_kdips, s.snd.floor,
				      std::max(s.gs_snd.max_gap_us, s.diag_snd.max_gap_us)},
			      one_dir{"SO_RCVBUF", s.rcv_dips, s.rcv_kdips, s.rcv.floor,
				      std::max(s.gs_rcv.max_gap_us, s.diag_rcv.max_gap_us)}}) {
				if (od.floor <= 0)
					continue;
				// The kernel's dips, each ended no later than the samples
				// saw it end.
				std::vector<kernel_dip> kd;
				if (fj.kernel)
					kd = od.k;
				for (kernel_dip &k : kd) {
					const int64_t seen_end =
					    sampled_end(od.log, k.start_us, od.max_gap_us, slack);
					if (seen_end >= 0 && seen_end < k.end_us) {
						k.end_us = seen_end;
						k.end_fn = ended_by_samples;
						fj.cut_by_samples++;
					}
					const bool at_cut = r.clock.cut_point(k.start_fn);
					// A cut point, or a socket-option write (anyone's:
					// the cuts scenario's, a program's own), that this
					// kernel's guard has a program on.
					const bool watched =
					    m.events_on &&
					    (at_cut || k.start_fn == setsockopt_fn) &&
					    guard_watches(k.start_fn, g.attached);
					// The safety net's promise: a write or a cut point
					// this kernel's guard has no program on.
					const bool net = m.events_on && !watched &&
							 (k.start_fn == setsockopt_fn || at_cut);
					// The clock saw it begin where no cut is made: it
					// missed the cut, which may have been a watched one.
					const bool unsure = m.events_on && !watched && !net;
					const int64_t b = net ? m.net_bound_us : m.bound_us;
					lengths.push_back(k.us());
					m.cuts_by_function[r.clock.function(k.start_fn)]++;
					if (watched) {
						m.watched_cuts++;
						if (k.end_fn == setsockopt_fn)
							m.written_back++;
					}
					judged_dip j = {&s,
							od.name,
							k.start_us,
							k.us(),
							-1,
							b,
							fmt::format("left below in {}, {}",
								    r.clock.function(k.start_fn),
								    end_words(r.clock, k.end_fn)),
							excused(k.start_us, k.end_us)};
					annotate(&j, k.start_us, k.end_us);
					m.max_sched_wait_us =
					    std::max(m.max_sched_wait_us, j.sched_wait_us);
					keep_longest(&m.longest, j);
					const bool skipped =
					    skipped_during(r.clock.skips, k.start_us, k.end_us);
					if (skipped) {
						// A run the kernel skipped may have been this
						// dip's beginning or its end.
						m.skipped_dips++;
						j.how += ", a run of the clock's programs skipped "
							 "during it";
						j.seen_us = 0;
						m.unproven.push_back(j);
						continue;
					}
					if (k.us() - j.sched_wait_us <= j.bound_us)
						continue;
					// Ended by the samples: its end is an upper bound
					// (at least 0 ms, as far as anything says).
					if (k.end_fn == ended_by_samples || unsure) {
						if (unsure)
							j.how +=
							    ", a function the guard does not watch "
							    "(where the cut was made is unknown)";
						j.seen_us = 0;
						m.unproven.push_back(j);
					} else
						m.over.push_back(j);
				}
				// Sampled dips: all of them without the kernel clock;
				// with it, those it did not see (missed), held to the
				// mode's bound as the samples time them.
				for (const auto &d : od.log.dips) {
					if (fj.kernel && covered(kd, d, slack))
						continue;
					if (fj.kernel)
						fj.missed++;
					// Without the kernel clock nothing says where a dip
					// began: the events modes' net bound holds, and the
					// mode is unverified (events_unjudged below).
					const int64_t b =
					    m.events_on && !fj.kernel ? m.net_bound_us : m.bound_us;
					lengths.push_back(d.us());
					m.dips_seen++;
					// Below for certain from its first sample's reading
					// (up to a cycle after its time) to its last's.
					judged_dip j = {&s,
							od.name,
							d.first_us,
							d.us(),
							d.seen_us(),
							b,
							fj.kernel
							    ? "between samples (the kernel clock "
							      "missed it)"
							    : "between samples",
							excused(d.first_us + cycle_us, d.last_us)};
					annotate(&j, d.first_us, d.last_us);
					m.max_sched_wait_us =
					    std::max(m.max_sched_wait_us, j.sched_wait_us);
					keep_longest(&m.longest, j);
					if (d.seen_us() - j.sched_wait_us > j.bound_us)
						m.over.push_back(j);
					else if (d.us() - j.sched_wait_us > j.bound_us)
						m.unproven.push_back(j);
				}
			}
		}
		if (!fj.kernel && m.events_on) {
			// The samples cannot say which dips the programs saw: none
			// is held to the event bound, so a dip leaves the mode
			// unverified, whatever the net's bound allows.
			m.bound_us = m.net_bound_us;
			m.events_unjudged = m.dips_seen > 0;
		}
		m.no_record_restores =
		    fj.kernel && m.events_on && m.written_back > 0 && m.restored_by_record == 0;
		m.dips = summarize_dips(std::move(lengths));
		fj.modes.push_back(std::move(m));
	}
	return fj;
}

} // namespace sockbuf::contract
