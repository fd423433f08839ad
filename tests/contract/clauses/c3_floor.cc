// SPDX-License-Identifier: MIT
// C3: floor: during the connection's life the buffer never reads below
// the floor.
//
// Raw: a socket set up with setsockopt + SO_BUF_LOCK 0 and left alone; no
// sample (getsockopt or inet_diag) may read under min(request, effective).
// Library: sockbuf_set_initial_bufsize plus the library's floor guard in
// each of its modes (guard.h): every dip of a guarded buffer is held to
// the promise of the mode that guarded it (harness/floor_judge.h), timed
// on the kernel's clock where the suite's programs load, else between the
// samples around it.  With the samples only, a dip seen longer than its
// bound fails, one whose upper bound alone is past it leaves the verdict
// "unverified", and so do samples further apart than the bound (a dip
// could hide between them).  The buffer must also end at or above the
// floor (read after the guards stopped, before anything restores it).
// Reserve mode (SOCKBUF_F_RESERVE_MEM, then a guard made with
// SOCKBUF_GUARD_RESERVE_MEM | SOCKBUF_GUARD_EVENTS in its default
// configuration) is an events guard: on 5.16+ the kernel's reserve rule
// (tcp_should_expand_sndbuf()) sets a reserved socket's send buffer to
// the unused reservation under TCP memory pressure, below any floor a
// reservation of a few floors can keep (docs/contract.md, "Reserve
// mode"), so "never below" is not a promise the library can make.
#include "clauses.h"
#include "common.h"
#include "dips.h"
#include "floor_judge.h"

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

// "kernel clock (fexit on ...); thread on 2 sockets (bound 15.1 ms,
// scheduler wait excused up to 1.3 ms): 3 dips, p50/p99/max
// 0.120/0.900/0.900 ms, 3 restores; ...": which clock, and what each
// mode's figures were held to.
std::string modes_text(const scenario_result &r, const floor_judgment &fj)
{
	std::string out = fj.kernel ? fmt::format("kernel clock ({})", fj.why)
				    : fmt::format("sampled clock, upper bounds ({})", fj.why);
	if (fj.missed)
		out += fmt::format(", {} dips seen only by the samples", fj.missed);
	for (const auto &m : fj.modes) {
		const guard_stats *g = nullptr;
		for (const auto &x : r.guards)
			if (x.a == m.a && x.driver == driver_name(m.d))
				g = &x;
		out += fmt::format("; {} on {} sockets (", m.mode, m.sockets);
		if (m.events_on)
			out += fmt::format("event bound {:.1f} ms, safety net {:.1f} ms",
					   double(m.bound_us) / 1e3, double(m.net_bound_us) / 1e3);
		else
			out += fmt::format("bound {:.1f} ms", double(m.bound_us) / 1e3);
		if (m.sched_why.empty())
			out += fmt::format(", scheduler wait excused up to {:.1f} ms): ",
					   double(m.max_sched_wait_us) / 1e3);
		else
			out += fmt::format(", no scheduler wait excused: {}): ", m.sched_why);
		if (m.dips.count)
			out +=
			    fmt::format("{} dips, p50/p99/max {:.3f}/{:.3f}/{:.3f} ms under, ",
					m.dips.count, double(m.dips.p50_us) / 1e3,
					double(m.dips.p99_us) / 1e3, double(m.dips.max_us) / 1e3);
		else
			out += "none under the floor, ";
		out += fmt::format("{} restores by the library's guard", g ? g->restores : 0);
		if (m.events_on)
			out += fmt::format(" ({} on a record)", m.restored_by_record);
	}
	return fj.modes.empty() ? out + "; no floor guard ran" : out;
}

// The bound a socket's samples are held to when only they can show a
// dip: its mode's, or the safety net's where events drive the guard (the
// samples cannot say where a cut was made).
int64_t sampled_bound(const floor_judgment &fj, const socket_record &s)
{
	for (const auto &m : fj.modes)
		if (m.a == s.a && m.d == s.driver)
			return m.events_on ? m.net_bound_us : m.bound_us;
	return 0;
}

} // namespace

verdict judge_c3(const scenario_result &r)
{
	verdict v = make_verdict("C3", r);
	const floor_judgment fj = judge_floors(r);
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
		if (seen == 0)
			widen(&mine, int64_t(r.seconds * 1e6),
			      fmt::format("{} (never sampled)", s.name));
		// The scenario's widest gap is the widest of its sockets'; it
		// already holds the cycles' gap under its own name.
		widen(&gap, mine.us, mine.where);
		const std::string gn = mode_name(s.a, s.driver);
		tight.offer(mine.us, sampled_bound(fj, s), mine.where, gn);
		if (s.after.taken && s.snd.floor > 0 && s.after.gs_snd < s.snd.floor)
			add_c3_violation(&v.lib, r, s, fmt::format("SO_SNDBUF at the end ({})", gn),
					 -1, s.after.gs_snd, s.snd.floor);
		if (s.after.taken && s.rcv.floor > 0 && s.after.gs_rcv < s.rcv.floor)
			add_c3_violation(&v.lib, r, s, fmt::format("SO_RCVBUF at the end ({})", gn),
					 -1, s.after.gs_rcv, s.rcv.floor);
	};
	n = for_arm(r, arm::lib_initial, guarded);
	const int n_reserve = for_arm(r, arm::lib_reserve, guarded);
	// Each dip past its mode's bound, with the lowest value the samples
	// read under the floor in that direction (-1: they never saw it).
	std::vector<const judged_dip *> unproven;
	for (const auto &m : fj.modes) {
		for (const auto &j : m.over) {
			int64_t lowest = -1;
			int floor = 0;
			std::string srcs;
			for (const auto &d : dirs_of(*j.s))
				if (std::strcmp(d.name, j.dir) == 0) {
					lowest = d.lowest;
					floor = d.floor;
					srcs = d.sources.empty() ? "" : " (" + d.sources + ")";
				}
			add_c3_violation(
			    &v.lib, r, *j.s,
			    fmt::format(
				"{}{} under the floor for {:.3f} ms ({}, bound {:.1f} ms, {}{})",
				j.dir, srcs, double(j.seen_us >= 0 ? j.seen_us : j.us) / 1e3,
				m.mode, double(j.bound_us) / 1e3, j.how,
				j.sched_wait_us
				    ? fmt::format(", {:.1f} ms of scheduler wait excused",
						  double(j.sched_wait_us) / 1e3)
				    : std::string()),
			    double(j.start_us) / 1e3, lowest, floor);
		}
		for (const auto &j : m.unproven)
			unproven.push_back(&j);
		if (m.no_record_restores)
			v.lib.violations.push_back(
			    {"C3",
			     r.name,
			     fmt::format("floor guard ({})", m.mode),
			     fmt::format(
				 "{} cuts at watched functions were written back, none on a "
				 "record",
				 m.written_back),
			     -1,
			     int64_t(m.restored_by_record),
			     1,
			     {}});
	}
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
	why += "; " + modes_text(r, fj);
	if (n_reserve)
		why += fmt::format("; reserve mode: {} sockets, {} with SO_RESERVE_MEM in force",
				   n_reserve, reserved);
	if (unreserved)
		why += fmt::format(" ({} without: {})", unreserved, std::strerror(-reserve_err));
	if (n_reserve) {
		// Where the samples saw dips: the promise differs with the
		// reservation.
		const dip_summary in = dips_of(r, arm::lib_reserve, std::nullopt, true);
		const dip_summary out = dips_of(r, arm::lib_reserve, std::nullopt, false);
		why += fmt::format("; dips: {} with the reservation in force (max {:.1f} ms), {} "
				   "without (max {:.1f} ms)",
				   in.count, double(in.max_us) / 1e3, out.count,
				   double(out.max_us) / 1e3);
	}
	settle(&v.lib, n + n_reserve, why, "no library sockets");
	if (tight.gap_us < 0)
		tight.offer(gap.us, 0, gap.where, "no guarded socket");
	v.lib.gap_ms = double(tight.gap_us) / 1e3;
	v.lib.bound_ms = double(tight.bound_us) / 1e3;
	if (v.lib.o != outcome::pass)
		return v;
	const mode_judgment *unjudged = nullptr;
	for (const auto &m : fj.modes)
		if (m.events_unjudged && !unjudged)
			unjudged = &m;
	if (!unproven.empty()) {
		const judged_dip &j = *unproven.front();
		v.lib.o = outcome::unverified;
		v.lib.why = fmt::format(
		    "{} dips could have outlasted their bound: {} {} under the floor for {:.1f} to "
		    "{:.1f} ms, {} ({} bound {:.1f} ms); seen: {}",
		    unproven.size(), j.s->name, j.dir, double(j.seen_us) / 1e3, double(j.us) / 1e3,
		    j.how, mode_name(j.s->a, j.s->driver), double(j.bound_us) / 1e3, why);
	} else if (unjudged) {
		v.lib.o = outcome::unverified;
		v.lib.why =
		    fmt::format("{} dips of the {} guard, timed by samples only: whether the "
				"cuts its programs saw met the event bound cannot be told "
				"without the kernel clock; seen: {}",
				unjudged->dips_seen, unjudged->mode, why);
	} else if (!fj.kernel && tight.past()) {
		// With the kernel's clock every dip was timed, gaps or not.
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
