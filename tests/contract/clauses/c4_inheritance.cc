// SPDX-License-Identifier: MIT
// C4: inheritance: an accepted socket carries the listener's initial size,
// unlocked state and floor.
//
// At accept(): each size at least the listener's (the kernel may expand
// the send buffer at the handshake), the lock bits equal to the listener's
// (0), and each size at or above the listener's floor.
#include "clauses.h"
#include "common.h"

namespace sockbuf::contract
{

namespace
{

int check(const scenario_result &r, arm a, half_verdict *h)
{
	return for_arm(r, a, [&](const socket_record &s) {
		if (s.r != role::server)
			return;
		if (s.accept_sndbuf < s.listener_sndbuf)
			add_violation(h, "C4", r, s, "SO_SNDBUF at accept, below the listener's", 0,
				      s.accept_sndbuf, s.listener_sndbuf);
		if (s.accept_rcvbuf < s.listener_rcvbuf)
			add_violation(h, "C4", r, s, "SO_RCVBUF at accept, below the listener's", 0,
				      s.accept_rcvbuf, s.listener_rcvbuf);
		// -1: the kernel has no SO_BUF_LOCK to read the bits (before 5.15).
		if (s.accept_lock != -1 && s.accept_lock != s.listener_lock)
			add_violation(h, "C4", r, s, "SO_BUF_LOCK at accept, not the listener's", 0,
				      s.accept_lock, s.listener_lock);
		else if (s.accept_lock != -1 && s.accept_lock != 0)
			add_violation(h, "C4", r, s, "SO_BUF_LOCK at accept, locked", 0,
				      s.accept_lock, 0);
		if (s.snd.floor > 0 && s.accept_sndbuf < s.snd.floor)
			add_violation(h, "C4", r, s, "SO_SNDBUF at accept, below the floor", 0,
				      s.accept_sndbuf, s.snd.floor);
		if (s.rcv.floor > 0 && s.accept_rcvbuf < s.rcv.floor)
			add_violation(h, "C4", r, s, "SO_RCVBUF at accept, below the floor", 0,
				      s.accept_rcvbuf, s.rcv.floor);
	});
}

std::string evidence(const scenario_result &r, arm a)
{
	for (const auto &s : r.sockets)
		if (s.a == a && s.r == role::server)
			return fmt::format("listener {}/{} lock {} -> accepted {}/{} lock {}",
					   s.listener_sndbuf, s.listener_rcvbuf, s.listener_lock,
					   s.accept_sndbuf, s.accept_rcvbuf, s.accept_lock);
	return "";
}

} // namespace

verdict judge_c4(const scenario_result &r)
{
	verdict v = make_verdict("C4", r);
	int n = check(r, arm::raw_unlock, &v.raw);
	settle(&v.raw, n, evidence(r, arm::raw_unlock), "no raw sockets");
	n = check(r, arm::lib_initial, &v.lib);
	settle(&v.lib, n, evidence(r, arm::lib_initial), "no library sockets");
	return v;
}

} // namespace sockbuf::contract
