// SPDX-License-Identifier: MIT
// The floor guard's event source (SOCKBUF_GUARD_EVENTS,
// bpf/guard_events.bpf.c), also sockbufd's (one set for the host): fexit programs on the kernel
// functions that cut a TCP send buffer, and on the socket-option write, post the inode of each
// guarded socket found below its floor to a ring buffer, one record per socket until the guard has
// looked at it (clear()).  The guard wakes on fd() and restores only the sockets named, through its
// usual restore path and identity check.
//
// Needs the library built with libbpf (SOCKBUF_HAVE_BPF), CAP_BPF and
// CAP_PERFMON (or root), a kernel with BTF, fexit trampolines and the BPF
// ring buffer (5.8).  Belongs to one process: after_fork() in a child
// forgets it (the child polls).  Not thread-safe: the guard serialises
// calls (watch()/unwatch() under its set lock, drain() and clear() under
// its pass lock; libbpf's map calls are plain syscalls on fds that stay
// open until close()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sockbuf::bpf
{

// bpf/guard_events.bpf.c: struct watched, the same layout.
struct watched {
	int32_t snd, rcv; // the floor; 0: that direction not guarded
	uint32_t pending; // 1: a record was posted, the guard has not looked
};
static_assert(sizeof(watched) == 12);

// bpf/guard_events.bpf.c: struct record, what one cut posts.
struct record {
	uint32_t ino;
	uint32_t point;	    // the program that posted it (records_at())
	uint64_t posted_ns; // bpf_ktime_get_ns(): CLOCK_MONOTONIC
};
static_assert(sizeof(record) == 16);

// Which kernel functions the programs are attached to (attached()).
enum : unsigned int {
	ev_mem_raise = 1u << 0,		  // __sk_mem_raise_allocated
	ev_check_space = 1u << 1,	  // tcp_check_space (before 7.x)
	ev_dunder_check_space = 1u << 2,  // __tcp_check_space
	ev_frag_refill = 1u << 3,	  // sk_page_frag_refill
	ev_alloc_skb = 1u << 4,		  // tcp_stream_alloc_skb
	ev_sk_stream_alloc_skb = 1u << 5, // its name before 5.18
	ev_sk_setsockopt = 1u << 6,	  // sk_setsockopt (6.1: see guard_events.cc)
};

class event_source
{
public:
	event_source() = default;
	~event_source();
	event_source(const event_source &) = delete;
	event_source &operator=(const event_source &) = delete;

	// Loads and attaches the programs.  0, or why not: -EOPNOTSUPP
	// (built without libbpf), -EPERM (no CAP_BPF/CAP_PERFMON), -ENOENT
	// (no BTF, or none of the functions), -EINVAL (verifier refusal, no
	// fexit or ring buffer: before 5.8), -ENOMEM.
	int open();
	bool is_open() const { return st_ != nullptr; }

	// Readable (EPOLLIN) while records wait: an epoll fd holding the
	// ring buffer's.
	int fd() const;
	unsigned int attached() const { return attached_; }

	// The socket of inode @ino is guarded with floor @snd/@rcv, no
	// record pending.  0 or -errno (-E2BIG: the map is full).
	int watch(uint32_t ino, int snd, int rcv);
	// Clears the pending mark of @ino so that its next cut posts again
	// (the same as watch() on an inode the map holds).  The map is not
	// preallocated: an update allocates, and can fail (-ENOMEM), which
	// leaves the mark set and the socket posting nothing.
	int clear(uint32_t ino, int snd, int rcv);
	void unwatch(uint32_t ino);

	// Appends the inodes of the records waiting to @out (never blocks),
	// and when @posted_ns is given the time each was posted there
	// (CLOCK_MONOTONIC, ns: the exit of the kernel function that cut the
	// socket).  The number appended, or -errno.
	int drain(std::vector<uint32_t> *out, std::vector<uint64_t> *posted_ns = nullptr);

	// Records never read, since open(): those the ring had no room for,
	// and the programs' runs the kernel skipped (recursion_misses: the
	// same program already running on that CPU).  Either may have been a
	// cut: the caller makes a full pass when it grows.  One bpf() call
	// per program.
	uint64_t lost() const;
	// The longest a record drained so far waited in the ring, from its
	// post to drain() (ns): the scheduler's share of the event path.
	uint64_t max_wait_ns() const { return max_wait_ns_; }
	// Records drained so far per program: __sk_mem_raise_allocated,
	// tcp_check_space/__tcp_check_space, sk_page_frag_refill,
	// tcp_stream_alloc_skb/sk_stream_alloc_skb, sk_setsockopt (the
	// public totals have room for the first four: n_public_points).
	static constexpr size_t n_points = 5;
	static constexpr size_t n_public_points = 4;
	const uint64_t *records_at() const { return records_at_; }

#ifdef SOCKBUF_TEST_SEAM
	// Adds @n to the lost count, as a full ring would.
	void add_lost(uint64_t n);
	// The next @n clear() calls fail with -ENOMEM, the map untouched.
	void fail_clears(int n)
	{
		fail_clears_ = n;
	}
#endif

	void close();
	// In a forked child: forgets the parent's programs without freeing
	// anything (a thread the child lacks may have been using them) and
	// closes the child's copies of their descriptors.
	void after_fork();

private:
	struct state;
	state *st_ = nullptr;
	unsigned int attached_ = 0;
	std::vector<uint32_t> *sink_ = nullptr;	   // drain()'s, for the callback
	std::vector<uint64_t> *sink_ns_ = nullptr; // and its times, when asked
	uint64_t max_wait_ns_ = 0;
	uint64_t records_at_[n_points] = {};
#ifdef SOCKBUF_TEST_SEAM
	int fail_clears_ = 0;
#endif
	static int on_record(void *ctx, void *data, size_t len);
	int open_targets(const char *const *target);
};

} // namespace sockbuf::bpf
