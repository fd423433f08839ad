// SPDX-License-Identifier: MIT
// C5: window scale: a socket set up with set_initial_bufsize before
// listen/connect negotiates the same window scale as an untouched socket;
// a locked small buffer does not (both shown).
//
// Compared: the scale each end announced (TCP_INFO rcv_wscale) on the
// accepted and the connecting socket, against the untouched arm's.
// Raw: setsockopt + SO_BUF_LOCK 0 must match, setsockopt alone (locked)
// must differ.  Library: set_initial must match, lock_bufsize must differ.
// The "must differ" half is only asked when the locked size is small
// (below a quarter of tcp_rmem[2]).
#include "clauses.h"
#include "common.h"

namespace sockbuf::contract
{

namespace
{

struct baseline {
	int server = -1, client = -1;
};

baseline untouched(const scenario_result &r)
{
	baseline b;
	for (const auto &s : r.sockets)
		if (s.a == arm::untouched && s.rcv_wscale >= 0) {
			if (s.r == role::server && b.server < 0)
				b.server = s.rcv_wscale;
			if (s.r == role::client && b.client < 0)
				b.client = s.rcv_wscale;
		}
	return b;
}

int judge_arms(const scenario_result &r, arm same, arm differ, const baseline &b, half_verdict *h,
	       std::string *why)
{
	int same_ws = -1;
	int n = for_arm(r, same, [&](const socket_record &s) {
		int want = s.r == role::server ? b.server : b.client;
		if (s.r == role::server)
			same_ws = s.rcv_wscale;
		if (s.rcv_wscale != want)
			add_violation(h, "C5", r, s, "window scale announced (untouched announces)",
				      0, s.rcv_wscale, want);
	});
	int locked_ws = -1;
	bool small = r.tcp_rmem2 > 0 && r.initial_rcv < r.tcp_rmem2 / 4;
	for_arm(r, differ, [&](const socket_record &s) {
		if (s.r != role::server)
			return;
		locked_ws = s.rcv_wscale;
		if (small && s.rcv_wscale == b.server)
			add_violation(h, "C5", r, s,
				      "locked small buffer announced the untouched scale", 0,
				      s.rcv_wscale, b.server);
	});
	*why = fmt::format("server announced: untouched {}, {} {}, {} (locked) {}{}", b.server,
			   arm_name(same), same_ws, arm_name(differ), locked_ws,
			   small ? "" : " (locked size not small: difference not required)");
	return n;
}

} // namespace

verdict judge_c5(const scenario_result &r)
{
	verdict v = make_verdict("C5", r);
	baseline b = untouched(r);
	if (b.server < 0 || b.client < 0) {
		v.raw.why = v.lib.why = "no untouched connection to compare with";
		return v;
	}
	std::string why;
	int n = judge_arms(r, arm::raw_unlock, arm::raw_locked, b, &v.raw, &why);
	settle(&v.raw, n, why, "no raw sockets");
	n = judge_arms(r, arm::lib_initial, arm::lib_locked, b, &v.lib, &why);
	settle(&v.lib, n, why, "no library sockets");
	return v;
}

} // namespace sockbuf::contract
