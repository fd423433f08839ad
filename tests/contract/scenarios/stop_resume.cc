// SPDX-License-Identifier: MIT
// Reader that stops and resumes: full speed, then a 200 ms stop after every
// 16 MiB, so the sender fills both buffers and waits, again and again.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_stop_resume()
{
	return {"stop_resume", "reader stops 200 ms after every 16 MiB",
		[](const profile &p, scenario_plan *plan) {
			plan->arms = arms_times(1);
			plan->sizes = default_sizes();
			plan->seconds = p.quick ? 3 : 20;
			plan->needs_growth = true;
			read_policy rp;
			rp.stop_every = 16 << 20;
			rp.stop_us = 200000;
			plan->traffic =
			    flow_traffic(p.quick ? (64ull << 20) : (1ull << 30), {}, rp, 2);
			return std::string();
		}};
}

} // namespace sockbuf::contract
