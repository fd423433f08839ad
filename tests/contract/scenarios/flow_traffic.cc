// SPDX-License-Identifier: MIT
#include "flow_traffic.h"

namespace sockbuf::contract
{

traffic_fn flow_traffic(uint64_t bytes_per_flow, send_policy sp, read_policy rp, int threads)
{
	return [=](connection_set &set, int64_t deadline, integrity *data) {
		std::vector<flow> flows(set.conns.size());
		for (size_t i = 0; i < set.conns.size(); i++) {
			flows[i].snd_fd = set.sockets[set.conns[i].client].fd;
			flows[i].rcv_fd = set.sockets[set.conns[i].server].fd;
			flows[i].salt = 0x5bc0000000000000ull + i * 0x1000193ull;
			flows[i].to_send = bytes_per_flow;
			flows[i].sp = sp;
			flows[i].rp = rp;
		}
		run_flows(flows, threads, deadline, data);
	};
}

void plan_one_flow(const profile &p, const one_flow &f, scenario_plan *plan)
{
	plan->arms = arms_times(1);
	plan->sizes = default_sizes();
	plan->seconds = f.seconds.of(p);
	plan->needs_growth = !f.no_growth_reason;
	if (f.no_growth_reason)
		plan->no_growth_reason = f.no_growth_reason;
	plan->traffic = flow_traffic(f.bytes.of(p), f.sp, f.rp, 2);
}

scenario_spec one_flow_scenario(const char *name, const char *summary, const one_flow &f)
{
	return {name, summary, [f](const profile &p, scenario_plan *plan) {
			plan_one_flow(p, f, plan);
			return std::string();
		}};
}

} // namespace sockbuf::contract
