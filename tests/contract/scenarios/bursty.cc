// SPDX-License-Identifier: MIT
// Bursty sender: 2 MiB as fast as possible, then 20 ms of silence.  Idle
// periods are where a shrinking buffer would show between bursts.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_bursty()
{
	return {"bursty", "sender writes 2 MiB bursts with 20 ms gaps",
		[](const profile &p, scenario_plan *plan) {
			plan->arms = arms_times(1);
			plan->sizes = default_sizes();
			plan->seconds = p.quick ? 3 : 20;
			plan->needs_growth = true;
			send_policy sp;
			sp.burst_bytes = 2 << 20;
			sp.burst_gap_us = 20000;
			plan->traffic =
			    flow_traffic(p.quick ? (48ull << 20) : (512ull << 20), sp, {}, 2);
			return std::string();
		}};
}

} // namespace sockbuf::contract
