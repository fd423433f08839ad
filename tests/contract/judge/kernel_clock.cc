// SPDX-License-Identifier: MIT
#include "kernel_clock.h"

#include "prog_skips.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>

#ifdef SOCKBUF_HAVE_BPF
#include "bpf_quiet.h"
#include "floor_judge_bpf_object.h" // generated: the compiled floor_judge.bpf.c

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <sched.h>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#endif

namespace sockbuf::contract
{

#ifdef SOCKBUF_HAVE_BPF

namespace
{

// floor_judge.bpf.c's struct watch and struct dip_record.
struct watch {
	uint32_t lock; // struct bpf_spin_lock: never copied by map updates
	int32_t floor[2];
	uint64_t since[2];
	uint32_t since_fn[2];
};

struct dip_record {
	uint32_t ino;
	uint8_t dir, start_fn, end_fn, pad;
	uint64_t start_ns, end_ns;
};

// The programs in id order (the ids the programs post) and the kernel
// functions each may attach to: the first name the kernel's BTF has, with
// the program of the same rank (programs[1] null: programs[0] for both).
struct attach_point {
	const char *programs[2];
	const char *names[2];
};
constexpr attach_point points[] = {
    {{"on_mem_raise", nullptr}, {"__sk_mem_raise_allocated", nullptr}},
    {{"on_check_space", nullptr}, {"__tcp_check_space", "tcp_check_space"}},
    {{"on_frag_refill", nullptr}, {"sk_page_frag_refill", nullptr}},
    {{"on_alloc_skb", nullptr}, {"tcp_stream_alloc_skb", "sk_stream_alloc_skb"}},
    {{"on_rcv_established", nullptr}, {"tcp_rcv_established", nullptr}},
    {{"on_sendmsg", nullptr}, {"tcp_sendmsg_locked", nullptr}},
    {{"on_recvmsg", nullptr}, {"tcp_recvmsg", nullptr}},
    // The socket-option write: sk_setsockopt() (6.0), which every
    // SOL_SOCKET write reaches (setsockopt(2), io_uring, BPF); on 7.2
    // sock_setsockopt()'s exit missed most of the guard's restores
    // (both attached: 15,142 dips closed at sk_setsockopt, 26 at
    // sock_setsockopt).  Before it, sock_setsockopt() itself.
    {{"on_sk_setsockopt", "on_setsockopt"}, {"sk_setsockopt", "sock_setsockopt"}},
};
constexpr size_t n_points = sizeof(points) / sizeof(points[0]);

// The library's: libbpf kept quiet while loading, -errno of a call.
using bpf::errno_or;
using bpf::quiet_libbpf;

} // namespace

// floor_judge.bpf.c's struct judge_state, all of its .bss.
struct judge_state {
	uint64_t lost;
	int64_t open_now;
	int32_t max_floor[2];
	uint32_t frozen;
	int32_t in_flight;
};

size_t bss_len()
{
	return size_t(sysconf(_SC_PAGESIZE));
}

struct kernel_clock::state {
	bpf_object *obj = nullptr;
	bpf_link *links[n_points] = {};
	int prog_fds[n_points] = {}; // 0: none attached
	uint64_t skipped_at_begin = 0;

	// Runs the kernel did not make because the same program was already
	// running on that CPU (a softirq over a process-context run): each
	// is a look at a socket that never happened (bpf_prog_info's
	// recursion_misses, 5.12).
	uint64_t skipped() const { return uint64_t(std::max<int64_t>(0, skipped_runs(prog_fds))); }
	ring_buffer *rb = nullptr;
	int map_fd = -1;
	judge_state *js = nullptr; // the kernel's .bss, mapped
	std::mutex mu;		   // guards got
	std::vector<clock_record> got;
	std::atomic<bool> stop{false};
	std::thread drain; // between begin() and end() only

	// The ring drained as records come, so that a run with many dips
	// never fills it: one thread, the only reader while it runs.
	void start_drain()
	{
		stop = false;
		drain = std::thread([this] {
			while (!stop)
				ring_buffer__poll(rb, 50);
		});
	}
	void stop_drain()
	{
		stop = true;
		if (drain.joinable())
			drain.join();
	}

	// No program opens or closes a dip once this returns (bounded: a
	// program runs for microseconds; 1 s at most, then it goes on).
	void freeze()
	{
		__atomic_store_n(&js->frozen, 1u, __ATOMIC_SEQ_CST);
		const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
		while (__atomic_load_n(&js->in_flight, __ATOMIC_SEQ_CST) > 0 &&
		       std::chrono::steady_clock::now() < until)
			sched_yield();
	}

	static int on_record(void *ctx, void *data, size_t len)
	{
		auto *self = static_cast<state *>(ctx);
		if (len < sizeof(dip_record))
			return 0;
		dip_record r;
		std::memcpy(&r, data, sizeof(r));
		std::lock_guard<std::mutex> lock(self->mu);
		self->got.push_back(
		    {r.ino, r.dir, r.start_fn, r.end_fn, int64_t(r.start_ns), int64_t(r.end_ns)});
		return 0;
	}

	~state()
	{
		stop_drain();
		for (auto *l : links)
			bpf_link__destroy(l);
		ring_buffer__free(rb);
		if (js)
			munmap(js, bss_len());
		bpf_object__close(obj);
	}
};

void kernel_clock::load()
{
	quiet_libbpf quiet;
	errno = 0;
	btf *vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux) {
		err_ = errno_or(-ENOENT);
		why_ = fmt::format("no kernel BTF ({})", std::strerror(-err_));
		return;
	}
	const char *target[n_points] = {};
	int rank[n_points] = {};
	for (size_t k = 0; k < n_points; k++)
		for (int j = 0; j < 2 && !target[k]; j++)
			if (points[k].names[j] &&
			    btf__find_by_name_kind(vmlinux, points[k].names[j], BTF_KIND_FUNC) >
				0) {
				target[k] = points[k].names[j];
				rank[k] = j;
			}
	btf__free(vmlinux);

	// Opens the object with each program aimed at its function (those
	// with none not loaded) and loads it.
	std::string what;
	bpf_program *progs[n_points] = {};
	auto open_load = [&](std::unique_ptr<state> *out) {
		auto st = std::make_unique<state>();
		errno = 0;
		st->obj = bpf_object__open_mem(floor_judge_bpf_object,
					       sizeof(floor_judge_bpf_object), nullptr);
		if (!st->obj) {
			what = "open";
			return errno_or(-EINVAL);
		}
		int err = 0;
		for (size_t k = 0; k < n_points && err == 0; k++) {
			// Each program of the point: the chosen one aimed at its
			// function, any other left unloaded.
			for (int j = 0; j < 2 && err == 0; j++) {
				const char *name = points[k].programs[j];
				if (!name)
					continue;
				bpf_program *p = bpf_object__find_program_by_name(st->obj, name);
				what = name;
				const bool chosen =
				    target[k] && (rank[k] == j || !points[k].programs[1]);
				if (!p)
					err = -ENOENT;
				else if (!chosen)
					err = bpf_program__set_autoload(p, false);
				else {
					progs[k] = p;
					err = bpf_program__set_attach_target(p, 0, target[k]);
				}
			}
		}
		errno = 0;
		if (err == 0 && bpf_object__load(st->obj) != 0) {
			err = errno_or(-EINVAL);
			what = "load (verifier, fexit, ring buffer)";
		}
		*out = std::move(st);
		return err;
	};
	std::unique_ptr<state> st;
	int err = open_load(&st);
	// What this kernel lacks when the verifier says EINVAL: the socket-
	// option write (sk_setsockopt(), sock_setsockopt() before 6.0) takes
	// a struct by value (sockptr_t), which trampolines take from 6.1 only.
	if (err == -EINVAL)
		what = "load (the judge needs fexit on sk_setsockopt() or sock_setsockopt(), "
		       "whose sockptr_t argument trampolines take from 6.1)";
	if (err == 0) {
		st->map_fd = bpf_map__fd(bpf_object__find_map_by_name(st->obj, "watched"));
		bpf_map *bss = bpf_object__find_map_by_name(st->obj, ".bss");
		bpf_map *ring = bpf_object__find_map_by_name(st->obj, "dips");
		void *m = MAP_FAILED;
		if (st->map_fd < 0 || !bss || !ring ||
		    bpf_map__value_size(bss) != sizeof(judge_state)) {
			err = -ENOENT;
			what = "maps";
		} else if ((m = mmap(nullptr, bss_len(), PROT_READ | PROT_WRITE, MAP_SHARED,
				     bpf_map__fd(bss), 0)) == MAP_FAILED) {
			err = errno_or(-EINVAL);
			what = "mapping .bss";
		} else {
			st->js = static_cast<judge_state *>(m);
			// Frozen until the first begin(): attached programs do
			// nothing before a scenario watches its sockets.
			__atomic_store_n(&st->js->frozen, 1u, __ATOMIC_SEQ_CST);
			st->rb = ring_buffer__new(bpf_map__fd(ring), state::on_record, st.get(),
						  nullptr);
			if (!st->rb) {
				err = errno_or(-ENOMEM);
				what = "ring buffer";
			}
		}
	}
	for (size_t k = 0; k < n_points && err == 0; k++) {
		functions_.push_back(target[k] ? target[k] : "");
		if (!target[k])
			continue;
		errno = 0;
		st->links[k] = bpf_program__attach_trace(progs[k]);
		st->prog_fds[k] = bpf_program__fd(progs[k]);
		if (!st->links[k]) {
			err = errno_or(-EINVAL);
			what = fmt::format("attach to {}", target[k]);
		}
	}
	if (err == 0 && !(target[0] && target[7])) {
		err = -ENOENT;
		what = "__sk_mem_raise_allocated and sk_setsockopt or sock_setsockopt in the "
		       "kernel's BTF";
	}
	if (err < 0) {
		functions_.clear();
		err_ = err;
		why_ = fmt::format("the kernel clock's BPF programs did not load ({}: {})", what,
				   std::strerror(-err));
		return;
	}
	st_ = std::move(st);
	err_ = 0;
	std::string names;
	for (const auto &f : functions_)
		if (!f.empty())
			names += (names.empty() ? "" : ", ") + f;
	why_ = fmt::format("fexit on {}", names);
}

int kernel_clock::begin(const std::vector<watch_spec> &sockets)
{
	if (!st_)
		return err_;
	// Frozen since the last end(): forget its sockets and what is left
	// in the ring, then watch these and thaw.
	uint32_t key, next;
	std::vector<uint32_t> keys;
	for (uint32_t *k = nullptr; bpf_map_get_next_key(st_->map_fd, k, &next) == 0; k = &key) {
		keys.push_back(next);
		key = next;
	}
	for (uint32_t k : keys)
		bpf_map_delete_elem(st_->map_fd, &k);
	ring_buffer__consume(st_->rb);
	st_->got.clear();
	int ret = 0;
	int32_t max_snd = 0, max_rcv = 0;
	for (const auto &s : sockets) {
		watch w = {};
		w.floor[0] = s.floor_snd;
		w.floor[1] = s.floor_rcv;
		if (bpf_map_update_elem(st_->map_fd, &s.ino, &w, BPF_ANY) != 0)
			ret = -errno;
		max_snd = std::max(max_snd, s.floor_snd);
		max_rcv = std::max(max_rcv, s.floor_rcv);
	}
	judge_state *js = st_->js;
	__atomic_store_n(&js->lost, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&js->open_now, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&js->max_floor[0], max_snd, __ATOMIC_SEQ_CST);
	__atomic_store_n(&js->max_floor[1], max_rcv, __ATOMIC_SEQ_CST);
	st_->skipped_at_begin = st_->skipped();
	st_->start_drain();
	__atomic_store_n(&js->frozen, 0u, __ATOMIC_SEQ_CST);
	return ret;
}

std::vector<clock_record> kernel_clock::end(int64_t open_end_ns, uint64_t *lost, uint64_t *skipped)
{
	std::vector<clock_record> out;
	*lost = 0;
	*skipped = 0;
	if (!st_)
		return out;
	// Nothing opens or closes from here: every dip is either in the
	// ring or still open in the map, never in between.
	st_->freeze();
	st_->stop_drain();
	ring_buffer__consume(st_->rb);
	out.swap(st_->got);
	uint32_t key, next;
	for (uint32_t *k = nullptr; bpf_map_get_next_key(st_->map_fd, k, &next) == 0; k = &key) {
		key = next;
		watch w;
		if (bpf_map_lookup_elem(st_->map_fd, &key, &w) != 0)
			continue;
		for (int dir = 0; dir < 2; dir++)
			if (w.since[dir])
				out.push_back({key, dir, int(w.since_fn[dir]), -1,
					       int64_t(w.since[dir]),
					       std::max(open_end_ns, int64_t(w.since[dir]))});
	}
	*lost = __atomic_load_n(&st_->js->lost, __ATOMIC_SEQ_CST);
	*skipped = st_->skipped() - st_->skipped_at_begin;
	return out;
}

uint64_t kernel_clock::skipped_now() const
{
	return st_ ? st_->skipped() : 0;
}

#else // !SOCKBUF_HAVE_BPF

struct kernel_clock::state {
};

void kernel_clock::load()
{
	err_ = -EOPNOTSUPP;
	why_ = "the suite was built without libbpf (a static build)";
}

int kernel_clock::begin(const std::vector<watch_spec> &)
{
	return err_;
}

std::vector<clock_record> kernel_clock::end(int64_t, uint64_t *lost, uint64_t *skipped)
{
	*lost = 0;
	*skipped = 0;
	return {};
}

uint64_t kernel_clock::skipped_now() const
{
	return 0;
}

#endif

kernel_clock::kernel_clock()
{
	load();
}

kernel_clock::~kernel_clock() = default;

kernel_clock &kernel_clock::get()
{
	static kernel_clock the_clock;
	return the_clock;
}

} // namespace sockbuf::contract
