// SPDX-License-Identifier: MIT
// Cuts on purpose: paced flows on every arm while another process of the
// suite's (harness/cutter.h) takes the guarded sockets with
// pidfd_getfd() and, at seeded random times, lowers one direction with
// setsockopt(SO_SNDBUF or SO_RCVBUF) and flips SO_BUF_LOCK on or off.
// Every guard mode then has dips to be judged on any kernel, the daemon
// mode's included (harness/served.h): the arm's four connections take
// the thread, timerfd, events and daemon modes, the reserve arm its own.
#include "flow_traffic.h"

namespace sockbuf::contract
{

scenario_spec scenario_cuts()
{
	return {"cuts",
		"guarded sockets cut from outside at random times (setsockopt, SO_BUF_LOCK), "
		"one connection per guard mode, the daemon's included",
		[](const profile &p, scenario_plan *plan) {
			plan_one_flow(p,
				      {.seconds = {4, 12},
				       .bytes = {48ull << 20, 160ull << 20},
				       .sp = {.burst_bytes = 64 << 10, .burst_gap_us = 5000},
				       .no_growth_reason =
					   "paced flows (64 KiB every 5 ms): the initial size "
					   "carries them; this scenario is about cuts"},
				      plan);
			for (int i = 0; i < 3; i++)
				plan->arms.push_back(arm::lib_initial);
			plan->cuts.count = p.quick ? 48 : 200;
			plan->cuts.start_s = 0.5;
			plan->cuts.end_s = plan->seconds - 1;
			plan->daemon_mode = true;
			return std::string();
		}};
}

} // namespace sockbuf::contract
