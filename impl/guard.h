// SPDX-License-Identifier: MIT
// The floor guard behind sockbuf_guard_*(): a set of sockets with their
// floors, a pass that finds and restores those below, and the two ways to
// drive passes (a thread, or a timerfd in the caller's loop).  Guards are
// named by ids through a small table (guard_table.cc), so that a
// destroyed guard's id gives -EBADF instead of a dangling pointer.
//
// What a pass reads: one SO_MEMINFO per socket when both directions are
// floored (SO_SNDBUF or SO_RCVBUF when one is; both where the kernel has
// no SO_MEMINFO), and nothing more.  Whether the fd still names the
// socket added (its SO_COOKIE, or its inode by fstat where the kernel gave
// no cookie) matters only before the guard changes something, so it is
// read for a socket found below its floor, right before the restore; a
// socket that is not the one added leaves the guard unrestored.  A closed
// fd fails its read (EBADF) and leaves at once.  A number closed and
// reused for another socket that is not below the old floor would read
// fine: a rolling sweep also checks the identity of ceil(n / 16) sockets
// per pass, in rounds of at most sweep_passes passes that each cover every
// socket registered when the round began.  So such an entry leaves within
// 2 * sweep_passes passes of the reuse (one round to finish, the next to
// reach it).
//
// With SOCKBUF_GUARD_BPF a pass is one BPF iterator over the process's
// files (bpf_pass.h): it reads every guarded socket and checks every
// identity (the file's inode against the one added) in the same walk, so
// a closed or reused fd leaves at the first pass after.
#pragma once

#include "bpf_pass.h"
#include "buffer.h"
#include "diag.h"
#include "uring.h"

#include <sockbuf/sockbuf.h>

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sockbuf::guard
{

// The identity sweep's round: every socket registered when a round began
// has had its identity checked when it ends, at most this many passes later.
inline constexpr size_t sweep_passes = 16;

// 0, or -EINVAL for bits outside SOCKBUF_GUARD_*.
int check_flags(unsigned int flags);

#ifdef SOCKBUF_TEST_SEAM
// Makes every guard's passes use one size source (SOCKBUF_GUARD_SRC_*)
// where it is available, falling back as usual where it is not; -1 gives
// the normal choice back.
void force_source(int source);
#endif

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
		int family;	 // AF_INET or AF_INET6 (SO_DOMAIN)
		uint32_t inode;	 // the socket's identity where there is no cookie
		uint64_t cookie; // SO_COOKIE: is this fd still the socket added? 0 unknown
		struct sockbuf_floor floor;
	};
	struct sizes {
		int64_t snd = -1, rcv = -1; // -1: not read by the pass's source
		bool verified = false;	    // this pass saw the fd name the socket
	};
	// One socket's io_uring reads.
	struct ring_vals {
		uint64_t cookie;
		uint32_t mem[buffer::meminfo_len / sizeof(uint32_t)];
		int snd, rcv;
		bool cookie_read, meminfo_read;
	};

	void rebuild_index();
	int choose_source() const;
	bool both_in_one_read(const entry &e) const;
	void plan_sweep();
	bool in_sweep(size_t i) const;
	void sweep_forget(size_t i);
	bool same_socket(const entry &e) const;
	void read_sizes_from_dump();
	bool read_sizes_from_ring(pid_t self); // false: no ring, use getsockopt
	bool read_sizes_from_bpf(pid_t self);  // false: no iterator, choose again
	bool bpf_wanted() const;
	void bpf_forget(const entry &e);
	bool read_sizes_one(const entry &e, sizes *out); // false: socket gone
	void check_one(const entry &e, const sizes &now, struct sockbuf_guard_report *p,
		       bool *gone);
	void run_thread(unsigned int interval_us);
	void reserve_at_add(int fd, const struct sockbuf_floor &floor);
	void count_reservation(const struct sockbuf_report &rep);

	const unsigned int flags_;
	const pid_t owner_;

	std::mutex mu_; // everything below, and a pass as a whole
	std::vector<entry> entries_;
	std::unordered_map<uint32_t, size_t> by_inode_;
	std::vector<sizes> now_;	   // per entry, filled by a pass
	std::vector<char> gone_;	   // per entry, filled by a pass
	std::vector<ring_vals> ring_vals_; // per entry, io_uring passes
	std::vector<uring::sockopt_read> ring_reads_;
	diag::session diag_;
	int diag_err_ = 0;
	uring::sockopt_ring ring_; // made on the first pass that wants it
	int uring_err_ = 0;
	bool meminfo_ok_ = true; // false once SO_MEMINFO gave ENOPROTOOPT (before 4.12)
	bpf::pass_iter bpf_;	 // loaded on the first pass that wants it
	int bpf_err_ = 0;	 // why passes do not use it (0: they may)
	int max_fd_ = -1;	 // the largest fd number ever added: the slots' room
	// The identity sweep: this round checks entries [0, sweep_end_), step
	// of them per pass; this pass [sweep_lo_, sweep_next_).  Indices
	// follow the entries when others leave (sweep_forget()); entries added
	// during a round wait for the next one.
	size_t sweep_lo_ = 0, sweep_next_ = 0, sweep_end_ = 0, sweep_step_ = 0;
	// The last pass's CPU time by size source (SOCKBUF_GUARD_SRC_*), 0
	// until measured.  io_uring and getsockopt cost per socket; a dump's
	// cost is mostly the kernel's walk of its whole established-socket
	// hash table, whatever the number guarded.  The guard times io_uring,
	// then getsockopt, and a dump only once the cheaper of those takes
	// over dump_try_ns (a dump on a busy host can take tens of ms even for
	// one socket); then it uses the cheapest, timing each other one again
	// every 64th pass while it was within 4 times the cost of the chosen
	// one, every 4096th otherwise.
	// (The BPF source is not timed against the others: asked for, it is
	// used while it works.)
	int64_t source_ns_[4] = {0, 0, 0, 0};
	uint64_t passes_ = 0;
	struct sockbuf_guard_totals stats_ = {};
	int timer_fd_ = -1;

	std::mutex run_mu_; // the thread's start/stop
	std::thread thread_;
	std::atomic<uint32_t> stop_word_{0}; // a futex word: 1 stops the thread
	static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
	unsigned int interval_us_ = 0;
};

} // namespace sockbuf::guard
