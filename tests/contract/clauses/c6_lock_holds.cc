// SPDX-License-Identifier: MIT
// C6: lock_bufsize: the size never moves, in every scenario.
//
// Raw: setsockopt(SO_*BUF) alone.  Library: sockbuf_lock_bufsize.  Every
// sample of both buffers, from getsockopt and inet_diag, equals the size
// read right after the call (accepted sockets: the listener's), and the
// lock bits read 3 before and after the traffic.
#include "clauses.h"
#include "common.h"

namespace sockbuf::contract
{

namespace
{

// First time a series leaves @value, in ms (-1 if never).
double first_move_ms(const track &t, int64_t value)
{
	for (const auto &p : t.series)
		if (p.value != value)
			return double(p.t_us) / 1e3;
	return -1;
}

int check(const scenario_result &r, arm a, half_verdict *h, int64_t *samples)
{
	return for_arm(r, a, [&](const socket_record &s) {
		struct {
			const track *t;
			const char *what;
			int size;
		} tracks[] = {{&s.gs_snd, "SO_SNDBUF (getsockopt)", s.snd.after_call},
			      {&s.gs_rcv, "SO_RCVBUF (getsockopt)", s.rcv.after_call},
			      {&s.diag_snd, "SK_MEMINFO_SNDBUF (inet_diag)", s.snd.after_call},
			      {&s.diag_rcv, "SK_MEMINFO_RCVBUF (inet_diag)", s.rcv.after_call}};
		for (const auto &t : tracks) {
			*samples += int64_t(t.t->samples);
			if (t.t->samples == 0)
				continue;
			if (t.t->min != t.size)
				add_violation(h, "C6", r, s, fmt::format("{} minimum", t.what),
					      first_move_ms(*t.t, t.size), t.t->min, t.size);
			else if (t.t->max != t.size)
				add_violation(h, "C6", r, s, fmt::format("{} maximum", t.what),
					      first_move_ms(*t.t, t.size), t.t->max, t.size);
		}
		for (const auto *snap : {&s.before, &s.after})
			// -1: no SO_BUF_LOCK to read (before 5.15); the sizes still count.
			if (snap->taken && snap->gs_lock != -1 && snap->gs_lock != 3)
				add_violation(h, "C6", r, s,
					      snap == &s.before ? "SO_BUF_LOCK before traffic"
								: "SO_BUF_LOCK after traffic",
					      -1, snap->gs_lock, 3);
	});
}

} // namespace

verdict judge_c6(const scenario_result &r)
{
	verdict v = make_verdict("C6", r);
	int64_t samples = 0;
	const char *sources = r.sampler.diag_err ? " (getsockopt only: inet_diag unavailable)" : "";
	int n = check(r, arm::raw_locked, &v.raw, &samples);
	settle(&v.raw, n,
	       fmt::format("{} sockets, {} samples, all {}/{}{}", n, samples, r.initial_snd,
			   r.initial_rcv, sources),
	       "no locked sockets");
	samples = 0;
	n = check(r, arm::lib_locked, &v.lib, &samples);
	settle(&v.lib, n, fmt::format("{} sockets, {} samples, none moved{}", n, samples, sources),
	       "no locked sockets");
	return v;
}

} // namespace sockbuf::contract
