// SPDX-License-Identifier: GPL-2.0
/*
 * sock_set_initial_bufsize() and sock_lock_bufsize() as the series adds
 * them to net/core/sock.c, minus the floor (a field of struct sock that
 * only the core patch can add).
 */
#include <net/sock.h>

#include "sockbuf_kmod_helpers.h"

static void sockbuf_kmod_set_bufsize(struct sock *sk, int sndbuf, int rcvbuf,
				     bool lock)
{
	void (*write_space)(struct sock *sk);

	if (sndbuf > 0) {
		if (lock)
			sk->sk_userlocks |= SOCK_SNDBUF_LOCK;
		else
			sk->sk_userlocks &= ~SOCK_SNDBUF_LOCK;
		WRITE_ONCE(sk->sk_sndbuf, max_t(int, sndbuf, SOCK_MIN_SNDBUF));
		/* Wake up sending tasks if we upped the value. */
		write_space = READ_ONCE(sk->sk_write_space);
		write_space(sk);
	}
	if (rcvbuf > 0) {
		if (lock)
			sk->sk_userlocks |= SOCK_RCVBUF_LOCK;
		else
			sk->sk_userlocks &= ~SOCK_RCVBUF_LOCK;
		WRITE_ONCE(sk->sk_rcvbuf, max_t(int, rcvbuf, SOCK_MIN_RCVBUF));
	}
}

/**
 * sockbuf_kmod_set_initial_bufsize - size socket buffers, keep autotuning
 * @sk: socket, before listen() or connect()
 * @sndbuf: send buffer size in bytes, as stored in sk_sndbuf; 0 keeps it
 * @rcvbuf: receive buffer size in bytes, as stored in sk_rcvbuf; 0 keeps it
 *
 * Sets the sizes in force and clears the lock bits of the sides it sets.
 */
void sockbuf_kmod_set_initial_bufsize(struct sock *sk, int sndbuf, int rcvbuf)
{
	lock_sock(sk);
	sockbuf_kmod_set_bufsize(sk, sndbuf, rcvbuf, false);
	release_sock(sk);
}

/**
 * sockbuf_kmod_lock_bufsize - fix socket buffer sizes, autotuning off
 * @sk: socket
 * @sndbuf: send buffer size in bytes, as stored in sk_sndbuf; 0 keeps it
 * @rcvbuf: receive buffer size in bytes, as stored in sk_rcvbuf; 0 keeps it
 *
 * Sets the sizes in force and sets the lock bits of the sides it sets.
 */
void sockbuf_kmod_lock_bufsize(struct sock *sk, int sndbuf, int rcvbuf)
{
	lock_sock(sk);
	sockbuf_kmod_set_bufsize(sk, sndbuf, rcvbuf, true);
	release_sock(sk);
}
