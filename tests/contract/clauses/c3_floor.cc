// SPDX-License-Identifier: MIT
// C3: floor: during the connection's life the buffer never reads below
// the floor.
//
// Raw: a socket set up with setsockopt + SO_BUF_LOCK 0 and left alone; no
// sample (getsockopt or inet_diag) may read under min(request, effective).
// Library: sockbuf_set_initial_bufsize plus the library's floor guard,
// driven by its own thread or by a timerfd in a poll() loop (guard.h);
// a dip (one buffer, both sources, first to last sample under the floor)
// is allowed only if it lasted no longer than the bound of the socket's
// driver (repair_bound_us_of: interval, longest pass, and how late the
// guard's passes began, at least a scheduling allowance), and the buffer ends at or above the floor
// (read after the drivers stopped, before anything restores it). The library half has a time bound,
// so it can only pass when each socket's samples are closer together than the bound of the guard
// that holds it (the thread driver's bound is not the events driver's): a longer gap could hide a
// dip the guard never repaired, and the verdict is then "unverified". Library, reserve mode:
// sockbuf_set_initial_bufsize with SOCKBUF_F_RESERVE_MEM, then a floor guard made with
// SOCKBUF_GUARD_RESERVE_MEM | SOCKBUF_GUARD_EVENTS, its safety net at the
// polling interval.  The promise is the guard's, "restored within one
// interval plus one pass", judged like the guarded arm against the bound
// of that guard: on 5.16+ the kernel's reserve rule
// (tcp_should_expand_sndbuf()) sets a reserved socket's send buffer to the
// unused reservation under TCP memory pressure, below any floor a
// reservation of a few floors can keep (docs/contract.md, "Reserve
// mode"), so "never below" is not a promise the library can make.
#include "clauses.h"
#include "common.h"
#include "dips.h"

#include <cstring>
#include <utility>

namespace sockbuf::contract
{

namespace
{

struct named_track {
	const track *t;
	const char *what;
	int floor;
};

std::vector<named_track> tracks_of(const socket_record &s)
{
	return {{&s.gs_snd, "SO_SNDBUF (getsockopt)", s.snd.floor},
		{&s.gs_rcv, "SO_RCVBUF (getsockopt)", s.rcv.floor},
		{&s.diag_snd, "SK_MEMINFO_SNDBUF (inet_diag)", s.snd.floor},
		{&s.diag_rcv, "SK_MEMINFO_RCVBUF (inet_diag)", s.rcv.floor}};
}

// The longest time a buffer went unread, and where.
struct widest_gap {
	int64_t us = 0;
	std::string where;
};

void widen(widest_gap *g, int64_t us, const std::string &where)
{
	if (us > g->us) {
		g->us = us;
		g->where = where;
	}
}

// The socket whose samples came closest to (or past) its own guard's
// bound: the one a verified pass depends on most, or the one that leaves
// the verdict unverified.
struct tightest_socket {
	int64_t gap_us = -1, bound_us = 0;
	std::string where, guard;

	void offer(int64_t gap, int64_t bound, const std::string &w, const std::string &g)
	{
		// gap/bound compared without division: gap * bound_us > gap_us * bound.
		if (gap_us >= 0 && double(gap) * double(bound_us) <= double(gap_us) * double(bound))
			return;
		gap_us = gap;
		bound_us = bound;
		where = w;
		guard = g;
	}
	bool past() const { return gap_us > bound_us; }
};

// A C3 violation carries the socket's memory state at its first inet_diag
// sample under the floor: the queues say what moderation could cut to.
void add_c3_violation(half_verdict *h, const scenario_result &r, const socket_record &s,
		      std::string what, double t_ms, int64_t value, int64_t floor)
{
	add_violation(h, "C3", r, s, std::move(what), t_ms, value, floor);
	h->violations.back().mem = s.first_below_mem;
}

// The guard of a lib_initial or lib_reserve socket; a result without
// per-driver figures (older, or a guard that never started) has the sum.
const guard_stats &guard_of(const scenario_result &r, arm a, guard_driver d)
{
	for (const auto &g : r.guards)
		if (g.a == a && g.driver == driver_name(d))
			return g;
	return r.guard;
}

// "events driver" or "reserve mode's events driver".
std::string guard_name(arm a, const std::string &driver)
{
	return a == arm::lib_reserve ? fmt::format("reserve mode's {} driver", driver)
				     : fmt::format("{} driver", driver);
}

// One direction of a socket, both sources together.
struct named_dir {
	const dip_log *log;
	const char *name;
	std::string sources; // the sources that read it under the floor
	int64_t lowest;	     // the lowest such reading
	int floor;
};

std::vector<named_dir> dirs_of(const socket_record &s)
{
	std::vector<named_dir> out;
	auto one = [&](const dip_log &l, const char *name, const track &gs, const track &dg,
		       int floor) {
		named_dir d = {&l, name, "", -1, floor};
		using source_track = std::pair<const track *, const char *>;
		for (const auto &[t, src] :
		     {source_track{&gs, "getsockopt"}, source_track{&dg, "inet_diag"}}) {
			if (!t->below_floor)
				continue;
			d.sources += (d.sources.empty() ? "" : ", ") + std::string(src);
			if (d.lowest < 0 || t->lowest_below < d.lowest)
				d.lowest = t->lowest_below;
		}
		out.push_back(std::move(d));
	};
	one(s.snd_dips, "SO_SNDBUF", s.gs_snd, s.diag_snd, s.snd.floor);
	one(s.rcv_dips, "SO_RCVBUF", s.gs_rcv, s.diag_rcv, s.rcv.floor);
	return out;
}

// "thread driver on 2 sockets (bound 51.0 ms): 3 dips, p50/p99/max
// 0.5/1.2/1.2 ms, 3 restores; timerfd driver ...": which driver each
// figure judged.
std::string drivers_text(const scenario_result &r)
{
	std::string out;
	for (const auto &g : r.guards) {
		dip_summary ds = dips_of(r, g.a, driver_from_name(g.driver));
		// Lateness past the allowance widened the bound: say so.
		const std::string late =
		    g.max_late_us > guard_sched_allowance_us
			? fmt::format(", passes up to {:.1f} ms late", double(g.max_late_us) / 1e3)
			: "";
		out += fmt::format(
		    "{}{} on {} sockets (bound {:.1f} ms{}): ", out.empty() ? "" : "; ",
		    guard_name(g.a, g.driver), g.sockets, double(g.bound_us) / 1e3, late);
		if (ds.count)
			out += fmt::format("{} dips, p50/p99/max {:.1f}/{:.1f}/{:.1f} ms under, ",
					   ds.count, double(ds.p50_us) / 1e3,
					   double(ds.p99_us) / 1e3, double(ds.max_us) / 1e3);
		else
			out += "none under the floor, ";
		out += fmt::format("{} restores by the library's guard", g.restores);
	}
	return out.empty() ? "no floor guard ran" : out;
}

} // namespace

verdict judge_c3(const scenario_result &r)
{
	verdict v = make_verdict("C3", r);
	// With no guarded socket to judge gaps by, the shortest bound of the
	// drivers (r.guard sums them up).
	const int64_t bound = repair_bound_us_of(r.guard);
	uint64_t samples = 0;
	// Raw has no time bound (any sample under the floor fails it); its
	// longest gap is stated so that a reader sees how short a dip could
	// have gone unseen.
	widest_gap raw_gap;
	widen(&raw_gap, int64_t(r.sampler.max_gap_ms * 1e3), "between sampling cycles");
	int n = for_arm(r, arm::raw_unlock, [&](const socket_record &s) {
		for (const auto &nt : tracks_of(s)) {
			samples += nt.t->samples;
			if (nt.t->samples)
				widen(&raw_gap, nt.t->max_gap_us, nt.what);
			if (nt.floor > 0 && nt.t->below_floor)
				add_c3_violation(&v.raw, r, s, nt.what,
						 double(nt.t->first_below_us) / 1e3,
						 nt.t->lowest_below, nt.floor);
		}
	});
	const char *sources = r.sampler.diag_err ? " (getsockopt only: inet_diag unavailable)" : "";
	settle(&v.raw, n,
	       fmt::format("{} sockets, {} samples (gaps up to {:.1f} ms), none under the floor{}",
			   n, samples, double(raw_gap.us) / 1e3, sources),
	       "no raw sockets");

	samples = 0;
	widest_gap gap;
	// The scenario-wide gap (between sampling cycles) counts too: a
	// per-track figure must never hide it.
	const int64_t cycle_gap_us = int64_t(r.sampler.max_gap_ms * 1e3);
	widen(&gap, cycle_gap_us, "between sampling cycles");
	tightest_socket tight;
	int reserved = 0, unreserved = 0, reserve_err = 0;
	auto guarded = [&](const socket_record &s) {
		if (s.a == arm::lib_reserve) {
			if (s.reserved) {
				reserved++;
			} else {
				unreserved++;
				if (!reserve_err)
					reserve_err = s.reserve_err;
			}
		}
		uint64_t seen = 0;
		// This socket's own widest gap, the cycles' included.
		widest_gap mine;
		widen(&mine, cycle_gap_us, fmt::format("{}, between sampling cycles", s.name));
		for (const auto &nt : tracks_of(s)) {
			samples += nt.t->samples;
			seen += nt.t->samples;
			// A track with no sample is a source that did not answer
			// (inet_diag missing); the other source still covers it.
			if (nt.t->samples)
				widen(&mine, nt.t->max_gap_us,
				      fmt::format("{} {}", s.name, nt.what));
		}
		// A dip is judged per direction, over both sources, against
		// the bound of the guard that held this socket; so are its gaps.
		const std::string gn = guard_name(s.a, driver_name(s.driver));
		const int64_t b = repair_bound_us_of(guard_of(r, s.a, s.driver));
		for (const auto &d : dirs_of(s)) {
			const dip &longest = d.log->longest();
			if (d.floor <= 0 || longest.first_us < 0 || longest.us() <= b)
				continue;
			add_c3_violation(&v.lib, r, s,
					 fmt::format("{} ({}) under the floor for {:.1f} ms ({}, "
						     "bound {:.1f} ms)",
						     d.name, d.sources, double(longest.us()) / 1e3,
						     gn, double(b) / 1e3),
					 double(longest.first_us) / 1e3, d.lowest, d.floor);
		}
		if (seen == 0)
			widen(&mine, int64_t(r.seconds * 1e6),
			      fmt::format("{} (never sampled)", s.name));
		// The scenario's widest gap is the widest of its sockets'; it
		// already holds the cycles' gap under its own name.
		widen(&gap, mine.us, mine.where);
		tight.offer(mine.us, b, mine.where, gn);
		if (s.after.taken && s.snd.floor > 0 && s.after.gs_snd < s.snd.floor)
			add_c3_violation(&v.lib, r, s, fmt::format("SO_SNDBUF at the end ({})", gn),
					 -1, s.after.gs_snd, s.snd.floor);
		if (s.after.taken && s.rcv.floor > 0 && s.after.gs_rcv < s.rcv.floor)
			add_c3_violation(&v.lib, r, s, fmt::format("SO_RCVBUF at the end ({})", gn),
					 -1, s.after.gs_rcv, s.rcv.floor);
	};
	n = for_arm(r, arm::lib_initial, guarded);
	const int n_reserve = for_arm(r, arm::lib_reserve, guarded);
	if (r.guard.restore_errors)
		v.lib.violations.push_back({"C3",
					    r.name,
					    "floor guard",
					    "restore_floor failed",
					    -1,
					    int64_t(r.guard.restore_errors),
					    0,
					    {}});
	std::string why = fmt::format("{} sockets, {} samples (gaps up to {:.1f} ms){}", n, samples,
				      double(gap.us) / 1e3, sources);
	why += "; " + drivers_text(r);
	if (n_reserve)
		why += fmt::format("; reserve mode: {} sockets, {} with SO_RESERVE_MEM in force",
				   n_reserve, reserved);
	if (unreserved)
		why += fmt::format(" ({} without: {})", unreserved, std::strerror(-reserve_err));
	if (n_reserve) {
		// Where the dips were: the promise differs with the reservation.
		const dip_summary in = dips_of(r, arm::lib_reserve, std::nullopt, true);
		const dip_summary out = dips_of(r, arm::lib_reserve, std::nullopt, false);
		why += fmt::format("; dips: {} with the reservation in force (max {:.1f} ms), {} "
				   "without (max {:.1f} ms)",
				   in.count, double(in.max_us) / 1e3, out.count,
				   double(out.max_us) / 1e3);
	}
	settle(&v.lib, n + n_reserve, why, "no library sockets");
	// The figures a reader (and kmatrix/outcome.py) checks the verdict
	// by: the tightest socket's gap and its own guard's bound.  Without
	// guarded sockets, the widest gap against the drivers' shortest bound.
	if (tight.gap_us < 0)
		tight.offer(gap.us, bound, gap.where, "the shortest of the drivers' bounds");
	v.lib.gap_ms = double(tight.gap_us) / 1e3;
	v.lib.bound_ms = double(tight.bound_us) / 1e3;
	if (v.lib.o == outcome::pass && tight.past()) {
		v.lib.o = outcome::unverified;
		v.lib.why =
		    fmt::format("samples up to {:.1f} ms apart ({}), longer than the {:.0f} ms "
				"repair bound of its guard ({}): a dip repaired too late "
				"could go unseen; seen: {}",
				v.lib.gap_ms, tight.where, v.lib.bound_ms, tight.guard, why);
	}
	return v;
}

} // namespace sockbuf::contract
