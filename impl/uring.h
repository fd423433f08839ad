// SPDX-License-Identifier: MIT
// Batched SOL_SOCKET getsockopt through io_uring (IORING_OP_URING_CMD,
// SOCKET_URING_OP_GETSOCKOPT, Linux 6.7): thousands of reads for one
// io_uring_enter, so a floor guard pays the syscall entry once per batch
// instead of once per socket.  Raw syscalls, no liburing: Debian 12's
// liburing 2.3 has no helper for socket commands, and the ring is small.
//
// A ring belongs to one process and is used by one thread at a time (the
// guard's pass lock); it is made lazily and re-made in a forked child
// (its memory is not inherited: MADV_DONTFORK).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace sockbuf::uring
{

// One read: fd, SOL_SOCKET option, where the value goes (4 or 8 bytes).
struct sockopt_read {
	int fd;
	int optname;
	void *val;
	uint32_t len;
	int res; // out: bytes written (the option's length) or -errno
};

class sockopt_ring
{
public:
	sockopt_ring() = default;
	~sockopt_ring();
	sockopt_ring(const sockopt_ring &) = delete;
	sockopt_ring &operator=(const sockopt_ring &) = delete;

	// Sets the ring up (if not yet, or if @self, the caller's pid, is a
	// forked child of the process that made it) and checks once, on a socket of its own, that
	// the kernel answers SO_RCVBUF through it with what getsockopt says.
	// 0, or why not: -ENOSYS/-EPERM (no io_uring, io_uring_disabled,
	// seccomp), -EINVAL (no IORING_OP_URING_CMD), -EOPNOTSUPP (no socket
	// commands: before 6.7), -EPROTO (an answer that disagrees), -ENOMEM.
	int open(pid_t self);

	// Runs every read (after a successful open()); each gets its own res.
	// 0, or -errno of the ring itself: then some res may be -ECANCELED
	// and the ring is closed (the next open() makes a new one).
	int run(sockopt_read *reads, size_t n);

private:
	void close_ring();
	int submit_batch(sockopt_read *reads, size_t n);

	int fd_ = -1;
	pid_t pid_ = 0;
	unsigned int sq_entries_ = 0, cq_entries_ = 0;
	void *sq_map_ = nullptr, *cq_map_ = nullptr, *sqes_map_ = nullptr;
	size_t sq_map_len_ = 0, cq_map_len_ = 0, sqes_map_len_ = 0;
	unsigned *sq_head_ = nullptr, *sq_tail_ = nullptr, *sq_mask_ = nullptr,
		 *sq_array_ = nullptr;
	unsigned *cq_head_ = nullptr, *cq_tail_ = nullptr, *cq_mask_ = nullptr;
	void *cqes_ = nullptr;
	void *sqes_ = nullptr;
};

} // namespace sockbuf::uring
