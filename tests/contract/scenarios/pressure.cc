// SPDX-License-Identifier: MIT
// Memory pressure: while flows hold memory (the reader stops now and
// then), net.ipv4.tcp_mem is lowered under the memory in use for one
// second, then put back.  This is where sk_stream_moderate_sndbuf cuts
// unlocked send buffers.  tcp_mem is host-wide: runs only when the caller
// allows global changes (a qemu guest), else a reported skip.
#include "clock.h"
#include "flow_traffic.h"
#include "global.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>

namespace sockbuf::contract
{

scenario_spec scenario_pressure()
{
	return {"pressure", "net.ipv4.tcp_mem lowered under the memory in use",
		[](const profile &p, scenario_plan *plan) {
			if (!p.allow_global)
				return std::string("changes global net.ipv4.tcp_mem: run with "
						   "--allow-global-changes (qemu guest only)");
			if (tcp_mem_fd() < 0)
				return std::string("net.ipv4.tcp_mem not writable here");
			// Three connections per arm: one for each floor guard driver
			// (thread, timerfd, events), so that event and poll repair
			// the same cuts in the same run.
			plan->arms = arms_times(3);
			// 1 MiB floors where *mem_max lets SO_*BUF store that much (else
			// the largest it lets through): moderation to wmem_queued / 2
			// can go below.
			sockbuf_probe_info info = {};
			sockbuf_probe(&info, 0);
			int size = std::min({1 << 20, info.rcvbuf_max, info.sndbuf_max});
			plan->sizes = {size, size, false};
			plan->seconds = p.quick ? 3 : 10;
			read_policy rp;
			rp.stop_every = 8 << 20;
			rp.stop_us = 300000;
			plan->traffic =
			    flow_traffic(p.quick ? (64ull << 20) : (512ull << 20), {}, rp, 2);
			std::string saved = read_tcp_mem();
			plan->cleanup = [saved] { write_tcp_mem(saved); };
			plan->during = [plan, saved](connection_set &, int64_t t0) {
				sleep_until_ns(t0 + 400'000'000);
				long used = std::max(4L, tcp_mem_in_use());
				std::string low =
				    fmt::format("{} {} {}", used / 4, used / 3, used / 2);
				int err = write_tcp_mem(low);
				plan->notes.push_back(
				    fmt::format("tcp_mem {} -> {} for 1 s ({} pages in use){}",
						saved, low, used, err ? " (write failed)" : ""));
				sleep_until_ns(now_ns() + 1'000'000'000);
				write_tcp_mem(saved);
			};
			return std::string();
		}};
}

} // namespace sockbuf::contract
