// SPDX-License-Identifier: MIT
// Batched SOL_SOCKET getsockopt through io_uring for the guard's passes.
#include "uring.h"

#include "sys.h"

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace sockbuf::uring
{

namespace
{

// enum io_uring_socket_op (include/uapi/linux/io_uring.h, Linux 6.7): an
// enum, so it cannot be tested with #ifdef; Debian 12's headers (6.1) do
// not have it.  The values are ABI.
constexpr uint32_t socket_op_getsockopt = 2; // SOCKET_URING_OP_GETSOCKOPT

// Where a socket command's arguments sit in the SQE (the 6.7 uapi names
// level, optname, optlen and optval; 6.1 headers call the same bytes
// addr, file_index and addr3).
constexpr size_t sqe_level_off = 16, sqe_optname_off = 20, sqe_optlen_off = 44, sqe_optval_off = 48;
static_assert(offsetof(io_uring_sqe, addr) == sqe_level_off);
static_assert(offsetof(io_uring_sqe, file_index) == sqe_optlen_off);
static_assert(offsetof(io_uring_sqe, addr3) == sqe_optval_off);
static_assert(sizeof(io_uring_sqe) == 64);

constexpr unsigned int ring_entries = 1024, ring_entries_small = 128;

void put32(io_uring_sqe *sqe, size_t off, uint32_t v)
{
	memcpy(reinterpret_cast<unsigned char *>(sqe) + off, &v, sizeof(v));
}

void put64(io_uring_sqe *sqe, size_t off, uint64_t v)
{
	memcpy(reinterpret_cast<unsigned char *>(sqe) + off, &v, sizeof(v));
}

void *map_ring(int fd, size_t len, off_t what)
{
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, what);
	if (p == MAP_FAILED)
		return nullptr;
	// A forked child must not write into the parent's ring: it gets none
	// and makes its own.
	madvise(p, len, MADV_DONTFORK);
	return p;
}

} // namespace

sockopt_ring::~sockopt_ring()
{
	close_ring();
}

void sockopt_ring::close_ring()
{
	// In a forked child the mappings were not inherited (MADV_DONTFORK):
	// only the fd is a copy, and closing it leaves the parent's ring alone.
	if (fd_ >= 0 && pid_ == getpid()) {
		if (sqes_map_)
			munmap(sqes_map_, sqes_map_len_);
		if (cq_map_ && cq_map_ != sq_map_)
			munmap(cq_map_, cq_map_len_);
		if (sq_map_)
			munmap(sq_map_, sq_map_len_);
	}
	if (fd_ >= 0)
		::close(fd_);
	fd_ = -1;
	pid_ = 0;
	sq_map_ = cq_map_ = sqes_map_ = nullptr;
	sq_map_len_ = cq_map_len_ = sqes_map_len_ = 0;
	sq_head_ = sq_tail_ = sq_mask_ = sq_array_ = nullptr;
	cq_head_ = cq_tail_ = cq_mask_ = nullptr;
	cqes_ = sqes_ = nullptr;
	sq_entries_ = cq_entries_ = 0;
}

int sockopt_ring::open(pid_t me)
{
	if (fd_ >= 0 && pid_ == me)
		return 0;
	close_ring(); // none yet, or the parent's

	io_uring_params p;
	int fd = -1;
	for (unsigned int entries : {ring_entries, ring_entries_small}) {
		memset(&p, 0, sizeof(p));
		// SUBMIT_ALL: a bad SQE does not stop the rest of the batch.
		p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
		fd = sys::uring_setup(entries, &p);
		if (fd != -ENOMEM)
			break;
	}
	if (fd < 0)
		return fd;
	fd_ = fd;
	pid_ = me;
	sq_entries_ = p.sq_entries;
	cq_entries_ = p.cq_entries;
	sq_map_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_map_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
	sqes_map_len_ = p.sq_entries * sizeof(io_uring_sqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		sq_map_len_ = cq_map_len_ = std::max(sq_map_len_, cq_map_len_);
		sq_map_ = cq_map_ = map_ring(fd_, sq_map_len_, IORING_OFF_SQ_RING);
	} else {
		sq_map_ = map_ring(fd_, sq_map_len_, IORING_OFF_SQ_RING);
		cq_map_ = map_ring(fd_, cq_map_len_, IORING_OFF_CQ_RING);
	}
	sqes_map_ = map_ring(fd_, sqes_map_len_, off_t(IORING_OFF_SQES));
	if (!sq_map_ || !cq_map_ || !sqes_map_) {
		close_ring();
		return -ENOMEM;
	}
	auto *sq = static_cast<unsigned char *>(sq_map_);
	auto *cq = static_cast<unsigned char *>(cq_map_);
	sq_head_ = reinterpret_cast<unsigned *>(sq + p.sq_off.head);
	sq_tail_ = reinterpret_cast<unsigned *>(sq + p.sq_off.tail);
	sq_mask_ = reinterpret_cast<unsigned *>(sq + p.sq_off.ring_mask);
	sq_array_ = reinterpret_cast<unsigned *>(sq + p.sq_off.array);
	cq_head_ = reinterpret_cast<unsigned *>(cq + p.cq_off.head);
	cq_tail_ = reinterpret_cast<unsigned *>(cq + p.cq_off.tail);
	cq_mask_ = reinterpret_cast<unsigned *>(cq + p.cq_off.ring_mask);
	cqes_ = cq + p.cq_off.cqes;
	sqes_ = sqes_map_;

	// Does this kernel answer socket commands, and with the right value?
	int s = sys::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		s = sys::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		close_ring();
		return s;
	}
	int via_ring = -1, direct = -2;
	sockopt_read r = {s, SO_RCVBUF, &via_ring, sizeof(via_ring), 0};
	int ret = run(&r, 1);
	if (ret == 0 && r.res < 0)
		ret = r.res; // -EINVAL: no URING_CMD; -EOPNOTSUPP: not on sockets
	if (ret == 0 &&
	    (r.res != int(sizeof(int)) || sys::get_int(s, SOL_SOCKET, SO_RCVBUF, &direct) != 0 ||
	     direct != via_ring))
		ret = -EPROTO;
	sys::close(s);
	if (ret < 0)
		close_ring();
	return ret;
}

int sockopt_ring::submit_batch(sockopt_read *reads, size_t n)
{
	auto *sqes = static_cast<io_uring_sqe *>(sqes_);
	auto *cqes = static_cast<io_uring_cqe *>(cqes_);
	const unsigned mask = *sq_mask_;
	const unsigned tail = *sq_tail_; // only this side writes the tail
	for (size_t i = 0; i < n; i++) {
		const unsigned idx = (tail + unsigned(i)) & mask;
		io_uring_sqe *sqe = &sqes[idx];
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = reads[i].fd;
		sqe->cmd_op = socket_op_getsockopt;
		put32(sqe, sqe_level_off, SOL_SOCKET);
		put32(sqe, sqe_optname_off, uint32_t(reads[i].optname));
		put32(sqe, sqe_optlen_off, reads[i].len);
		put64(sqe, sqe_optval_off, uint64_t(uintptr_t(reads[i].val)));
		sqe->user_data = i;
		sq_array_[idx] = idx;
		reads[i].res = -ECANCELED;
	}
	__atomic_store_n(sq_tail_, tail + unsigned(n), __ATOMIC_RELEASE);

	// Socket options complete inline: one enter submits and reaps all.
	// Bounded: a few tries on EINTR, each waiting for what is missing.
	size_t submitted = 0, reaped = 0;
	for (int tries = 0; tries < 8 && reaped < n; tries++) {
		const unsigned to_submit = unsigned(n - submitted);
		int ret =
		    sys::uring_enter(fd_, to_submit, unsigned(n - reaped), IORING_ENTER_GETEVENTS);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			return ret;
		if (ret > 0)
			submitted += size_t(ret);
		unsigned head = *cq_head_;
		const unsigned ctail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
		for (; head != ctail; head++) {
			const io_uring_cqe &c = cqes[head & *cq_mask_];
			if (c.user_data < n)
				reads[c.user_data].res = c.res;
			reaped++;
		}
		__atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
	}
	return reaped == n ? 0 : -ETIME;
}

int sockopt_ring::run(sockopt_read *reads, size_t n)
{
	if (fd_ < 0)
		return -EBADF;
	for (size_t done = 0; done < n;) {
		const size_t batch = std::min(n - done, size_t(sq_entries_));
		int ret = submit_batch(reads + done, batch);
		if (ret < 0) {
			close_ring(); // SQEs may be left queued: start afresh
			return ret;
		}
		done += batch;
	}
	return 0;
}

} // namespace sockbuf::uring
