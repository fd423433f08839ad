// SPDX-License-Identifier: MIT
// C7: report honesty: every value the library reports equals what the
// kernel shows (getsockopt, SO_BUF_LOCK, inet_diag SK_MEMINFO).
//
// Compared at rest (after setup, before traffic; after the last byte):
// Raw: getsockopt against inet_diag for every socket (the kernel agrees
// with itself).  Library: sockbuf_get_state's sizes against inet_diag
// SK_MEMINFO, a reading that does not go through the getsockopt the
// library wraps (a library that misreads or misreports its own calls is
// caught); its lock bits against SO_BUF_LOCK, the kernel's only view of
// them (inet_diag does not carry them).  set_initial/lock reports against
// the suite's getsockopt right after the call; restore reports against
// getsockopt after restore.
#include "clauses.h"
#include "common.h"

namespace sockbuf::contract
{

namespace
{

using snap = socket_record::snapshot;

void raw_check(const scenario_result &r, const socket_record &s, const snap &p, const char *when,
	       half_verdict *h)
{
	// A socket inet_diag no longer lists (closed both ways) has nothing
	// to compare.
	if (!p.taken || p.diag_snd < 0)
		return;
	if (p.diag_snd != p.gs_snd)
		add_violation(h, "C7", r, s, fmt::format("SK_MEMINFO_SNDBUF {} (getsockopt)", when),
			      -1, p.diag_snd, p.gs_snd);
	if (p.diag_rcv != p.gs_rcv)
		add_violation(h, "C7", r, s, fmt::format("SK_MEMINFO_RCVBUF {} (getsockopt)", when),
			      -1, p.diag_rcv, p.gs_rcv);
}

// Returns whether inet_diag gave the independent reading of the sizes.
bool lib_check(const scenario_result &r, const socket_record &s, const snap &p, const char *when,
	       half_verdict *h)
{
	if (!p.taken)
		return false;
	if (p.lib_lock != p.gs_lock)
		add_violation(h, "C7", r, s, fmt::format("sockbuf_get_state lock {}", when), -1,
			      p.lib_lock, p.gs_lock);
	if (p.diag_snd < 0 || p.diag_rcv < 0)
		return false;
	if (p.lib_snd != p.diag_snd)
		add_violation(h, "C7", r, s,
			      fmt::format("sockbuf_get_state sndbuf {} (inet_diag)", when), -1,
			      p.lib_snd, p.diag_snd);
	if (p.lib_rcv != p.diag_rcv)
		add_violation(h, "C7", r, s,
			      fmt::format("sockbuf_get_state rcvbuf {} (inet_diag)", when), -1,
			      p.lib_rcv, p.diag_rcv);
	return true;
}

} // namespace

verdict judge_c7(const scenario_result &r)
{
	verdict v = make_verdict("C7", r);
	// Only sockets inet_diag reported count: without inet_diag (a kernel
	// with tcp_diag as a module not loaded) raw C7 has nothing to compare.
	int n = 0;
	for (const auto &s : r.sockets) {
		raw_check(r, s, s.before, "before traffic", &v.raw);
		raw_check(r, s, s.after, "after traffic", &v.raw);
		if ((s.before.taken && s.before.diag_snd >= 0) ||
		    (s.after.taken && s.after.diag_snd >= 0))
			n++;
	}
	settle(&v.raw, n, fmt::format("{} sockets: getsockopt = inet_diag before and after", n),
	       "inet_diag showed none of the sockets (tcp_diag not available?)");

	n = 0;
	int compared = 0;
	for (const auto &s : r.sockets) {
		if (s.a != arm::lib_initial && s.a != arm::lib_locked)
			continue;
		n++;
		bool before = lib_check(r, s, s.before, "before traffic", &v.lib);
		bool after = lib_check(r, s, s.after, "after traffic", &v.lib);
		compared += before || after;
		if (s.r == role::server)
			continue; // the call was made on the listener
		for (const dir_setup *d : {&s.snd, &s.rcv})
			if (s.setup_err == 0 && d->reported != d->after_call)
				add_violation(&v.lib, "C7", r, s,
					      d == &s.snd ? "report snd.effective"
							  : "report rcv.effective",
					      0, d->reported, d->after_call);
	}
	// Without inet_diag the sizes have no independent reading: not a pass.
	if (compared == 0 && v.lib.violations.empty())
		n = 0;
	settle(&v.lib, n,
	       fmt::format("{} sockets: sockbuf_get_state sizes = inet_diag ({} of them listed "
			   "by it), lock = SO_BUF_LOCK; reports = getsockopt after the call",
			   n, compared),
	       "inet_diag listed none of the library sockets: no independent reading of "
	       "their sizes (tcp_diag not available?)");
	return v;
}

} // namespace sockbuf::contract
