// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
// The floor guard's pass as a BPF task_file iterator, for measurement only
// (bench/lab/bpf_iter/README.md): could a pass that crosses into the kernel
// once, not once per socket, read 10,000 sockets in 2 ms?
//
// walk_only:  the iterator's own cost, visiting every file of the process.
// read_sizes: what a guard pass needs: the floors of the fd (an array
//             map indexed by fd), the file's inode (identity: a reused fd
//             number is reported, never judged), sk_sndbuf and sk_rcvbuf;
//             only sockets under a floor or with another inode are written
//             out.
//
// No vmlinux.h: kernel_types.bpf.h declares the few fields read (CO-RE).
#include <linux/bpf.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>

#include "kernel_types.bpf.h"

struct floor_entry {
	__u64 ino; // 0: fd not guarded
	__s32 snd, rcv;
};

struct below_record {
	__u32 fd;
	__u32 what; // 1 under a floor, 2 another file behind the fd number
	__s32 snd, rcv;
};

#define MAX_FDS 65536

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FDS);
	__type(key, __u32);
	__type(value, struct floor_entry);
} floors SEC(".maps");

__u64 visited = 0, guarded = 0;

SEC("iter/task_file")
int walk_only(struct bpf_iter__task_file *ctx)
{
	if (ctx->file)
		visited++;
	return 0;
}

SEC("iter/task_file")
int read_sizes(struct bpf_iter__task_file *ctx)
{
	struct file *file = ctx->file;
	__u32 fd = ctx->fd;
	if (!file)
		return 0;
	visited++;
	struct floor_entry *f = bpf_map_lookup_elem(&floors, &fd);
	if (!f || !f->ino)
		return 0;
	guarded++;
	struct below_record r = {.fd = fd};
	struct socket *sock = bpf_sock_from_file(file);
	if (!sock || file->f_inode->i_ino != f->ino) {
		r.what = 2;
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
		return 0;
	}
	struct sock *sk = sock->sk;
	if (!sk)
		return 0;
	r.snd = sk->sk_sndbuf;
	r.rcv = sk->sk_rcvbuf;
	if ((f->snd && r.snd < f->snd) || (f->rcv && r.rcv < f->rcv)) {
		r.what = 1;
		bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
