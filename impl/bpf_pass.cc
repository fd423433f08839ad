// SPDX-License-Identifier: MIT
// A floor-guard pass as one BPF iterator over the process's files: loading,
// running, reading its slots.
#include "bpf_pass.h"

#include <cerrno>
#include <sys/mman.h>
#include <unistd.h>

#ifdef SOCKBUF_HAVE_BPF
#include "bpf_quiet.h"
#include "guard_pass_bpf_object.h" // generated: the compiled bpf/guard_pass.bpf.c

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstring>
#include <new>
#endif

namespace sockbuf::bpf
{

#ifdef SOCKBUF_HAVE_BPF

struct pass_iter::state {
	bpf_object *obj = nullptr;
	bpf_link *link = nullptr;
	int bss_fd = -1; // the program's global data: pass_stamp
};

namespace
{

constexpr int min_room = 1024, max_room = 1 << 20;

int room_for(int fds)
{
	int room = min_room;
	while (room < fds && room < max_room)
		room <<= 1;
	return room;
}

} // namespace

pass_iter::~pass_iter()
{
	close();
}

int pass_iter::open(pid_t self, int fds)
{
	if (st_ && pid_ == self && room_ >= fds)
		return 0;
	close();
	if (fds > max_room)
		return -ERANGE;
	quiet_libbpf quiet;
	st_ = new (std::nothrow) state;
	if (!st_)
		return -ENOMEM;
	const int room = room_for(fds);
	errno = 0;
	st_->obj =
	    bpf_object__open_mem(guard_pass_bpf_object, sizeof(guard_pass_bpf_object), nullptr);
	if (!st_->obj) {
		int err = errno_or(-EINVAL);
		close();
		return err;
	}
	bpf_map *map = bpf_object__find_map_by_name(st_->obj, "slots");
	bpf_map *bss = bpf_object__find_map_by_name(st_->obj, ".bss");
	bpf_program *prog = bpf_object__find_program_by_name(st_->obj, "guard_pass");
	int err = (!map || !bss || !prog) ? -ENOENT : bpf_map__set_max_entries(map, uint32_t(room));
	if (err == 0 && bpf_object__load(st_->obj) != 0)
		err = errno_or(-EINVAL);
	if (err == 0) {
		// The program's pass_stamp: .bss holds nothing else.
		st_->bss_fd = bpf_map__fd(bss);
		if (bpf_map__value_size(bss) != sizeof(uint32_t))
			err = -ENOENT;
	}
	if (err == 0) {
		const size_t page = size_t(sysconf(_SC_PAGESIZE));
		map_len_ = (size_t(room) * sizeof(slot) + page - 1) / page * page;
		void *m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED,
			       bpf_map__fd(map), 0);
		if (m == MAP_FAILED) {
			err = errno_or(-ENOMEM);
		} else {
			slots_ = static_cast<slot *>(m);
			// Not inherited: a forked child's writes must never reach
			// this process's slots (the map is shared with the
			// kernel, so a MAP_SHARED copy would be shared with the
			// child too).  The child loads its own (after_fork()).
			if (madvise(m, map_len_, MADV_DONTFORK) != 0)
				err = errno_or(-EINVAL);
		}
	}
	if (err == 0) {
		// Only this process's files: one walk of its fd table, not of
		// every task on the machine.
		union bpf_iter_link_info info;
		memset(&info, 0, sizeof(info));
		info.task.pid = uint32_t(self);
		LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info,
			    .link_info_len = sizeof(info));
		errno = 0;
		st_->link = bpf_program__attach_iter(prog, &opts);
		if (!st_->link)
			err = errno_or(-EINVAL);
	}
	if (err < 0) {
		close();
		return err;
	}
	pid_ = self;
	room_ = room;
	last_stamp_ = 0;
	fds_[0] = bpf_map__fd(map);
	fds_[1] = st_->bss_fd;
	fds_[2] = bpf_program__fd(prog);
	fds_[3] = bpf_link__fd(st_->link);
	return 1;
}

int64_t pass_iter::run()
{
	if (!st_ || !st_->link)
		return -EBADF;
	uint32_t stamp = last_stamp_ + 1;
	if (stamp == 0)
		stamp = 1; // 0 is "never stamped"
	const uint32_t zero = 0;
	int it = bpf_map_update_elem(st_->bss_fd, &zero, &stamp, BPF_ANY) == 0
		     ? bpf_iter_create(bpf_link__fd(st_->link))
		     : -1;
	if (it < 0) {
		int err = errno_or(-EIO);
		close();
		return err;
	}
	// The program writes nothing to the iterator: reading it to its end
	// is the walk.  Bounded: the walk ends with the fd table.
	char buf[64];
	ssize_t n;
	do
		n = ::read(it, buf, sizeof(buf));
	while (n > 0 || (n < 0 && errno == EINTR));
	int err = n < 0 ? errno_or(-EIO) : 0;
	::close(it);
	if (err < 0) {
		close();
		return err;
	}
	last_stamp_ = stamp;
	return stamp;
}

void pass_iter::close()
{
	// In a forked child nothing is mapped there (MADV_DONTFORK): the
	// range may hold another mapping by now.
	if (slots_ && pid_ == getpid())
		munmap(slots_, map_len_);
	slots_ = nullptr;
	map_len_ = 0;
	if (st_) {
		bpf_link__destroy(st_->link);
		bpf_object__close(st_->obj);
		delete st_;
		st_ = nullptr;
	}
	pid_ = 0;
	room_ = 0;
	for (int &f : fds_)
		f = -1;
}

void pass_iter::after_fork()
{
	// The parent's state as fork() caught it, perhaps in the middle of
	// open() in a thread the child does not have: nothing of it is freed
	// or unmapped, only the child's copies of the descriptors are closed.
	if (pid_ != 0)
		for (int f : fds_)
			if (f >= 0)
				::close(f);
	st_ = nullptr;
	slots_ = nullptr;
	map_len_ = 0;
	pid_ = 0;
	room_ = 0;
	for (int &f : fds_)
		f = -1;
}

#else // built without libbpf

pass_iter::~pass_iter() = default;

int pass_iter::open(pid_t, int)
{
	return -EOPNOTSUPP;
}

int64_t pass_iter::run()
{
	return -EOPNOTSUPP;
}

void pass_iter::close() {}

void pass_iter::after_fork() {}

#endif

} // namespace sockbuf::bpf
