// SPDX-License-Identifier: MIT
// The scenarios of one flow per arm at the default sizes that differ only
// in how the sender writes and the reader reads (one_flow in
// flow_traffic.h).
#include "flow_traffic.h"

namespace sockbuf::contract
{

// Bulk transfer: the sender writes as fast as it can, the reader reads as
// fast as it can.  The bandwidth-delay product of an unshaped path grows
// both buffers past their initial size.
scenario_spec scenario_bulk()
{
	return one_flow_scenario("bulk", "one bulk flow per arm, sender and reader at full speed",
				 {.seconds = {4, 30}, .bytes = {128ull << 20, 2ull << 30}});
}

// Slow reader: 16 KiB per read, a pause after each.  The receive queue
// stays full; nothing needs a larger buffer, nothing may shrink one.
scenario_spec scenario_slow_reader()
{
	return one_flow_scenario("slow_reader", "reader takes 16 KiB per millisecond",
				 {.seconds = {2, 20},
				  .bytes = {24ull << 20, 256ull << 20},
				  .rp = {.chunk = 16 << 10, .gap_us = 1000},
				  .no_growth_reason = "the reader, not the window, sets the rate"});
}

// Reader that stops and resumes: full speed, then a 200 ms stop after every
// 16 MiB, so the sender fills both buffers and waits, again and again.
scenario_spec scenario_stop_resume()
{
	return one_flow_scenario("stop_resume", "reader stops 200 ms after every 16 MiB",
				 {.seconds = {3, 20},
				  .bytes = {64ull << 20, 1ull << 30},
				  .rp = {.stop_every = 16 << 20, .stop_us = 200000}});
}

// Bursty sender: 2 MiB as fast as possible, then 20 ms of silence.  Idle
// periods are where a shrinking buffer would show between bursts.
scenario_spec scenario_bursty()
{
	return one_flow_scenario("bursty", "sender writes 2 MiB bursts with 20 ms gaps",
				 {.seconds = {3, 20},
				  .bytes = {48ull << 20, 512ull << 20},
				  .sp = {.burst_bytes = 2 << 20, .burst_gap_us = 20000}});
}

// Jittery reader: the pause before each 64 KiB read varies from 0 to 2 ms
// (fixed pseudo-random sequence), so the drain rate keeps changing.
scenario_spec scenario_jitter()
{
	return one_flow_scenario("jitter", "reader pauses 0-2 ms at random before each read",
				 {.seconds = {3, 20},
				  .bytes = {48ull << 20, 512ull << 20},
				  .rp = {.chunk = 64 << 10, .gap_jitter_us = 2000}});
}

} // namespace sockbuf::contract
