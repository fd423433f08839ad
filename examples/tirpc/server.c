/* SPDX-License-Identifier: MIT */
/* tirpc-bulk-server: the BULK program (bulk.x) served by libtirpc on a
 * listening socket that sockbuf sized before listen(), with a floor guard
 * that watches the listener: the connections libtirpc accepts inside
 * svc_run() keep the listener's floor without the program ever seeing
 * them accepted.
 *
 *   tirpc-bulk-server --listen=ADDR:PORT [--bufs=default|initial|lock]
 *                     [--bufsize=SIZE] [--floor-guard=MS] [--seconds=N]
 *
 * Prints one line on standard output once it serves ("serving ..."). */
#include "../common/bulk_cli.h"
#include "bulk.h"

#include <netinet/tcp.h>
#include <rpc/rpc.h>
#include <signal.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

/* The dispatcher rpcgen -m made (bulk_svc.c); bulk.h does not declare it. */
void bulk_prog_1(struct svc_req *req, SVCXPRT *xprt);

static int g_guard = -1;
static unsigned int g_interval_us;
static char *g_data;
static u_int g_data_len;

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

static void fill_stat(int fd, bulk_stat *st)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	struct sockbuf_guard_totals t;
	memset(st, 0, sizeof(*st));
	st->sndbuf = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	st->rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	st->buf_lock = get_int(fd, SOL_SOCKET, SO_BUF_LOCK);
	st->rcv_wscale = -1;
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0)
		st->rcv_wscale = ti.tcpi_rcv_wscale;
	if (g_guard >= 0 && sockbuf_guard_stats(g_guard, &t) == 0) {
		st->guard_restored = (int)t.restored;
		st->guard_max_late_us = (int)t.max_late_us;
		st->guard_interval_us = (int)g_interval_us;
	}
}

bulk_data *bulk_read_1_svc(bulk_read_args *args, struct svc_req *req)
{
	static bulk_data res;
	(void)req;
	if (args->count > BULK_MAX)
		return NULL; /* no reply: the client times out, as for garbage */
	if (args->count > g_data_len) {
		char *p = realloc(g_data, args->count);
		if (!p)
			return NULL;
		for (u_int i = g_data_len; i < args->count; i++)
			p[i] = (char)(i * 131u >> 3);
		g_data = p;
		g_data_len = args->count;
	}
	res.bulk_data_len = args->count;
	res.bulk_data_val = g_data;
	return &res;
}

bulk_stat *bulk_stat_1_svc(void *arg, struct svc_req *req)
{
	static bulk_stat st;
	(void)arg;
	fill_stat(req->rq_xprt->xp_fd, &st);
	return &st;
}

bulk_stat *bulk_cut_1_svc(int *size, struct svc_req *req)
{
	static bulk_stat st;
	int half = *size / 2; /* the kernel doubles */
	setsockopt(req->rq_xprt->xp_fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
	fill_stat(req->rq_xprt->xp_fd, &st);
	return &st;
}

static int usage(const char *why)
{
	fprintf(stderr,
		"tirpc-bulk-server: %s\n"
		"usage: tirpc-bulk-server --listen=ADDR:PORT [--bufs=default|initial|lock]\n"
		"       [--bufsize=SIZE] [--floor-guard=MS] [--seconds=N]\n",
		why);
	return 2;
}

int main(int argc, char **argv)
{
	struct bulk_opts o;
	const char *bad_args = bulk_parse(argc, argv, 0, 0, &o);
	if (bad_args)
		return usage(bad_args);
	int one = 1;
	signal(SIGTERM, stop);
	signal(SIGALRM, stop);
	signal(SIGPIPE, SIG_IGN);
	if (o.seconds > 0)
		alarm((unsigned int)o.seconds);

	/* Sized before listen(): every accepted connection inherits the
	 * size, the unlocked state and the window scale. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockbuf_floor floor;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		perror("tirpc-bulk-server: socket");
		return 1;
	}
	if (size_socket("tirpc-bulk-server", fd, o.mode, (int)o.bufsize, &floor) < 0)
		return 1;
	if (bind(fd, (struct sockaddr *)&o.addr, sizeof(o.addr)) < 0 || listen(fd, 64) < 0) {
		perror("tirpc-bulk-server: bind/listen");
		return 1;
	}
	SVCXPRT *xprt = svc_vc_create(fd, 0, 0);
	if (!xprt) {
		fprintf(stderr, "tirpc-bulk-server: svc_vc_create failed\n");
		return 1;
	}
	/* No rpcbind: the client is given the port. */
	if (!svc_reg(xprt, BULK_PROG, BULK_VERS, bulk_prog_1, NULL)) {
		fprintf(stderr, "tirpc-bulk-server: svc_reg failed\n");
		return 1;
	}
	if (o.guard_ms) {
		/* libtirpc accepts inside svc_run(): the guard finds those
		 * connections by the listener and gives them its floor. */
		g_interval_us = (unsigned int)o.guard_ms * 1000u;
		g_guard = sockbuf_guard_new(0);
		int err = g_guard < 0 ? g_guard : sockbuf_guard_add_listener(g_guard, fd, &floor);
		if (err == 0)
			err = sockbuf_guard_start(g_guard, g_interval_us);
		if (err < 0) {
			fprintf(stderr, "tirpc-bulk-server: floor guard: %s\n", strerror(-err));
			return 1;
		}
	}
	printf("serving BULK on %s:%d (bufs %s, guard %d ms)\n", inet_ntoa(o.addr.sin_addr),
	       ntohs(o.addr.sin_port),
	       o.mode == bufs_initial ? "initial"
	       : o.mode == bufs_lock  ? "lock"
				      : "default",
	       o.guard_ms);
	fflush(stdout);
	svc_run();
	fprintf(stderr, "tirpc-bulk-server: svc_run returned\n");
	return 1;
}
