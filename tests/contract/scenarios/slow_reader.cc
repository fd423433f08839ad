// SPDX-License-Identifier: MIT
// Slow reader: 16 KiB per read, a pause after each.  The receive queue
// stays full; nothing needs a larger buffer, nothing may shrink one.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_slow_reader()
{
	return {"slow_reader", "reader takes 16 KiB per millisecond",
		[](const profile &p, scenario_plan *plan) {
			plan->arms = arms_times(1);
			plan->sizes = default_sizes();
			plan->no_growth_reason = "the reader, not the window, sets the rate";
			plan->seconds = p.quick ? 2 : 20;
			read_policy rp;
			rp.chunk = 16 << 10;
			rp.gap_us = 1000;
			plan->traffic =
			    flow_traffic(p.quick ? (24ull << 20) : (256ull << 20), {}, rp, 2);
			return std::string();
		}};
}

} // namespace sockbuf::contract
