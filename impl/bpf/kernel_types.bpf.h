/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/* The few kernel structures the guard's BPF programs read, declared with
 * only the fields they use and relocated against the running kernel's BTF
 * (CO-RE, preserve_access_index): no vmlinux.h to generate at build time.
 * Used by impl/bpf/guard_pass.bpf.c, impl/bpf/guard_events.bpf.c and
 * bench/lab/bpf_iter/guard_iter.bpf.c. */
#pragma once

#include <linux/types.h>

struct seq_file;
struct task_struct;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct socket;

struct sock {
	int sk_sndbuf;
	int sk_rcvbuf;
	struct socket *sk_socket;
} __attribute__((preserve_access_index));

struct socket {
	struct sock *sk;
	struct file *file;
} __attribute__((preserve_access_index));

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
} __attribute__((preserve_access_index));
