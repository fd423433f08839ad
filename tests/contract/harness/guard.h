// SPDX-License-Identifier: MIT
// The library's floor guarantee in action: the library's own floor guard
// (sockbuf_guard_*), as an application using sockbuf runs it, over the
// lib_initial arm's connected sockets.  This adapter only registers the
// sockets, drives the guard and turns its pass reports into the suite's
// events; checking and restoring are the library's.
#pragma once

#include "model.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sockbuf::contract
{

class floor_guard
{
public:
	// Guards the lib_initial sockets of @sockets (not listeners).
	floor_guard(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us);
	~floor_guard();
	void start();
	void stop();
	const guard_stats &stats() const { return stats_; }

	// One pass over every guarded socket (also used at the very end).
	void pass();

	// How long a dip may last under this guard: one interval, the longest
	// pass seen, and the scheduling allowance (clauses.h).
	int64_t bound_us() const;

private:
	void note(const struct sockbuf_guard_report &rep);

	std::vector<socket_record> *sockets_;
	int64_t t0_ns_;
	uint32_t period_us_;
	int id_ = -1;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	guard_stats stats_;
};

} // namespace sockbuf::contract
