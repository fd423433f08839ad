// SPDX-License-Identifier: MIT
// `sockbuf show PID --watch MS`: sample a process's sockets every MS
// milliseconds and report the buffers that fall below the floors the
// process published.  Each drop is one drop_event handed to report_drop():
// the place to attach what the kernel did (the path that shrank the
// buffer) once the tool traces it; today it only samples.
#pragma once

#include <cstdint>
#include <cstdio>

namespace sockbuf::cli::show
{

inline constexpr int watch_min_ms = 10, watch_max_ms = 60000;

// A buffer seen below its floor at a sample after one at or above it (or
// at the first sample).
struct drop_event {
	int pid = 0, fd = -1;
	uint32_t inode = 0;
	int dir = 0;				  // SOCKBUF_SND or SOCKBUF_RCV
	int floor = 0;				  // bytes, the getsockopt unit
	int64_t size = 0;			  // the buffer at the sample that saw it below
	int64_t before = -1;			  // at the previous sample, -1: not sampled
	int64_t seen_ms = 0;			  // since the watch began
	int64_t last_ok_ms = -1;		  // the previous sample, at or above (-1: none)
	uint16_t local_port = 0, remote_port = 0; // host order, 0 unknown
};

// A buffer back at or above its floor (or gone) after @samples samples
// below: it stayed below between @below_ms and @back_ms (sampled).
struct recovery_event {
	int pid = 0, fd = -1;
	uint32_t inode = 0;
	int dir = 0;
	int samples = 0;
	int64_t first_below_ms = 0, back_ms = 0;
	bool closed = false; // the socket went away while below
};

void report_drop(const drop_event &e, std::FILE *to);
void report_recovery(const recovery_event &e, std::FILE *to);

// Samples @pid every @interval_ms, @count times (0: until it exits).
// Exit status: 0, 3 when any buffer was below its floor at some sample,
// 1 when the first sample fails.
// @trace: record kernel events through tracefs and print those before
// each drop (show_trace.h: 0 off, 1 auto, 2 on).  Exit status 1 also when
// @trace is on and nothing can be recorded.
int watch(int pid, int interval_ms, long count, int trace);

} // namespace sockbuf::cli::show
