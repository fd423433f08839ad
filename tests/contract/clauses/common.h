// SPDX-License-Identifier: MIT
// Small helpers shared by the clause judges.
#pragma once

#include "model.h"

#include <fmt/core.h>

#include <functional>
#include <string>

namespace sockbuf::contract
{

// Calls @fn for each non-listener socket of arm @a; returns how many.
inline int for_arm(const scenario_result &r, arm a,
		   const std::function<void(const socket_record &)> &fn, bool listeners = false)
{
	int n = 0;
	for (const auto &s : r.sockets)
		if (s.a == a && (listeners || s.r != role::listener)) {
			fn(s);
			n++;
		}
	return n;
}

inline void add_violation(half_verdict *h, const char *clause, const scenario_result &r,
			  const socket_record &s, std::string what, double t_ms, int64_t value,
			  int64_t floor)
{
	violation v;
	v.clause = clause;
	v.scenario = r.name;
	v.socket = s.name;
	v.what = std::move(what);
	v.t_ms = t_ms;
	v.value = value;
	v.floor = floor;
	h->violations.push_back(std::move(v));
}

// pass when @checked > 0 and no violations; fail otherwise (skip if none
// checked, with @none_why).
inline void settle(half_verdict *h, int checked, const std::string &pass_why,
		   const std::string &none_why)
{
	if (!h->violations.empty()) {
		h->o = outcome::fail;
		const auto &v = h->violations.front();
		h->why =
		    fmt::format("{} violation(s); first: {} {} = {} (expected {}) at {:.1f} ms",
				h->violations.size(), v.socket, v.what, v.value, v.floor, v.t_ms);
	} else if (checked == 0) {
		h->o = outcome::skip;
		h->why = none_why;
	} else {
		h->o = outcome::pass;
		h->why = pass_why;
	}
}

inline verdict make_verdict(const char *clause, const scenario_result &r)
{
	verdict v;
	v.clause = clause;
	v.scenario = r.name;
	return v;
}

} // namespace sockbuf::contract
