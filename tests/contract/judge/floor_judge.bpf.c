// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
// The contract suite's dip judge (tests/contract/judge/kernel_clock.h):
// times, on the kernel's clock, every stretch a watched socket's send or
// receive buffer spends below its floor.  Owned by the suite, not the
// guard: it must see the guard fail, so it watches more than the guard
// does and shares nothing with it.
//
// Each program runs at the exit of one kernel function and compares the
// socket's sk_sndbuf and sk_rcvbuf with the floors user space put in the
// map.  A direction found below with no dip open opens one (the time, and
// which function); found at or above with a dip open, it closes it and
// posts the dip to the ring.  The functions are of two kinds:
//   where a cut is made (the guard watches the same four):
//     __sk_mem_raise_allocated, __tcp_check_space / tcp_check_space,
//     sk_page_frag_refill, tcp_stream_alloc_skb / sk_stream_alloc_skb;
//   around everything else that reads or changes a buffer, so that a cut
//   made in a function nobody watches is still seen, at the latest when
//   the enclosing call returns, and growth ends a dip:
//     tcp_rcv_established (every segment of an established socket: the
//     receive side's clamps and prunes, the send side's expansion),
//     tcp_sendmsg_locked, tcp_recvmsg, and sk_setsockopt (sock_setsockopt
//     before 6.0: the write that restores, whoever makes it).
// Two CPUs may evaluate the same socket at once (the guard's setsockopt()
// exit and a segment's softirq).  Each evaluation reads the sizes and
// moves the socket's dips under the socket's own spin lock in the map, so
// that the dips follow the sizes in the order they were read: a reading
// taken before another CPU's write can no longer be acted on after it
// (which, without the lock, opened a dip after the write that ended it,
// left open until the socket's next traffic, hundreds of ms on a quiet
// flow).
// At a scenario's end user space sets state.frozen and waits for
// state.in_flight to drain before it reads what is left open.
#include <linux/bpf.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>

#include "kernel_types.bpf.h"

// kernel_clock.cc: struct watch and struct dip_record, the same layout.
struct watch {
	struct bpf_spin_lock lock; // one evaluation at a time (judge())
	__s32 floor[2];		   // 0: send, 1: receive; 0 means not watched
	__u64 since[2];		   // bpf_ktime_get_ns() when the open dip began, 0: none
	__u32 since_fn[2];	   // the function that found it below
};

struct dip_record {
	__u32 ino;
	__u8 dir;      // 0 send, 1 receive
	__u8 start_fn; // function ids: the programs' order below
	__u8 end_fn;
	__u8 pad;
	__u64 start_ns, end_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 15);
	__type(key, __u32); // the socket's inode
	__type(value, struct watch);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} dips SEC(".maps");

// kernel_clock.cc: struct judge_state, the same layout; .bss holds it
// alone, mapped by user space.
struct judge_state {
	__u64 lost;	    // dips the ring had no room for
	__s64 open_now;	    // dips open: exact, each open and close counted once
	__s32 max_floor[2]; // the largest floors watched (a shortcut below)
	__u32 frozen;	    // 1: neither open nor close (between scenarios)
	__s32 in_flight;    // programs past the frozen test, not yet done
};
struct judge_state state = {};

// A dip one direction closed: posted after the lock is let go.
struct closed {
	__u64 start_ns, end_ns;
	__u32 start_fn;
	int set;
};

// Direction @dir of @w against @size, read under w->lock (held).
static __always_inline void one(struct watch *w, int dir, int size, __u32 fn, __u64 now,
				struct closed *out)
{
	if (!w->floor[dir])
		return;
	const __u64 since = w->since[dir];
	if (size < w->floor[dir]) {
		if (since)
			return;
		w->since[dir] = now;
		w->since_fn[dir] = fn;
		__sync_fetch_and_add(&state.open_now, 1);
		return;
	}
	if (!since)
		return;
	w->since[dir] = 0;
	__sync_fetch_and_add(&state.open_now, -1);
	out->start_ns = since;
	// The clock was read before the lock was taken: a CPU that read
	// it later may have opened the dip first.
	out->end_ns = now > since ? now : since;
	out->start_fn = w->since_fn[dir];
	out->set = 1;
}

static __always_inline void post(__u32 ino, int dir, __u32 fn, const struct closed *c)
{
	if (!c->set)
		return;
	struct dip_record r = {
	    .ino = ino,
	    .dir = (__u8)dir,
	    .start_fn = (__u8)c->start_fn,
	    .end_fn = (__u8)fn,
	    .start_ns = c->start_ns,
	    .end_ns = c->end_ns,
	};
	if (bpf_ringbuf_output(&dips, &r, sizeof(r), 0) != 0)
		__sync_fetch_and_add(&state.lost, 1);
}

static __always_inline int judge(struct sock *sk, __u32 fn)
{
	if (!sk)
		return 0;
	// No dip open anywhere and this socket at or above every floor: it
	// can neither open nor close one.
	if (sk->sk_sndbuf >= state.max_floor[0] && sk->sk_rcvbuf >= state.max_floor[1] &&
	    state.open_now <= 0)
		return 0;
	struct socket *sock = sk->sk_socket;
	if (!sock)
		return 0;
	struct file *file = sock->file;
	if (!file)
		return 0;
	__u32 ino = (__u32)file->f_inode->i_ino;
	struct watch *w = bpf_map_lookup_elem(&watched, &ino);
	if (!w)
		return 0;
	__sync_fetch_and_add(&state.in_flight, 1);
	if (!state.frozen) {
		struct closed c[2] = {};
		const __u64 now = bpf_ktime_get_ns();
		bpf_spin_lock(&w->lock);
		// Read under the lock: see the note at the top.
		const int snd = sk->sk_sndbuf, rcv = sk->sk_rcvbuf;
		one(w, 0, snd, fn, now, &c[0]);
		one(w, 1, rcv, fn, now, &c[1]);
		bpf_spin_unlock(&w->lock);
		post(ino, 0, fn, &c[0]);
		post(ino, 1, fn, &c[1]);
	}
	__sync_fetch_and_add(&state.in_flight, -1);
	return 0;
}

// The sock is the first argument of each but sock_setsockopt's (a
// struct socket); on fexit the verifier types ctx[0] from the BTF of the
// function attached.  Id 7 is the socket-option write: on_sk_setsockopt
// where sk_setsockopt() exists (6.0), on_setsockopt before it; user space
// loads one of the two.
SEC("fexit/__sk_mem_raise_allocated")
int on_mem_raise(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 0);
}

SEC("fexit/tcp_check_space")
int on_check_space(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 1);
}

SEC("fexit/sk_page_frag_refill")
int on_frag_refill(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 2);
}

SEC("fexit/tcp_stream_alloc_skb")
int on_alloc_skb(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 3);
}

SEC("fexit/tcp_rcv_established")
int on_rcv_established(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 4);
}

SEC("fexit/tcp_sendmsg_locked")
int on_sendmsg(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 5);
}

SEC("fexit/tcp_recvmsg")
int on_recvmsg(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 6);
}

SEC("fexit/sk_setsockopt")
int on_sk_setsockopt(unsigned long long *ctx)
{
	return judge((struct sock *)ctx[0], 7);
}

SEC("fexit/sock_setsockopt")
int on_setsockopt(unsigned long long *ctx)
{
	struct socket *sock = (struct socket *)ctx[0];
	return judge(sock ? sock->sk : 0, 7);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
