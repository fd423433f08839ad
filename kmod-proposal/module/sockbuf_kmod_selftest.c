// SPDX-License-Identifier: GPL-2.0
/*
 * In-kernel self-test of the sizing helpers, run when the module loads.
 *
 * Two kernel TCP connections over loopback (sock_create_kern), each a
 * listener and a connecting socket sized before listen()/connect(): one
 * pair with sockbuf_kmod_set_initial_bufsize(), one with
 * sockbuf_kmod_lock_bufsize().  A bounded transfer runs over each; sizes,
 * lock bits and window scales are checked on the connecting and the
 * accepted socket.  The verdict is the read-only module parameter
 * "selftest" (/sys/module/sockbuf_kmod/parameters/selftest): "pass ..." or
 * "fail: ...", followed by the figures seen.
 */
#include <linux/completion.h>
#include <linux/in.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "sockbuf_kmod_helpers.h"

/* Sizes as stored in sk_sndbuf/sk_rcvbuf. */
#define INITIAL_SIZE (256 * 1024)
#define LOCKED_SIZE (128 * 1024)
#define TRANSFER_BYTES (8 * 1024 * 1024)
#define CHUNK_BYTES (64 * 1024)
/* Per send or receive call, and for the whole transfer. */
#define IO_TIMEOUT_SECONDS 10
#define TRANSFER_DEADLINE_SECONDS 60

static char sockbuf_kmod_result[512] = "not run";
module_param_string(selftest, sockbuf_kmod_result,
		    sizeof(sockbuf_kmod_result), 0444);
MODULE_PARM_DESC(selftest,
		 "verdict of the self-test run at load: pass ... or fail: ...");

struct sockbuf_kmod_pair {
	struct socket *listener;
	struct socket *client;
	struct socket *accepted;
};

struct sockbuf_kmod_view {
	int sndbuf;
	int rcvbuf;
	int locks;
	int rcv_wscale;
};

struct sockbuf_kmod_sender {
	struct socket *sock;
	char *buf;
	int err;
	struct completion done;
};

static void sockbuf_kmod_view(struct socket *sock, struct sockbuf_kmod_view *v)
{
	struct sock *sk = sock->sk;

	lock_sock(sk);
	v->sndbuf = READ_ONCE(sk->sk_sndbuf);
	v->rcvbuf = READ_ONCE(sk->sk_rcvbuf);
	v->locks = sk->sk_userlocks & SOCK_BUF_LOCK_MASK;
	v->rcv_wscale = tcp_sk(sk)->rx_opt.rcv_wscale;
	release_sock(sk);
}

static void sockbuf_kmod_set_timeouts(struct socket *sock)
{
	lock_sock(sock->sk);
	WRITE_ONCE(sock->sk->sk_sndtimeo, IO_TIMEOUT_SECONDS * HZ);
	WRITE_ONCE(sock->sk->sk_rcvtimeo, IO_TIMEOUT_SECONDS * HZ);
	release_sock(sock->sk);
}

static void sockbuf_kmod_release(struct sockbuf_kmod_pair *p)
{
	if (p->accepted)
		sock_release(p->accepted);
	if (p->client)
		sock_release(p->client);
	if (p->listener)
		sock_release(p->listener);
	memset(p, 0, sizeof(*p));
}

/*
 * A listener and a client on 127.0.0.1, both sized by @size_fn before
 * listen()/connect(), connected and accepted.
 */
static int sockbuf_kmod_connect(struct sockbuf_kmod_pair *p,
				void (*size_fn)(struct sock *, int, int),
				int size,
				const char **step)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int err;

	*step = "sock_create_kern";
	err = sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &p->listener);
	if (!err)
		err = sock_create_kern(&init_net, AF_INET, SOCK_STREAM,
				       IPPROTO_TCP, &p->client);
	if (err)
		return err;
	size_fn(p->listener->sk, size, size);
	size_fn(p->client->sk, size, size);
	*step = "bind/listen";
	err = kernel_bind(p->listener, (struct sockaddr *)&addr, sizeof(addr));
	if (!err)
		err = kernel_listen(p->listener, 1);
	if (err)
		return err;
	*step = "getsockname";
	err = kernel_getsockname(p->listener, (struct sockaddr *)&addr);
	if (err < 0)
		return err;
	*step = "connect";
	err = kernel_connect(p->client, (struct sockaddr *)&addr,
			     sizeof(addr), 0);
	if (err)
		return err;
	*step = "accept";
	err = kernel_accept(p->listener, &p->accepted, 0);
	if (err)
		return err;
	sockbuf_kmod_set_timeouts(p->client);
	sockbuf_kmod_set_timeouts(p->accepted);
	return 0;
}

static int sockbuf_kmod_send_all(void *data)
{
	struct sockbuf_kmod_sender *s = data;
	size_t sent = 0;

	while (sent < TRANSFER_BYTES) {
		struct kvec vec = {
			.iov_base = s->buf,
			.iov_len = CHUNK_BYTES,
		};
		struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
		int n = kernel_sendmsg(s->sock, &msg, &vec, 1, vec.iov_len);

		if (n <= 0) {
			s->err = n ? n : -EPIPE;
			break;
		}
		sent += n;
	}
	complete(&s->done);
	return 0;
}

/* TRANSFER_BYTES from client to accepted, bounded in bytes and time. */
static int sockbuf_kmod_transfer(struct sockbuf_kmod_pair *p,
				 unsigned int *msecs)
{
	unsigned long start = jiffies;
	unsigned long deadline = start + TRANSFER_DEADLINE_SECONDS * HZ;
	struct sockbuf_kmod_sender s = { .sock = p->client };
	struct task_struct *task;
	size_t received = 0;
	char *rbuf;
	int err = 0;

	s.buf = vzalloc(CHUNK_BYTES);
	rbuf = vmalloc(CHUNK_BYTES);
	if (!s.buf || !rbuf) {
		err = -ENOMEM;
		goto out;
	}
	init_completion(&s.done);
	task = kthread_run(sockbuf_kmod_send_all, &s, "sockbuf_kmod_tx");
	if (IS_ERR(task)) {
		err = PTR_ERR(task);
		goto out;
	}
	while (received < TRANSFER_BYTES && time_before(jiffies, deadline)) {
		struct kvec vec = { .iov_base = rbuf, .iov_len = CHUNK_BYTES };
		struct msghdr msg = {};
		int n = kernel_recvmsg(p->accepted, &msg, &vec, 1, vec.iov_len,
				       0);

		if (n <= 0) {
			err = n ? n : -ECONNRESET;
			break;
		}
		received += n;
	}
	if (!err && received < TRANSFER_BYTES)
		err = -ETIMEDOUT;
	/* A sender still blocked returns once its peer is gone. */
	if (err)
		kernel_sock_shutdown(p->client, SHUT_RDWR);
	wait_for_completion(&s.done);
	if (!err)
		err = s.err;
	*msecs = jiffies_to_msecs(jiffies - start);
out:
	vfree(rbuf);
	vfree(s.buf);
	return err;
}

/* Appends "<label> snd S rcv R lock L wscale W" to the verdict. */
static size_t sockbuf_kmod_append_view(size_t at, const char *label,
				       const struct sockbuf_kmod_view *v)
{
	return at + scnprintf(sockbuf_kmod_result + at,
			      sizeof(sockbuf_kmod_result) - at,
			      "%s snd %d rcv %d lock %d wscale %d", label,
			      v->sndbuf, v->rcvbuf, v->locks, v->rcv_wscale);
}

/* Returns 0 and fills the views, or an error with *step naming where. */
static int sockbuf_kmod_run_pair(void (*size_fn)(struct sock *, int, int),
				 int size,
				 struct sockbuf_kmod_view *client,
				 struct sockbuf_kmod_view *accepted,
				 unsigned int *msecs, const char **step)
{
	struct sockbuf_kmod_pair p = {};
	int err;

	err = sockbuf_kmod_connect(&p, size_fn, size, step);
	if (!err) {
		*step = "transfer";
		err = sockbuf_kmod_transfer(&p, msecs);
	}
	if (!err) {
		sockbuf_kmod_view(p.client, client);
		sockbuf_kmod_view(p.accepted, accepted);
	}
	sockbuf_kmod_release(&p);
	return err;
}

static void sockbuf_kmod_selftest(void)
{
	struct sockbuf_kmod_view ic, ia, lc, la;
	unsigned int imsecs = 0, lmsecs = 0;
	const char *step = "";
	const char *why = NULL;
	size_t at;
	int err;

	err = sockbuf_kmod_run_pair(sockbuf_kmod_set_initial_bufsize,
				    INITIAL_SIZE, &ic, &ia, &imsecs, &step);
	if (err) {
		snprintf(sockbuf_kmod_result, sizeof(sockbuf_kmod_result),
			 "fail: initial pair, %s: error %d", step, err);
		return;
	}
	err = sockbuf_kmod_run_pair(sockbuf_kmod_lock_bufsize, LOCKED_SIZE,
				    &lc, &la, &lmsecs, &step);
	if (err) {
		snprintf(sockbuf_kmod_result, sizeof(sockbuf_kmod_result),
			 "fail: locked pair, %s: error %d", step, err);
		return;
	}

	if (ic.locks || ia.locks)
		why = "initial: a lock bit is set";
	else if (ic.sndbuf < INITIAL_SIZE || ic.rcvbuf < INITIAL_SIZE ||
		 ia.sndbuf < INITIAL_SIZE || ia.rcvbuf < INITIAL_SIZE)
		why = "initial: a buffer is below the size set";
	else if (lc.locks != SOCK_BUF_LOCK_MASK ||
		 la.locks != SOCK_BUF_LOCK_MASK)
		why = "locked: a lock bit is clear";
	else if (lc.sndbuf != LOCKED_SIZE || lc.rcvbuf != LOCKED_SIZE ||
		 la.sndbuf != LOCKED_SIZE || la.rcvbuf != LOCKED_SIZE)
		why = "locked: a buffer moved from the size set";
	else if (ia.rcv_wscale <= la.rcv_wscale)
		why = "initial: window scale no larger than a locked buffer's";

	at = scnprintf(sockbuf_kmod_result, sizeof(sockbuf_kmod_result),
		       "%s%s; %u bytes each; initial %d:",
		       why ? "fail: " : "pass", why ? why : "",
		       TRANSFER_BYTES, INITIAL_SIZE);
	at = sockbuf_kmod_append_view(at, " client", &ic);
	at = sockbuf_kmod_append_view(at, ", accepted", &ia);
	at += scnprintf(sockbuf_kmod_result + at,
			sizeof(sockbuf_kmod_result) - at,
			", %u ms; locked %d:", imsecs, LOCKED_SIZE);
	at = sockbuf_kmod_append_view(at, " client", &lc);
	at = sockbuf_kmod_append_view(at, ", accepted", &la);
	scnprintf(sockbuf_kmod_result + at, sizeof(sockbuf_kmod_result) - at,
		  ", %u ms", lmsecs);
}

static int __init sockbuf_kmod_init(void)
{
	sockbuf_kmod_selftest();
	pr_info("sockbuf_kmod: self-test %s\n", sockbuf_kmod_result);
	return 0;
}

static void __exit sockbuf_kmod_exit(void)
{
}

module_init(sockbuf_kmod_init);
module_exit(sockbuf_kmod_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("sockbuf: socket buffer sizing helpers and their loopback self-test");
