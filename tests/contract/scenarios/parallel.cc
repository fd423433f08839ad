// SPDX-License-Identifier: MIT
// Many parallel connections: hundreds of flows share the namespace's
// memory and two threads, each flow a modest transfer.  Here the floor
// (C3), inheritance (C4) and locks (C6) are judged under the load of many
// sockets; growth (C2) is not, because a flow's share of the CPU, not its
// window, sets its rate (in a full run about a third of the flows, in
// every arm alike, never needed more than 128 KiB).
#include "flow_traffic.h"

#include <fmt/core.h>

namespace sockbuf::contract
{

scenario_spec scenario_parallel()
{
	return {
	    "parallel", "hundreds of concurrent flows", [](const profile &p, scenario_plan *plan) {
		    int per_arm = p.quick ? 40 : 100;
		    plan->arms = arms_times(per_arm);
		    plan->sizes = default_sizes();
		    // Hundreds of flows share two threads: a flow's rate is set by
		    // its share of the CPU, not its window; C2 is not judged.
		    plan->needs_growth = false;
		    plan->no_growth_reason =
			"each flow's share of the CPU, not its window, sets its rate";
		    plan->seconds = p.quick ? 6 : 40;
		    read_policy rp;
		    rp.chunk = 64 << 10;
		    send_policy sp;
		    sp.chunk = 64 << 10;
		    plan->traffic = flow_traffic(p.quick ? (1ull << 20) : (8ull << 20), sp, rp, 2);
		    plan->notes.push_back(fmt::format("{} connections", per_arm * arm_count));
		    return std::string();
	    }};
}

} // namespace sockbuf::contract
