// SPDX-License-Identifier: MIT
// transfer.h - one bulk TCP transfer between two network namespaces, with
// the buffers of both ends sampled from a third thread while it runs.
#pragma once

#include <sockbuf/sockbuf.h>

#include <netinet/in.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sockbuf::kcheck
{

// How a socket's buffers are set up before listen()/connect().
// initial_force: set_initial with SOCKBUF_F_ALLOW_FORCE (sizes past
// net.core.[wr]mem_max and tcp_[wr]mem[2]).
enum class setup { untouched, initial, locked, initial_force };

struct transfer_params {
	std::string server_ns; // /var/run/netns/NAME of the receiving side
	std::string client_ns; // ... and of the sending side
	std::string server_addr;
	int port = 5201;
	enum setup setup = setup::untouched;
	int size = 128 << 10; // initial or locked size, library unit
	long long max_bytes = 64ll << 20;
	std::chrono::milliseconds max_time{8000};
	std::chrono::milliseconds sample_every{2};
	std::chrono::milliseconds series_every{100};
	// Call sockbuf_restore_floor() on the sender whenever a sample finds
	// it below its floor (the library's guarantee, not the kernel's).
	bool restore_floor = false;
	// Called from the sampling thread with the elapsed time; used to
	// start and stop memory pressure in the middle of a transfer.
	std::function<void(std::chrono::milliseconds)> on_tick;
};

// The longest stretch a buffer spent under its floor, bounded from both
// sides by the samples: at least from the first to the last sample found
// under it, at most from the sample before (at or above the floor, or the
// start) to the sample after.  A stretch still open at the last sample has
// no upper bound.
struct dip_bounds {
	long count = 0;
	long longest_lower_ms = 0, longest_upper_ms = 0;
	bool open = false; // under the floor at the last sample
	long first_ms = -1, last_ms = -1, before_ms = -1;
};

// The first sample that found the send buffer under a reference size
// (its initial size, or its floor): when, on CLOCK_MONOTONIC (what the
// tracefs recorder's trace_clock mono gives), and how far the sample
// before it was, so that kernel events can be matched to it.
struct first_below {
	long ms = -1;		   // since the transfer started; -1 never below
	int64_t mono_ns = -1;	   // CLOCK_MONOTONIC right after the reading
	int64_t prev_mono_ns = -1; // the sample before (at or above), -1 none
	int sndbuf = 0, reference = 0;
};

// What one socket looked like over a transfer.
struct socket_track {
	std::string strategy_snd, strategy_rcv; // set_initial/lock report
	unsigned report_flags = 0;
	int setup_err = 0;	  // -errno of the setup call, 0 if fine
	sockbuf_floor floor{};	  // floor the setup call established
	sockbuf_state at_setup{}; // read right after connect()/accept(), before data
	sockbuf_state start{};	  // first sample once connected
	sockbuf_state end{};	  // last sample
	int min_snd = 0, max_snd = 0, min_rcv = 0, max_rcv = 0;
	long samples = 0;
	long below_floor_snd = 0, below_floor_rcv = 0;	     // samples under floor
	long below_floor_ms_snd = 0, below_floor_ms_rcv = 0; // time under floor
	dip_bounds dips_snd;
	long last_sample_ms = -1;
	long max_gap_ms = 0; // longest time between two samples
	long restores = 0;   // restore_floor calls
	int restore_err = 0;
	int min_snd_after_restore = 0; // lowest sndbuf read right after a restore
	// Largest fall from the highest value seen so far, and where it
	// ended: autotuning that only grows leaves these at 0.
	int peak_snd = 0, peak_rcv = 0;
	int max_fall_snd = 0, max_fall_rcv = 0;
	int low_after_peak_snd = 0, low_after_peak_rcv = 0;
	long drops_snd = 0, drops_rcv = 0; // samples lower than the one before
	// Time series: {ms, sndbuf, rcvbuf} every series_every, and at every
	// change in between (at most 2000 such points).
	std::vector<std::array<long, 3>> series;
	// The socket's own local and remote ports (host order, read at the
	// first sample), as its kernel events carry them; -1 unknown.
	int local_port = -1, remote_port = -1;
	int64_t last_mono_ns = -1; // CLOCK_MONOTONIC of the last sample
	int64_t t0_mono_ns = -1;   // CLOCK_MONOTONIC of ms 0, to the ms
	// Send buffer below its initial size (at_setup, else the first
	// sample) and below its floor, first sample of each.
	first_below snd_below_initial, snd_below_floor;
};

struct transfer_result {
	int err = 0; // -errno when the transfer could not be set up
	std::string what;
	long long bytes = 0;
	double seconds = 0;
	socket_track sender;   // the connecting socket, writes
	socket_track receiver; // the accepted socket, reads
};

transfer_result run_transfer(const transfer_params &p);

// Moves the calling thread into the network namespace at @path.  -errno.
int enter_netns(const std::string &path);
// Short SO_SNDTIMEO/SO_RCVTIMEO, so that blocking calls come back to
// look at the clock.
void set_io_timeouts(int fd);
sockaddr_in server_sockaddr(const transfer_params &p);

} // namespace sockbuf::kcheck
