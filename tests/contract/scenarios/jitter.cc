// SPDX-License-Identifier: MIT
// Jittery reader: the pause before each 64 KiB read varies from 0 to 2 ms
// (fixed pseudo-random sequence), so the drain rate keeps changing.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_jitter()
{
	return {"jitter", "reader pauses 0-2 ms at random before each read",
		[](const profile &p, scenario_plan *plan) {
			plan->arms = arms_times(1);
			plan->sizes = default_sizes();
			plan->needs_growth = true;
			plan->seconds = p.quick ? 3 : 20;
			read_policy rp;
			rp.chunk = 64 << 10;
			rp.gap_jitter_us = 2000;
			plan->traffic =
			    flow_traffic(p.quick ? (48ull << 20) : (512ull << 20), {}, rp, 2);
			return std::string();
		}};
}

} // namespace sockbuf::contract
