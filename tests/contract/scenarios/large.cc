// SPDX-License-Identifier: MIT
// Large initial sizes: twice the larger of tcp_[rw]mem[2] and what
// net.core.[rw]mem_max lets SO_*BUF store.  Root passes *mem_max with
// SO_*BUFFORCE; autotuning caps unlocked buffers at tcp_*mem[2] and may
// cut a larger one back (the clause C3 question for this scenario).
#include "flow_traffic.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>

namespace sockbuf::contract
{

scenario_spec scenario_large()
{
	return {
	    "large", "initial sizes above tcp_*mem[2] and *mem_max",
	    [](const profile &p, scenario_plan *plan) {
		    sockbuf_probe_info info = {};
		    sockbuf_probe(&info, SOCKBUF_PROBE_FRESH);
		    long biggest = std::max({long(info.tcp_rmem[2]), long(info.tcp_wmem[2]),
					     long(info.rcvbuf_max), long(info.sndbuf_max)});
		    long size = std::min(2 * biggest, long(SOCKBUF_SIZE_MAX) & ~1L);
		    if (biggest <= 0)
			    return std::string("sysctls unreadable");
		    plan->arms = arms_times(1);
		    plan->sizes = {int(size), int(size), p.privileged};
		    plan->no_growth_reason = "initial size already at or above the autotuning cap";
		    plan->seconds = p.quick ? 3 : 20;
		    plan->traffic = flow_traffic(p.quick ? (96ull << 20) : (2ull << 30), {}, {}, 2);
		    plan->notes.push_back(fmt::format(
			"requested {} (tcp_rmem[2] {}, tcp_wmem[2] {}, rcvbuf_max {}, sndbuf_max "
			"{}), {}",
			size, info.tcp_rmem[2], info.tcp_wmem[2], info.rcvbuf_max, info.sndbuf_max,
			p.privileged ? "SO_*BUFFORCE allowed"
				     : "unprivileged: *mem_max clamps the request"));
		    return std::string();
	    }};
}

} // namespace sockbuf::contract
