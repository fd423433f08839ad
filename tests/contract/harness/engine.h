// SPDX-License-Identifier: MIT
// One-way flows over non-blocking sockets, driven by poll() from a few
// threads: the sender and reader behaviours of the scenarios (bulk, slow,
// stop/resume, bursty, jittery) are timing policies on the same loop.
#pragma once

#include "model.h"

#include <cstdint>
#include <cstdio>
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
	int64_t done_ns = 0; // when the reader saw end of stream
	std::string error;
};

// How long the readers wait, after the deadline, for what was sent.
// Until @base_ns they wait for every flow.  Past it they wait only while
// some unfinished flow's bytes are still held by a live connection (the
// sender's queue: unacknowledged or unsent, a retransmission pending; or
// the reader's queue), and never past @cap_ns: a starved sender whose
// retransmission timer has backed off to seconds has lost nothing.
struct drain_limits {
	int64_t base_ns = 5'000'000'000;
	int64_t cap_ns = 60'000'000'000;
	// Where the progress lines of a drain past @base_ns go; null: none.
	FILE *progress = stderr;
};

// What a flow's connection still holds, read from its two sockets
// (SIOCOUTQ, SIOCINQ, TCP_INFO).
struct held_bytes {
	bool alive = false;	 // the sender's connection is not closed
	int state = 0;		 // the sender's tcpi_state
	uint64_t snd_queued = 0; // sent, not yet acknowledged (FIN excluded)
	uint64_t rcv_queued = 0; // arrived, not yet read
	int backoff = 0;	 // the sender's tcpi_backoff
	uint32_t rto_us = 0;	 // the sender's tcpi_rto
	// Some of the flow's bytes are still on their way.
	bool holds() const { return rcv_queued || (alive && (snd_queued || state_has_fin())); }
	bool state_has_fin() const; // a FIN sent, not yet acknowledged
};
held_bytes held_by(const flow &f);

// Runs @flows with @threads threads until every flow has delivered its
// bytes and seen EOF.  At @deadline_ns senders stop early (what was sent
// still has to arrive); then the readers drain as @lim says.  A flow
// unfinished at the end is short (integrity fails) when its connection
// holds none of its missing bytes any more, and unfinished (integrity
// unverified) when its bytes were still on their way at @lim.cap_ns.
// Counts into @out.
void run_flows(std::vector<flow> &flows, int threads, int64_t deadline_ns, integrity *out,
	       const drain_limits &lim = {});

} // namespace sockbuf::contract
