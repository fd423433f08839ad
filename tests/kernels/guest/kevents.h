// SPDX-License-Identifier: MIT
// kevents.h - the kernel events behind a run's first send-buffer dip.
//
// Around each pressure run (tcp_mem, memcg) the check records kernel
// events with the library's tracefs recorder (tools/trace: its own tracing
// instance, sock:sock_exceed_buf_limit, sock:inet_sock_set_state and the
// kprobe events on the shrink and clamp paths).  After the run, the first
// sample that found the sender's send buffer below its initial size, and
// the first below its floor, get the nearest preceding events on the same
// socket (its own local/remote ports) and the events naming no socket
// since the sample before (trace::nearest_before), with the fields the
// kernel printed.  Without tracefs or kprobes, the reason is written; no
// event is ever guessed.
#pragma once

#include "transfer.h"

#include <trace.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace sockbuf::kcheck
{

using ojson = nlohmann::ordered_json;

// At most this many events per list (same socket / no socket), one per
// event name (the nearest): a bulk sender waits for memory on every full
// buffer, and those waits would otherwise hide the rarer events.
constexpr size_t kevents_max = 4;
// Events naming no socket count back to the sample before the dip, and at
// least this far.
constexpr int64_t kevents_min_window_ns = 1'000'000;

// One recorder for one run (the recorder allows one per process at a
// time; the check's runs follow one another).  Teardown (instance, events,
// our sockbuf_<pid>_ kprobe events) happens in finish() or the destructor,
// and on SIGINT/SIGTERM once recorder::install_signal_teardown() ran.
class run_events
{
public:
	// @enabled false: nothing is recorded, the JSON says so.
	explicit run_events(bool enabled);
	~run_events();
	run_events(const run_events &) = delete;
	run_events &operator=(const run_events &) = delete;

	bool active() const;
	// Drains and stops the recorder; the run's "kernel_events" JSON for
	// @sender (the recorder's status, the sender's ports, and the events
	// before its first sample below its initial size and below its floor;
	// null where it never went below).
	ojson finish(const socket_track &sender);

private:
	std::unique_ptr<trace::recorder> rec_;
	std::string reason_; // why nothing is recorded ("" when active)
};

// The events before @b on @t's socket, from @events (empty @inactive: the
// recorder ran; otherwise why it did not).  null when @b never happened.
ojson attribute_below(const first_below &b, const socket_track &t,
		      const std::vector<trace::event> &events, const std::string &inactive,
		      const std::vector<std::string> &enabled, uint64_t dropped);

} // namespace sockbuf::kcheck
