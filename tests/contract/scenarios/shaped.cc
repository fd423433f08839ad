// SPDX-License-Identifier: MIT
// Shaped bottleneck: `tc tbf` at 200 Mbit/s on the namespace's loopback.
// The sender outruns the bottleneck; queues build in the qdisc.
#include "flow_traffic.h"
#include "netns.h"

#include <fmt/core.h>

namespace sockbuf::contract
{

scenario_spec scenario_shaped()
{
	return {"shaped", "bulk flows through tc tbf 200 Mbit/s",
		[](const profile &p, scenario_plan *plan) {
			plan_one_flow(p, {.seconds = {2, 20}, .bytes = {32ull << 20, 512ull << 20}},
				      plan);
			plan->prepare = [plan]() -> std::string {
				std::string out;
				int st = run_program({"tc", "qdisc", "add", "dev", "lo", "root",
						      "tbf", "rate", "200mbit", "burst", "256kb",
						      "latency", "50ms"},
						     &out);
				if (st == -ENOENT)
					return "tc (iproute2) not found";
				if (st != 0)
					return fmt::format("tc tbf failed ({}): {}", st, out);
				plan->notes.push_back(
				    "tc tbf rate 200mbit burst 256kb latency 50ms");
				return "";
			};
			return std::string();
		}};
}

} // namespace sockbuf::contract
