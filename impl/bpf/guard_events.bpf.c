// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
// The floor guard's event source (SOCKBUF_GUARD_EVENTS): fexit programs
// on the kernel functions that cut a TCP socket's send buffer, so that
// the guard learns which sockets to look at without a pass.
//
//   __sk_mem_raise_allocated()  memory pressure and memcg limits lower
//       sk_sndbuf at its suppress_allocation label
//       (sk_stream_moderate_sndbuf(), inline); global on every kernel
//       tested.  Not the sock_exceed_buf_limit tracepoint: right after
//       a cut the function usually returns early (a forced charge) and
//       the tracepoint does not fire.
//   tcp_check_space() / __tcp_check_space() (attached by user space to
//       whichever the running kernel has): the reserve rule
//       (tcp_should_expand_sndbuf(), 5.16) and tcp_sndbuf_expand() are
//       static and run under it.
//   sk_page_frag_refill()  a failed page allocation for the data of a
//       send (tcp_sendmsg_locked(), kTLS, splice) moderates the buffer;
//       exported on every kernel tested.
//   tcp_stream_alloc_skb() / sk_stream_alloc_skb() (5.18 renamed it;
//       user space attaches to whichever the kernel has): a failed skb
//       allocation enters memory pressure and moderates the buffer.
//   sk_setsockopt() (6.0; loadable from 6.1, whose trampolines take its
//       sockptr_t argument by value): anyone's SO_SNDBUF/SO_RCVBUF write
//       or SO_BUF_LOCK flip, and a BPF program's bpf_setsockopt(); user
//       space leaves it out where it does not load.
// The last two run on every send of every socket: the max_snd/max_rcv
// test below ends almost all of those calls before any map lookup.
//
// After the call each looks the socket up by its inode in the map of
// guarded sockets, and if a direction is below its floor and no record
// for the socket is pending, marks it pending and posts one record (the
// inode) to the ring buffer: one record per cut socket until the guard
// has looked at it and cleared the mark, however long the pressure lasts
// (two CPUs cutting the same socket at once may post two).
// A record carries the time it was posted (bpf_ktime_get_ns(), the
// CLOCK_MONOTONIC of user space): the guard measures how long records wait
// for its thread, the scheduler's share of the event path.
// A record the ring had no room for is counted in ring_lost and the mark
// cleared: the guard then makes a full pass.  The guard restores through
// its own restore path, which checks the socket's identity at the write:
// a record only says which socket to look at.
#include <linux/bpf.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>

#include "kernel_types.bpf.h"

// impl/guard_events.h: struct watched, the same layout.
struct watched {
	__s32 snd; // the floor, 0: not guarded
	__s32 rcv;
	__u32 pending; // 1: a record is posted and the guard has not looked yet
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); // filled from user space only
	__uint(max_entries, 1 << 20);
	__type(key, __u32); // the socket's inode
	__type(value, struct watched);
} guarded SEC(".maps");

// impl/guard_events.cc: struct record, the same layout.
struct record {
	__u32 ino;
	__u32 point; // which program posted it: 0-4, in the order below
	__u64 posted_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 18); // set before loading
} ring SEC(".maps");

__u64 ring_lost = 0; // records the ring had no room for
__u64 posted = 0;    // records posted
// The largest floors ever guarded (user space raises them, never lowers):
// a socket at or above both cannot be below its own, and leaves before
// the four dependent loads and the hash lookup.  On a bulk transfer the
// autotuned buffers are above any usual floor, so most calls end here.
__s32 max_snd = 0;
__s32 max_rcv = 0;

static __always_inline int look(struct sock *sk, __u32 point)
{
	if (!sk)
		return 0;
	if (sk->sk_sndbuf >= max_snd && sk->sk_rcvbuf >= max_rcv)
		return 0;
	struct socket *sock = sk->sk_socket;
	if (!sock)
		return 0;
	struct file *file = sock->file;
	if (!file)
		return 0;
	__u32 ino = (__u32)file->f_inode->i_ino;
	struct watched *w = bpf_map_lookup_elem(&guarded, &ino);
	if (!w)
		return 0;
	if (!((w->snd && sk->sk_sndbuf < w->snd) || (w->rcv && sk->sk_rcvbuf < w->rcv)))
		return 0;
	// No compare-and-swap (BPF atomics came in 5.12): two CPUs that
	// both find the mark clear post one record each, harmless.
	if (w->pending)
		return 0;
	w->pending = 1;
	struct record r = {.ino = ino, .point = point, .posted_ns = bpf_ktime_get_ns()};
	if (bpf_ringbuf_output(&ring, &r, sizeof(r), 0) != 0) {
		__sync_fetch_and_add(&ring_lost, 1);
		w->pending = 0;
		return 0;
	}
	__sync_fetch_and_add(&posted, 1);
	return 0;
}

// The sock is the first argument of both; on fexit the verifier types
// ctx[0] from the attached function's BTF.
SEC("fexit/__sk_mem_raise_allocated")
int on_mem_raise(unsigned long long *ctx)
{
	return look((struct sock *)ctx[0], 0);
}

SEC("fexit/tcp_check_space")
int on_check_space(unsigned long long *ctx)
{
	return look((struct sock *)ctx[0], 1);
}

SEC("fexit/sk_page_frag_refill")
int on_frag_refill(unsigned long long *ctx)
{
	return look((struct sock *)ctx[0], 2);
}

SEC("fexit/tcp_stream_alloc_skb")
int on_alloc_skb(unsigned long long *ctx)
{
	return look((struct sock *)ctx[0], 3);
}

// sk_setsockopt() calls no cut itself, but runs on every socket-option
// write: the early exit on max_snd/max_rcv above keeps the others' writes
// cheap.
SEC("fexit/sk_setsockopt")
int on_sk_setsockopt(unsigned long long *ctx)
{
	return look((struct sock *)ctx[0], 4);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
