// SPDX-License-Identifier: MIT
// The floor guard behind sockbuf_guard_*(): a set of sockets with their
// floors, a pass that finds and restores those below, and the two ways to
// drive passes (a thread, or a timerfd in the caller's loop).  Guards are
// named by ids through a small table (guard_table.cc), so that a
// destroyed guard's id gives -EBADF instead of a dangling pointer.
#pragma once

#include "diag.h"

#include <sockbuf/sockbuf.h>

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sockbuf::guard
{

// 0, or -EINVAL for bits outside SOCKBUF_GUARD_*.
int check_flags(unsigned int flags);

class floor_guard
{
public:
	explicit floor_guard(unsigned int flags);
	~floor_guard(); // stops the thread, closes the timer
	floor_guard(const floor_guard &) = delete;
	floor_guard &operator=(const floor_guard &) = delete;

	int add(int fd, const struct sockbuf_floor &floor);
	int remove(int fd);
	int pass(struct sockbuf_guard_report *out);
	int start(unsigned int interval_us);
	int stop();
	int timerfd(unsigned int interval_us);
	void stats(struct sockbuf_guard_totals *out);

private:
	struct entry {
		int fd;
		uint32_t inode;
		struct sockbuf_floor floor;
	};
	struct sizes {
		int64_t snd = -1, rcv = -1; // -1: not seen in the dump
	};

	void rebuild_index();
	bool use_dump();
	void read_sizes_from_dump();
	bool read_sizes_one(const entry &e, sizes *out); // false: socket gone
	void check_one(const entry &e, const sizes &now, bool from_dump,
		       struct sockbuf_guard_report *p, bool *gone);
	void run_thread();
	void reserve_at_add(int fd, const struct sockbuf_floor &floor);
	void count_reservation(const struct sockbuf_report &rep);

	const unsigned int flags_;
	const pid_t owner_;

	std::mutex mu_; // everything below, and a pass as a whole
	std::vector<entry> entries_;
	std::unordered_map<uint32_t, size_t> by_inode_;
	std::vector<sizes> now_; // per entry, filled by a pass
	diag::session diag_;
	int diag_err_ = 0;
	// The last pass's duration by size source (0: getsockopt, 1: dump),
	// 0 until measured.  A dump's cost is mostly the kernel's walk of its
	// whole established-socket hash table, whatever the number guarded;
	// getsockopt's grows with the number guarded: the guard measures both
	// and uses the cheaper, timing the other again every 64th pass while
	// it was within 4 times the cost of the chosen one, every 4096th
	// otherwise (a dump that walks a big table must not be paid often).
	int64_t source_ns_[2] = {0, 0};
	uint64_t passes_ = 0;
	struct sockbuf_guard_totals stats_ = {};
	int timer_fd_ = -1;

	std::mutex run_mu_; // the thread's start/stop
	std::condition_variable run_cv_;
	std::thread thread_;
	bool stopping_ = false;
	unsigned int interval_us_ = 0;
};

} // namespace sockbuf::guard
