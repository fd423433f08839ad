// SPDX-License-Identifier: MIT
// Bulk transfer: the sender writes as fast as it can, the reader reads as
// fast as it can.  The bandwidth-delay product of an unshaped path grows
// both buffers past their initial size.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_bulk()
{
	return {"bulk", "one bulk flow per arm, sender and reader at full speed",
		[](const profile &p, scenario_plan *plan) {
			plan->arms = arms_times(1);
			plan->sizes = default_sizes();
			plan->seconds = p.quick ? 4 : 30;
			plan->needs_growth = true;
			plan->traffic =
			    flow_traffic(p.quick ? (128ull << 20) : (2ull << 30), {}, {}, 2);
			return std::string();
		}};
}

} // namespace sockbuf::contract
