// SPDX-License-Identifier: MIT
// `sockbuf show`: what is wrong with a socket's buffers, in words.
// Pure functions of what show_collect gathered, so tests can feed them
// any socket.
#pragma once

#include "show_collect.h"

#include <sockbuf/sockbuf.h>

#include <string>
#include <vector>

namespace sockbuf::cli::show
{

// The RTT used for the "at 50 ms" figure when none was measured (or the
// measured one is a LAN's): the figure the kernel-facts tables use.
inline constexpr double reference_rtt_s = 0.050;

struct diagnosis {
	bool problem = false;		// locked, or a small window scale
	std::vector<std::string> lines; // sentences, most important first
};

diagnosis diagnose(const shown_socket &s, const net_limits &limits);

// How far the buffer in direction @d (SOCKBUF_SND or SOCKBUF_RCV) is
// under the floor its process published: floor - size (bytes, the
// getsockopt unit) when below, else 0.
int floor_depth(const shown_socket &s, int d);
inline bool below_floor(const shown_socket &s)
{
	return floor_depth(s, SOCKBUF_SND) > 0 || floor_depth(s, SOCKBUF_RCV) > 0;
}
// Who set the floor: "guard", "shim" or "guard+shim".
std::string floor_by_text(uint32_t who);

// "256 KB", "32 MB", "4608 bytes" (KB = 1024 bytes).
std::string human_size(double bytes);
// "5.0 MB/s" (same units per second).
std::string human_rate(double bytes_per_s);

} // namespace sockbuf::cli::show
