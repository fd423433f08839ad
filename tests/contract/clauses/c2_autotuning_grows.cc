// SPDX-License-Identifier: MIT
// C2: the buffer stays unlocked: autotuning grows it past the initial size
// when the bandwidth-delay product needs it.
//
// Judged in scenarios whose traffic needs more than the initial size: the
// sender's SO_SNDBUF and the receiver's SO_RCVBUF must both exceed what
// setup left them at.  Raw: setsockopt + SO_BUF_LOCK 0.  Library:
// sockbuf_set_initial_bufsize.  A locked buffer must fail this test.
#include "clauses.h"
#include "common.h"

namespace sockbuf::contract
{

half_verdict judge_growth(const scenario_result &r, arm a)
{
	half_verdict h;
	int n = 0;
	int64_t snd_max = 0, rcv_max = 0;
	// Sixteen request-response connections share two cores: whether one
	// of them needs more than its initial window depends on its share of
	// the CPU (as in `parallel`), so there the arm as a whole must grow
	// in each direction; elsewhere every socket must.
	const bool per_arm = r.name == "request_response";
	int grew_snd = 0, grew_rcv = 0;
	const socket_record *first = nullptr;
	for (const auto &s : r.sockets) {
		if (s.a != a || s.r == role::listener)
			continue;
		n++;
		// Clients send, servers receive; in request-response both do.
		const bool sends = s.r == role::client || r.name == "request_response";
		const bool receives = s.r == role::server || r.name == "request_response";
		int64_t snd_start = std::max<int64_t>(s.snd.after_call, s.snd.requested);
		int64_t rcv_start = s.r == role::server ? s.accept_rcvbuf : s.rcv.after_call;
		snd_max = std::max(snd_max, s.gs_snd.max);
		rcv_max = std::max(rcv_max, s.gs_rcv.max);
		grew_snd += s.gs_snd.max > snd_start;
		grew_rcv += s.gs_rcv.max > rcv_start;
		if (!first)
			first = &s;
		if (per_arm)
			continue;
		if (sends && s.gs_snd.max <= snd_start)
			add_violation(&h, "C2", r, s, "SO_SNDBUF maximum, never above initial", -1,
				      s.gs_snd.max, snd_start);
		if (receives && s.gs_rcv.max <= rcv_start)
			add_violation(&h, "C2", r, s, "SO_RCVBUF maximum, never above initial", -1,
				      s.gs_rcv.max, rcv_start);
	}
	if (per_arm && first && grew_snd == 0)
		add_violation(&h, "C2", r, *first, "SO_SNDBUF of no connection grew", -1, snd_max,
			      r.initial_snd);
	if (per_arm && first && grew_rcv == 0)
		add_violation(&h, "C2", r, *first, "SO_RCVBUF of no connection grew", -1, rcv_max,
			      r.initial_rcv);
	settle(&h, n,
	       fmt::format("grew from {}/{} to max {}/{}", r.initial_snd, r.initial_rcv, snd_max,
			   rcv_max),
	       fmt::format("no {} sockets", arm_name(a)));
	return h;
}

verdict judge_c2(const scenario_result &r)
{
	verdict v = make_verdict("C2", r);
	if (!r.needs_growth) {
		v.raw.why = v.lib.why = r.no_growth_reason;
		return v;
	}
	v.raw = judge_growth(r, arm::raw_unlock);
	v.lib = judge_growth(r, arm::lib_initial);
	return v;
}

} // namespace sockbuf::contract
