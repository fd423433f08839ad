// SPDX-License-Identifier: MIT
// The copies of other processes' sockets that pidfd_getfd() gives, closed
// off the thread that keeps floors.
//
// A copy is a full reference: when the owner closes its own descriptor
// while the copy is held, the copy's close() is the socket's last and runs
// tcp_close(), which with SO_LINGER set and unsent data toward a peer that
// does not read sleeps for the linger time, signals blocked or not.  Any
// process can arrange that.  So every copy goes to a small pool of closer
// threads (at most max_threads, all signals blocked, started on demand),
// and the taker asks backed_up() before each take: a user (uid) with a
// close() under way for longer than stuck_ms (time queued behind other
// closes is not counted), or with
// max_pending closes not done, gets no take until they are, and the
// caller counts the refusal; with max_total not done, nobody does.  The
// pool is never joined: a process that ends with a close still sleeping
// ends all the same (the exit's SIGKILL wakes it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace sockbuf::cli::remote
{

struct closer_stats {
	size_t pending = 0;	// copies given and not closed yet
	size_t threads = 0;	// closer threads started
	uint64_t closed = 0;	// copies closed
	uint64_t slow = 0;	// closes that took longer than slow_ms
	uint64_t oldest_ms = 0; // how long the oldest close not done has waited
};

class closer
{
public:
	static constexpr unsigned int max_threads = 16;
	static constexpr size_t max_pending = 1024; // per uid
	static constexpr size_t max_total = 8192;
	static constexpr uint64_t stuck_ms = 100;
	static constexpr uint64_t slow_ms = 20; // counted in stats().slow

	// The process-wide pool (made on first use, never destroyed).
	static closer &get();

	// Closes @fd, a copy of a socket of a process of @uid, on a closer
	// thread (or here, when no thread can be started: -errno of that is
	// counted in stats().threads staying 0).
	void close_later(int fd, uid_t uid);
	// Whether takes of sockets of @uid's processes must wait: one of its
	// closes has been under way longer than stuck_ms, or max_pending of
	// its closes (max_total of all) are not done.
	bool backed_up(uid_t uid) const;
	closer_stats stats() const;

	struct state;

private:
	closer();
	// fork(): the child has none of the pool's threads.  Its copy starts
	// afresh (a pool of its own, started on demand) and closes the copies
	// that were queued at the fork, so that a forked taker (the
	// supervisor's background copy) holds no socket alive.
	static void before_fork();
	static void after_fork_parent();
	static void after_fork_child();
	state *s_;
};

// Closes the copy @fd of a socket of process @pid through the pool (its
// owner's uid from /proc/PID; uid 0 when unknown).
void close_copy(int fd, pid_t pid);
// The owner (the effective uid) of process @pid, or (uid_t)-1.
uid_t owner_of(pid_t pid);

} // namespace sockbuf::cli::remote
