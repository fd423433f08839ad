// SPDX-License-Identifier: MIT
// The library's floor guarantee in action: what an application using
// sockbuf does, sockbuf_check_floor() on a schedule and
// sockbuf_restore_floor() when a buffer fell below its floor.
#pragma once

#include "model.h"

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

private:
	std::vector<socket_record> *sockets_;
	int64_t t0_ns_;
	uint32_t period_us_;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	guard_stats stats_;
};

} // namespace sockbuf::contract
