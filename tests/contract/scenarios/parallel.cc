// SPDX-License-Identifier: MIT
// Many parallel connections: hundreds of flows share the namespace's
// memory and two threads, each flow a modest transfer.
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
		    plan->needs_growth = true;
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
