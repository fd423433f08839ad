// SPDX-License-Identifier: MIT
// Client-to-server flows on every connection of a scenario, through the
// poll engine, with one sender and one reader policy.
#pragma once

#include "engine.h"
#include "scenario.h"

namespace sockbuf::contract
{

traffic_fn flow_traffic(uint64_t bytes_per_flow, send_policy sp, read_policy rp, int threads);

// Sizes most scenarios start from: below what bulk traffic needs, so
// autotuning has to grow them (C2) and the floor means something (C3).
inline arm_sizes default_sizes()
{
	return {131072, 131072, false};
}

} // namespace sockbuf::contract
