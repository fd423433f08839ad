// SPDX-License-Identifier: MIT
// Which kernel event made a C3 floor violation: the events the tracefs
// recorder (tools/trace) saw are matched to each violation, on its socket
// where the event names one, otherwise in the millisecond before it.
#pragma once

#include "report.h"
#include "trace.h"

#include <string>
#include <vector>

namespace sockbuf::contract
{

// What the recorder could do during the run.
struct trace_run {
	bool active = false;
	std::string reason; // inactive: why ("--trace off", "not root", ...)
	std::vector<std::string> enabled;
	uint64_t dropped = 0; // events the full buffer lost
};

// How far before a violation an event that names no socket still counts.
constexpr int64_t attribution_window_ns = 1'000'000;

// Adds "kernel_events" to every C3 violation of @scenario (its JSON, with
// "t0_mono_ns" and "socket_ports"): the nearest preceding events on the
// same socket, else those of any socket within the window, with the fields
// the kernel printed; or found=false and the reason.
void attribute_c3(json *scenario, const std::vector<trace::event> &events, const trace_run &run);

// One line: a violation's kernel events, "" when it carries none.
std::string kernel_events_text(const json &violation);

// One line: the socket's queues at its first inet_diag sample under the
// floor ("memory at 1115.1 ms: sndbuf 281360, wmem_queued ..."), "" when
// the violation carries none.
std::string violation_memory_text(const json &violation);

} // namespace sockbuf::contract
