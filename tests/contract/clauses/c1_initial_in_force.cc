// SPDX-License-Identifier: MIT
// C1: an initial size set with set_initial_bufsize is in force when the
// call returns (send and receive), in the library's unit.
//
// Raw: setsockopt(SO_*BUF, size / 2) then SO_BUF_LOCK 0 reads back size,
// unlocked.  Library: the report's effective size is what getsockopt reads
// right after the call, unlocked, equal to the request or with a clamp bit
// that says why not.
#include "clauses.h"
#include "common.h"

#include <sockbuf/sockbuf.h>

namespace sockbuf::contract
{

namespace
{

// Sockets on which the setup call itself was made: clients and listeners.
bool set_up_here(const socket_record &s)
{
	return s.r != role::server;
}

void check_raw(const socket_record &s, const scenario_result &r, half_verdict *h)
{
	for (const dir_setup *d : {&s.snd, &s.rcv}) {
		const char *name = d == &s.snd ? "SO_SNDBUF" : "SO_RCVBUF";
		if (d->after_call != d->requested)
			add_violation(
			    h, "C1", r, s,
			    fmt::format("{} after setsockopt({})", name, d->requested / 2), 0,
			    d->after_call, d->requested);
	}
	if (s.lock_after_call != 0)
		add_violation(h, "C1", r, s, "SO_BUF_LOCK after unlocking", 0, s.lock_after_call,
			      0);
}

void check_lib(const socket_record &s, const scenario_result &r, half_verdict *h)
{
	if (s.setup_err < 0) {
		add_violation(h, "C1", r, s, "sockbuf_set_initial_bufsize returned", 0, s.setup_err,
			      0);
		return;
	}
	for (const dir_setup *d : {&s.snd, &s.rcv}) {
		const char *name = d == &s.snd ? "SO_SNDBUF" : "SO_RCVBUF";
		if (d->reported != d->after_call)
			add_violation(h, "C1", r, s,
				      fmt::format("{} read after the call (report said {})", name,
						  d->reported),
				      0, d->after_call, d->reported);
		else if (d->strategy == SOCKBUF_STRAT_DEFAULT)
			add_violation(
			    h, "C1", r, s,
			    fmt::format("{} left at the kernel's size: no unlocked way to set "
					"it on this kernel (fallback default, reported)",
					name),
			    0, d->after_call, d->requested);
		else if (d->after_call != d->requested && d->clamps == 0)
			add_violation(
			    h, "C1", r, s,
			    fmt::format("{} differs from the request, no clamp reported", name), 0,
			    d->after_call, d->requested);
		// -1: the library could not read the bit (no SO_BUF_LOCK).
		if (d->report_locked == 1)
			add_violation(h, "C1", r, s, fmt::format("{} report locked", name), 0,
				      d->report_locked, 0);
	}
	if (s.lock_after_call != 0 && s.lock_after_call != -1)
		add_violation(h, "C1", r, s, "SO_BUF_LOCK after the call", 0, s.lock_after_call, 0);
}

} // namespace

verdict judge_c1(const scenario_result &r)
{
	verdict v = make_verdict("C1", r);
	int n = 0;
	for (const auto &s : r.sockets)
		if (s.a == arm::raw_unlock && set_up_here(s)) {
			check_raw(s, r, &v.raw);
			n++;
		}
	settle(&v.raw, n,
	       fmt::format("{} sockets read {}/{} unlocked right after setup", n, r.initial_snd,
			   r.initial_rcv),
	       "no raw sockets");
	n = 0;
	for (const auto &s : r.sockets)
		if (s.a == arm::lib_initial && set_up_here(s)) {
			check_lib(s, r, &v.lib);
			n++;
		}
	std::string lib_why = fmt::format("{} sockets: report = getsockopt, unlocked", n);
	for (const auto &s : r.sockets)
		if (s.a == arm::lib_initial && s.r == role::client &&
		    (s.snd.clamps || s.rcv.clamps)) {
			lib_why += fmt::format("; clamped to {}/{} (clamp bits {:#x}/{:#x})",
					       s.snd.after_call, s.rcv.after_call, s.snd.clamps,
					       s.rcv.clamps);
			break;
		}
	settle(&v.lib, n, lib_why, "no library sockets");
	return v;
}

} // namespace sockbuf::contract
