// SPDX-License-Identifier: MIT
// The guard's event source: loading the fexit programs, their map of floors,
// and draining their ring.
#include "guard_events.h"

#include "caps.h"

#include <cerrno>
#include <ctime>
#include <unistd.h>

#ifdef SOCKBUF_HAVE_BPF
#include "bpf_quiet.h"
#include "guard_events_bpf_object.h" // generated: the compiled bpf/guard_events.bpf.c

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <cstdarg>
#include <new>
#include <sys/mman.h>
#endif

namespace sockbuf::bpf
{

#ifdef SOCKBUF_HAVE_BPF

namespace
{

size_t bss_len()
{
	return size_t(sysconf(_SC_PAGESIZE));
}

// .bss of bpf/guard_events.bpf.c, in order; mapped here (libbpf makes
// global data BPF_F_MMAPABLE, 5.5, but maps the kernel's copy only for
// skeletons): read and raised in place, never by a map update that would
// race the programs' counters.
struct counters {
	uint64_t ring_lost;
	uint64_t posted;
	int32_t max_snd, max_rcv;
};

} // namespace

struct event_source::state {
	bpf_object *obj = nullptr;
	bpf_link *links[n_points] = {};
	ring_buffer *rb = nullptr;
	int map_fd = -1, bss_fd = -1;
	counters *bss = nullptr; // libbpf's mapping of .bss
	int prog_fds[n_points];	 // the attached programs', -1 where none
	// For after_fork(): the maps', the ring's, its epoll's, and each
	// attached program's and link's; -1 where none.
	int fds[4 + 2 * n_points];
	state()
	{
		for (int &f : fds)
			f = -1;
		for (int &f : prog_fds)
			f = -1;
	}
};

event_source::~event_source()
{
	close();
}

int event_source::on_record(void *ctx, void *data, size_t len)
{
	auto *self = static_cast<event_source *>(ctx);
	if (len >= sizeof(record) && self->sink_) {
		record r;
		__builtin_memcpy(&r, data, sizeof(r));
		const uint32_t ino = r.ino;
		// How long it waited for the guard's thread (same clock).
		timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		const int64_t waited =
		    int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec - int64_t(r.posted_ns);
		if (waited > 0 && uint64_t(waited) > self->max_wait_ns_)
			self->max_wait_ns_ = uint64_t(waited);
		if (r.point < n_points)
			self->records_at_[r.point]++;
		try {
			if (self->sink_ns_)
				self->sink_ns_->reserve(self->sink_ns_->size() + 1);
			self->sink_->push_back(ino);
			if (self->sink_ns_)
				self->sink_ns_->push_back(r.posted_ns); // reserved: cannot throw
		} catch (...) {
			return -ENOMEM; // stops this drain; the rest wait for the next
		}
	}
	return 0;
}

namespace
{
// The programs of bpf/guard_events.bpf.c and the kernel functions each
// attaches to: the first of @names the kernel has (a function renamed
// between kernels); @bit when it is the first, @alt_bit the second.  An
// @optional program whose load fails is left out and the others loaded
// again without it.
struct attach_point {
	const char *program;
	const char *names[2];
	unsigned int bit, alt_bit;
	bool optional = false;
};
constexpr attach_point points[] = {
    {"on_mem_raise", {"__sk_mem_raise_allocated", nullptr}, ev_mem_raise, 0},
    // __tcp_check_space (7.x) before tcp_check_space (global before it,
    // an inline wrapper since).
    {"on_check_space",
     {"__tcp_check_space", "tcp_check_space"},
     ev_dunder_check_space,
     ev_check_space},
    {"on_frag_refill", {"sk_page_frag_refill", nullptr}, ev_frag_refill, 0},
    // sk_stream_alloc_skb() became tcp_stream_alloc_skb() in 5.18.
    {"on_alloc_skb",
     {"tcp_stream_alloc_skb", "sk_stream_alloc_skb"},
     ev_alloc_skb,
     ev_sk_stream_alloc_skb},
    // The socket-option write, sk_setsockopt() (6.0).  Its optval is a
    // sockptr_t passed by value, which a trampoline takes only from 6.1
    // (struct arguments): on 6.0 the load fails and the others load
    // without it.  sock_setsockopt(), the write before 6.0, has had the
    // same argument since 5.9, so it is not tried.  Without it an outside setsockopt()
    // cut waits for the safety net's pass.
    {"on_sk_setsockopt", {"sk_setsockopt", nullptr}, ev_sk_setsockopt, 0, true},
};
static_assert(sizeof(points) / sizeof(points[0]) == event_source::n_points);
} // namespace

int event_source::open()
{
	if (st_)
		return 0;
	// Unprivileged (the common case for a preloaded program): say so
	// before parsing the kernel's BTF, a few MB, for nothing; and give
	// the reason that applies even on a kernel without BTF.
	if (!caps::bpf_tracing_effective())
		return -EPERM;
	quiet_libbpf quiet;
	errno = 0;
	btf *vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux) {
		// libbpf says ESRCH when no vmlinux BTF exists (a kernel built
		// without CONFIG_DEBUG_INFO_BTF): the documented -ENOENT.
		const int err = errno_or(-ENOENT);
		return err == -ESRCH ? -ENOENT : err;
	}
	// Which of the functions this kernel has, per program: the first of
	// its names that the kernel's BTF knows.
	const char *target[n_points] = {};
	bool any = false, optional = false;
	for (size_t k = 0; k < n_points; k++)
		for (const char *name : points[k].names)
			if (!target[k] && name &&
			    btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) > 0) {
				target[k] = name;
				any = true;
				optional = optional || points[k].optional;
			}
	btf__free(vmlinux);
	if (!any)
		return -ENOENT;
	int err = open_targets(target);
	if (err < 0 && err != -ENOMEM && optional) {
		for (size_t k = 0; k < n_points; k++)
			if (points[k].optional)
				target[k] = nullptr;
		err = open_targets(target);
	}
	return err;
}

// Loads and attaches the programs of the functions named in @target (one
// per point, nullptr: not loaded).  0, or -errno with nothing left open.
int event_source::open_targets(const char *const *target)
{
	st_ = new (std::nothrow) state;
	if (!st_)
		return -ENOMEM;
	errno = 0;
	st_->obj =
	    bpf_object__open_mem(guard_events_bpf_object, sizeof(guard_events_bpf_object), nullptr);
	if (!st_->obj) {
		const int err = errno_or(-EINVAL);
		close();
		return err;
	}
	bpf_program *progs[n_points] = {};
	int err = 0;
	for (size_t k = 0; k < n_points && err == 0; k++) {
		progs[k] = bpf_object__find_program_by_name(st_->obj, points[k].program);
		if (!progs[k])
			err = -ENOENT;
		else if (!target[k])
			err = bpf_program__set_autoload(progs[k], false);
		else
			err = bpf_program__set_attach_target(progs[k], 0, target[k]);
	}
	bpf_map *map = bpf_object__find_map_by_name(st_->obj, "guarded");
	bpf_map *ring = bpf_object__find_map_by_name(st_->obj, "ring");
	bpf_map *bss = bpf_object__find_map_by_name(st_->obj, ".bss");
	if (err == 0 && (!map || !ring || !bss))
		err = -ENOENT;
	errno = 0;
	if (err == 0 && bpf_object__load(st_->obj) != 0)
		err = errno_or(-EINVAL);
	if (err == 0 && bpf_map__value_size(bss) != sizeof(counters))
		err = -ENOENT;
	if (err == 0) {
		void *m = mmap(nullptr, bss_len(), PROT_READ | PROT_WRITE, MAP_SHARED,
			       bpf_map__fd(bss), 0);
		if (m == MAP_FAILED) {
			err = errno_or(-EINVAL); // not mmapable: before 5.5
		} else {
			st_->bss = static_cast<counters *>(m); // close() unmaps it
			// Not inherited: a forked child never writes here.
			if (madvise(m, bss_len(), MADV_DONTFORK) != 0)
				err = errno_or(-EINVAL);
		}
	}
	unsigned int attached = 0;
	for (size_t k = 0; k < n_points && err == 0; k++) {
		if (!target[k])
			continue;
		errno = 0;
		st_->links[k] = bpf_program__attach_trace(progs[k]);
		if (!st_->links[k])
			err = errno_or(-EINVAL);
		else
			attached |=
			    target[k] == points[k].names[0] ? points[k].bit : points[k].alt_bit;
	}
	if (err == 0) {
		errno = 0;
		st_->rb = ring_buffer__new(bpf_map__fd(ring), on_record, this, nullptr);
		if (!st_->rb)
			err = errno_or(-ENOMEM);
	}
	if (err < 0) {
		close();
		return err;
	}
	st_->map_fd = bpf_map__fd(map);
	st_->bss_fd = bpf_map__fd(bss);
	int *f = st_->fds;
	*f++ = st_->map_fd;
	*f++ = st_->bss_fd;
	*f++ = bpf_map__fd(ring);
	*f++ = ring_buffer__epoll_fd(st_->rb);
	for (size_t k = 0; k < n_points; k++)
		if (st_->links[k]) {
			st_->prog_fds[k] = bpf_program__fd(progs[k]);
			*f++ = st_->prog_fds[k];
			*f++ = bpf_link__fd(st_->links[k]);
		}
	attached_ = attached;
	return 0;
}

int event_source::fd() const
{
	return st_ ? ring_buffer__epoll_fd(st_->rb) : -1;
}

int event_source::watch(uint32_t ino, int snd, int rcv)
{
	if (!st_)
		return -EBADF;
	const watched w = {snd, rcv, 0};
	// Raised before the socket is in the map: the programs' early exit
	// never skips a socket the map holds.
	auto raise = [](int32_t *max, int v) {
		if (v > __atomic_load_n(max, __ATOMIC_RELAXED))
			__atomic_store_n(max, v, __ATOMIC_RELEASE);
	};
	raise(&st_->bss->max_snd, snd);
	raise(&st_->bss->max_rcv, rcv);
	errno = 0;
	return bpf_map_update_elem(st_->map_fd, &ino, &w, BPF_ANY) == 0 ? 0 : errno_or(-EIO);
}

int event_source::clear(uint32_t ino, int snd, int rcv)
{
#ifdef SOCKBUF_TEST_SEAM
	if (fail_clears_ > 0) {
		fail_clears_--;
		return -ENOMEM;
	}
#endif
	return watch(ino, snd, rcv);
}

void event_source::unwatch(uint32_t ino)
{
	if (st_)
		bpf_map_delete_elem(st_->map_fd, &ino); // ENOENT: never watched
}

int event_source::drain(std::vector<uint32_t> *out, std::vector<uint64_t> *posted_ns)
{
	if (!st_)
		return -EBADF;
	sink_ns_ = posted_ns;
	const size_t before = out->size();
	sink_ = out;
	const int ret = ring_buffer__consume(st_->rb);
	sink_ = nullptr;
	sink_ns_ = nullptr;
	if (ret < 0 && out->size() == before)
		return ret;
	return int(out->size() - before);
}

uint64_t event_source::lost() const
{
	if (!st_)
		return 0;
	uint64_t n = __atomic_load_n(&st_->bss->ring_lost, __ATOMIC_RELAXED);
	// The runs the kernel skipped: a trampoline runs a program only if
	// the same program is not already running on that CPU (its per-CPU
	// active count), so a softirq over a run, or a task that preempted
	// one (a preemptible kernel), passes its cut without a look.  Each
	// is a record that was never posted (bpf_prog_info's
	// recursion_misses, 5.12; 0 before).
	for (const int fd : st_->prog_fds) {
		bpf_prog_info info = {};
		uint32_t len = sizeof(info);
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			n += info.recursion_misses;
	}
	return n;
}

#ifdef SOCKBUF_TEST_SEAM
void event_source::add_lost(uint64_t n)
{
	if (st_)
		__atomic_fetch_add(&st_->bss->ring_lost, n, __ATOMIC_RELAXED);
}
#endif

void event_source::close()
{
	if (st_) {
		if (st_->bss)
			munmap(st_->bss, bss_len());
		ring_buffer__free(st_->rb);
		for (bpf_link *l : st_->links)
			bpf_link__destroy(l);
		bpf_object__close(st_->obj);
		delete st_;
		st_ = nullptr;
	}
	attached_ = 0;
}

void event_source::after_fork()
{
	if (st_)
		for (int f : st_->fds)
			if (f >= 0)
				::close(f);
	st_ = nullptr; // the parent's, as fork() caught it: not freed
	attached_ = 0;
	sink_ = nullptr;
}

#else // built without libbpf

struct event_source::state {
};

event_source::~event_source() = default;
int event_source::on_record(void *, void *, size_t)
{
	return 0;
}
int event_source::open()
{
	return -EOPNOTSUPP;
}
int event_source::fd() const
{
	return -1;
}
int event_source::watch(uint32_t, int, int)
{
	return -EBADF;
}
int event_source::clear(uint32_t, int, int)
{
	return -EBADF;
}
void event_source::unwatch(uint32_t) {}
int event_source::drain(std::vector<uint32_t> *, std::vector<uint64_t> *)
{
	return -EBADF;
}
uint64_t event_source::lost() const
{
	return 0;
}
#ifdef SOCKBUF_TEST_SEAM
void event_source::add_lost(uint64_t) {}
#endif
void event_source::close() {}
void event_source::after_fork() {}

#endif

} // namespace sockbuf::bpf
