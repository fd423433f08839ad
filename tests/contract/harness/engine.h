// SPDX-License-Identifier: MIT
// One-way flows over non-blocking sockets, driven by poll() from a few
// threads: the sender and reader behaviours of the scenarios (bulk, slow,
// stop/resume, bursty, jittery) are timing policies on the same loop.
#pragma once

#include "model.h"

#include <cstdint>
#include <vector>

namespace sockbuf::contract
{

struct send_policy {
	uint32_t chunk = 128 << 10;
	uint64_t burst_bytes = 0; // 0: send continuously
	uint32_t burst_gap_us = 0;
};

struct read_policy {
	uint32_t chunk = 128 << 10;
	uint32_t gap_us = 0;	    // pause after each read
	uint32_t gap_jitter_us = 0; // plus a pseudo-random 0..jitter
	uint64_t stop_every = 0;    // after this many bytes ...
	uint32_t stop_us = 0;	    // ... stop reading this long
};

struct flow {
	int snd_fd = -1, rcv_fd = -1;
	uint64_t salt = 0;
	uint64_t to_send = 0;
	send_policy sp;
	read_policy rp;

	// Progress, owned by the engine.
	uint64_t sent = 0, received = 0;
	bool snd_closed = false, eof = false, failed = false;
	int64_t next_send_ns = 0, next_read_ns = 0;
	uint64_t burst_left = 0, since_stop = 0, rng = 0;
	std::string error;
};

// Runs @flows with @threads threads until every flow has delivered its
// bytes and seen EOF.  At @deadline_ns senders stop early (what was sent
// still has to arrive); at @deadline_ns + drain the run gives up.
// Counts into @out.
void run_flows(std::vector<flow> &flows, int threads, int64_t deadline_ns, integrity *out);

} // namespace sockbuf::contract
