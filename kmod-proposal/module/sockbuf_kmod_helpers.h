/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The sizing helpers of kmod-proposal/patches, carried out of tree under
 * names that cannot clash with the upstream ones.  Without the core patch
 * struct sock has no floor fields: these set sizes and lock bits only.
 */
#ifndef SOCKBUF_KMOD_HELPERS_H
#define SOCKBUF_KMOD_HELPERS_H

struct sock;

void sockbuf_kmod_set_initial_bufsize(struct sock *sk, int sndbuf, int rcvbuf);
void sockbuf_kmod_lock_bufsize(struct sock *sk, int sndbuf, int rcvbuf);

#endif
