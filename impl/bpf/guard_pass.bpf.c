// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
// The floor guard's pass as one BPF task_file iterator (SOCKBUF_GUARD_BPF):
// the kernel is crossed once per pass, not once per socket.  Attached to
// one process's files (bpf_iter_link_info.task, Linux 6.1); for each file
// whose number has a slot whose inode is the file's, it writes the
// socket's sk_sndbuf and sk_rcvbuf and this pass's stamp into the slot.
// User space reads the slots straight from the mmap'ed array: a slot not
// stamped by this pass names a closed fd, or a number reused for another
// file.  Dual-licensed so that the kernel takes it as GPL-compatible.
//
// No vmlinux.h: kernel_types.bpf.h declares the few fields read (CO-RE).
#include <linux/bpf.h>
#include <linux/types.h>

#include <bpf/bpf_helpers.h>

#include "kernel_types.bpf.h"

// impl/bpf_pass.h: struct slot, the same layout.
struct slot {
	__u32 ino; // the guarded socket's inode (0: no socket guarded here)
	__u32 stamp;
	__s32 snd, rcv;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); // set before loading: one slot per fd number
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

__u32 pass_stamp = 0; // set by user space before each pass

SEC("iter/task_file")
int guard_pass(struct bpf_iter__task_file *ctx)
{
	struct file *file = ctx->file;
	__u32 fd = ctx->fd;
	if (!file)
		return 0;
	struct slot *s = bpf_map_lookup_elem(&slots, &fd);
	if (!s || !s->ino || (__u32)file->f_inode->i_ino != s->ino)
		return 0;
	struct socket *sock = bpf_sock_from_file(file);
	if (!sock)
		return 0;
	struct sock *sk = sock->sk;
	if (!sk)
		return 0;
	s->snd = sk->sk_sndbuf;
	s->rcv = sk->sk_rcvbuf;
	s->stamp = pass_stamp;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
