// SPDX-License-Identifier: MIT
// The clause list and the integrity check every scenario must pass first.
#include "clauses.h"
#include "common.h"

#include <algorithm>

namespace sockbuf::contract
{

verdict judge_integrity(const scenario_result &r)
{
	verdict v = make_verdict("I", r);
	half_verdict h;
	if (!r.data.ok()) {
		h.o = outcome::fail;
		h.why = fmt::format("{} corrupt, {} short, {} errors{}{}", r.data.corrupt,
				    r.data.short_flows, r.data.errors.size(),
				    r.data.errors.empty() ? "" : ": ",
				    r.data.errors.empty() ? "" : r.data.errors.front());
		violation vi;
		vi.clause = "I";
		vi.scenario = r.name;
		vi.what = h.why;
		h.violations.push_back(vi);
	} else if (r.data.unfinished_flows) {
		// Nothing lost, nothing seen to arrive: the connections still
		// held the missing bytes when the drain's hard limit came.
		h.o = outcome::unverified;
		h.why = fmt::format("{} flows unfinished at the drain limit, their bytes still "
				    "held by live connections ({} flows, {} bytes verified in "
				    "order): {}",
				    r.data.unfinished_flows, r.data.flows, r.data.bytes_verified,
				    r.data.unfinished.front());
	} else {
		h.o = outcome::pass;
		h.why = fmt::format("{} flows, {} bytes verified in order", r.data.flows,
				    r.data.bytes_verified);
		if (r.data.late_flows)
			h.why +=
			    fmt::format("; {} finished after the drain's {:g} s base, their "
					"last bytes retransmitted (drain {:.1f} s)",
					r.data.late_flows, r.data.drain_base_s, r.data.drain_s);
	}
	v.raw = v.lib = h;
	return v;
}

const std::vector<clause_info> &all_clauses()
{
	static const std::vector<clause_info> list = {
	    {"C1", "initial size in force when the call returns", judge_c1},
	    {"C2", "unlocked: autotuning grows past the initial size", judge_c2},
	    {"C3", "never below the floor", judge_c3},
	    {"C4", "accepted socket inherits size, unlock and floor", judge_c4},
	    {"C5", "window scale as untouched; locked small differs", judge_c5},
	    {"C6", "locked size never moves", judge_c6},
	    {"C7", "reports equal what the kernel shows", judge_c7},
	};
	return list;
}

std::vector<verdict> judge_all(const scenario_result &r, const std::vector<std::string> &only)
{
	std::vector<verdict> out;
	out.push_back(judge_integrity(r));
	for (const auto &c : all_clauses())
		if (only.empty() || std::find(only.begin(), only.end(), c.id) != only.end())
			out.push_back(c.judge(r));
	return out;
}

} // namespace sockbuf::contract
