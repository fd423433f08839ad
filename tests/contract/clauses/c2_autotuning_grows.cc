// SPDX-License-Identifier: MIT
// C2: the buffer stays unlocked: autotuning grows it past the initial size
// when the bandwidth-delay product needs it.
//
// Judged in scenarios whose traffic needs more than the initial size: the
// sender's SO_SNDBUF and the receiver's SO_RCVBUF must both exceed what
// setup left them at (request-response: in a majority of connections).  Raw: setsockopt +
// SO_BUF_LOCK 0.  Library: sockbuf_set_initial_bufsize.  A locked buffer must fail this test.
#include "clauses.h"
#include "common.h"

#include <vector>

namespace sockbuf::contract
{

namespace
{

int64_t snd_start(const socket_record &s)
{
	return std::max<int64_t>(s.snd.after_call, s.snd.requested);
}

int64_t rcv_start(const socket_record &s)
{
	return s.r == role::server ? s.accept_rcvbuf : s.rcv.after_call;
}

// One direction of one connection: the sender's send buffer and the
// receiver's receive buffer both grew.
bool direction_grew(const socket_record &from, const socket_record &to)
{
	return from.gs_snd.max > snd_start(from) && to.gs_rcv.max > rcv_start(to);
}

} // namespace

half_verdict judge_growth(const scenario_result &r, arm a)
{
	half_verdict h;
	int n = 0;
	int64_t snd_max = 0, rcv_max = 0;
	for (const auto &s : r.sockets) {
		if (s.a != a || s.r == role::listener)
			continue;
		n++;
		snd_max = std::max(snd_max, s.gs_snd.max);
		rcv_max = std::max(rcv_max, s.gs_rcv.max);
	}
	std::string why = fmt::format("grew from {}/{} to max {}/{}", r.initial_snd, r.initial_rcv,
				      snd_max, rcv_max);
	if (r.name != "request_response") {
		// One-way flows: clients send, servers receive; every socket.
		for (const auto &s : r.sockets) {
			if (s.a != a || s.r == role::listener)
				continue;
			if (s.r == role::client && s.gs_snd.max <= snd_start(s))
				add_violation(&h, "C2", r, s,
					      "SO_SNDBUF maximum, never above initial", -1,
					      s.gs_snd.max, snd_start(s));
			if (s.r == role::server && s.gs_rcv.max <= rcv_start(s))
				add_violation(&h, "C2", r, s,
					      "SO_RCVBUF maximum, never above initial", -1,
					      s.gs_rcv.max, rcv_start(s));
		}
		settle(&h, n, why, fmt::format("no {} sockets", arm_name(a)));
		return h;
	}
	// Request-response: sixteen connections, a client and a server thread
	// each, share two cores; whether one connection needs more than its
	// initial window in a run depends on its share of the CPU (as in
	// `parallel`).  Each connection is judged in both directions
	// (requests: client send, server receive; responses: server send,
	// client receive), and a strict majority of the arm's connections
	// must grow in each; a locked arm grows in none.
	int conns = 0, grew_req = 0, grew_resp = 0;
	std::vector<std::pair<const socket_record *, const socket_record *>> pairs;
	for (const auto &c : r.sockets)
		if (c.a == a && c.r == role::client)
			for (const auto &s : r.sockets)
				if (s.conn == c.conn && s.r == role::server)
					pairs.emplace_back(&c, &s);
	for (const auto &[c, s] : pairs) {
		conns++;
		grew_req += direction_grew(*c, *s);
		grew_resp += direction_grew(*s, *c);
	}
	const int majority = conns / 2 + 1;
	// One direction of one connection, from its sender to its receiver,
	// when too few of the arm's connections grew that way: the violation
	// is the sender's if its send buffer never rose, else the receiver's.
	auto judge = [&](const socket_record &from, const socket_record &to, const char *what,
			 int grew) {
		if (grew >= majority || direction_grew(from, to))
			return;
		const socket_record &at = from.gs_snd.max <= snd_start(from) ? from : to;
		bool snd = &at == &from;
		add_violation(
		    &h, "C2", r, at,
		    fmt::format("{} maximum, never above initial ({}: {} of {} "
				"connections grew, {} needed)",
				snd ? "SO_SNDBUF" : "SO_RCVBUF", what, grew, conns, majority),
		    -1, snd ? at.gs_snd.max : at.gs_rcv.max, snd ? snd_start(at) : rcv_start(at));
	};
	for (const auto &[c, s] : pairs) {
		judge(*c, *s, "requests", grew_req);
		judge(*s, *c, "responses", grew_resp);
	}
	why += fmt::format("; connections that grew: {} of {} for requests, {} for responses "
			   "(majority needed: {})",
			   grew_req, conns, grew_resp, majority);
	settle(&h, conns ? n : 0, why, fmt::format("no {} connections", arm_name(a)));
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
