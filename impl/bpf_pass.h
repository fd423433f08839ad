// SPDX-License-Identifier: MIT
// A floor-guard pass as one BPF iterator (bpf/guard_pass.bpf.c): the
// kernel walks this process's files once and writes each guarded socket's
// sk_sndbuf and sk_rcvbuf into a slot of an mmap'ed array indexed by fd
// number, stamped with the pass.  One bpf_iter_create() and read() per
// pass, whatever the number of sockets (docs/performance.md: 0.6 of the
// CPU of batched getsockopt over io_uring at 10,000 sockets; the walk and
// each socket's cold cache lines are what is left).
//
// Needs the library built with libbpf (SOCKBUF_HAVE_BPF), CAP_BPF and
// CAP_PERFMON (or root), a kernel with BTF and task iterators limited to
// one process (Linux 6.1).  Like the io_uring ring, it belongs to one
// process: the slots are not inherited (MADV_DONTFORK), after_fork() in
// the child forgets the parent's iterator, and open() there makes the
// child's own.  Not thread-safe: the guard's pass lock serialises every
// call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace sockbuf::bpf
{

// bpf/guard_pass.bpf.c: struct slot, the same layout.
struct slot {
	uint32_t ino; // the guarded socket's inode, 0: none
	uint32_t stamp;
	int32_t snd, rcv;
};
static_assert(sizeof(slot) == 16);

class pass_iter
{
public:
	pass_iter() = default;
	~pass_iter();
	pass_iter(const pass_iter &) = delete;
	pass_iter &operator=(const pass_iter &) = delete;

	// Loads the program for process @self with room for fd numbers below
	// @fds (rounded up; at least 1024), unless it is loaded for @self
	// with that room already.  1: loaded now, every slot empty (the
	// caller fills them); 0: loaded before, slots as they were; or why
	// not: -EOPNOTSUPP (built without libbpf), -EPERM (no
	// CAP_BPF/CAP_PERFMON, or bpf() refused), -EINVAL/-ENOENT (no BTF, no
	// task_file iterator, no iterator limited to one process: before
	// 6.1), -ERANGE (@fds past 2^20), -ENOMEM.
	int open(pid_t self, int fds);
	bool is_open() const { return slots_ != nullptr; }
	int room() const { return room_; } // fd numbers below this have a slot

	// Loaded by and for the calling process (in a forked child, before
	// open(): false).
	bool is_open_here(pid_t self) const { return slots_ != nullptr && pid_ == self; }

	// The slot of @fd (room() > fd >= 0), to fill (ino) or to read after
	// a pass; only where is_open_here().
	slot &at(int fd) { return slots_[fd]; }

	// One walk of the process's files: every slot whose inode is the
	// file's gets the sizes and the stamp returned (never 0).  The stamp,
	// or -errno (the iterator is closed then; open() again).
	int64_t run();

	void close();

	// In a forked child (pthread_atfork's child handler): forgets the
	// parent's iterator without freeing or unmapping anything (the fork
	// may have caught it mid-call in a thread the child lacks) and closes
	// the child's copies of its descriptors.
	void after_fork();

private:
	struct state;
	state *st_ = nullptr;
	slot *slots_ = nullptr;
	size_t map_len_ = 0;
	uint32_t last_stamp_ = 0;
	pid_t pid_ = 0;
	int room_ = 0;
	int fds_[4] = {-1, -1, -1, -1}; // slots, .bss, program, link
};

} // namespace sockbuf::bpf
