// SPDX-License-Identifier: MIT
// `sockbuf show PID --watch MS --trace`: the kernel events behind each
// drop, from the tracefs recorder (tools/trace), matched to the dropped
// socket by its ports where the event names them, otherwise by time
// alone.  Nothing is guessed: a drop with no event says so, and why.
#pragma once

#include "show_watch.h"

#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>

namespace sockbuf::trace
{
class recorder;
struct event;
} // namespace sockbuf::trace

namespace sockbuf::cli::show
{

enum class trace_mode {
	off,
	autodetect, // when root and tracefs can be had
	on,	    // fail when it cannot
};

// false when @text is none of "auto", "on", "off".
bool parse_trace_mode(const char *text, trace_mode *out);

class watch_tracer
{
public:
	watch_tracer();
	~watch_tracer();
	watch_tracer(const watch_tracer &) = delete;
	watch_tracer &operator=(const watch_tracer &) = delete;

	// Starts recording as @mode asks and prints one line on @to saying
	// what is recorded, or why nothing is.  -errno only when @mode is on
	// and nothing could be recorded.
	int start(trace_mode mode, std::FILE *to);
	// Moves what the kernel recorded since the last call into the window
	// kept for explain() (the last 10 s, at most 20,000 events).
	void collect();
	// Lines under a DROP: the events on the same socket (by its ports)
	// between the last sample at or above the floor (@ok_mono_ns, -1 if
	// none) and the sample that saw it below (@seen_mono_ns), the nearest
	// last; or the events naming no socket in the millisecond before
	// @seen_mono_ns; or why there are none.
	void explain(const drop_event &e, int64_t ok_mono_ns, int64_t seen_mono_ns,
		     std::FILE *to) const;
	bool recording() const { return rec_ != nullptr; }

private:
	std::unique_ptr<trace::recorder> rec_;
	std::deque<trace::event> recent_;
	std::string why_not_; // why nothing is recorded
};

} // namespace sockbuf::cli::show
