/* SPDX-License-Identifier: MIT */
/* tirpc-bulk-client: READs of --size bytes, one at a time, from a
 * tirpc-bulk-server through libtirpc, on a socket that sockbuf sized
 * before connect() and handed to clnt_vc_create().
 *
 *   tirpc-bulk-client --connect=ADDR:PORT [--bufs=default|initial|lock]
 *       [--bufsize=SIZE] [--size=SIZE] [--bytes=SIZE] [--seconds=N]
 *       [--floor-guard=MS] [--cut-check=SIZE] [--json]
 *
 * Reads until --bytes or --seconds, whichever comes first, and reports
 * the rate and what both ends' sockets look like.  --cut-check=SIZE then
 * cuts the server's end of the connection to 8 KB (BULK_CUT) and times
 * how long until its send buffer reads SIZE or more again, unlocked. */
#include "../common/bulk_cli.h"
#include "bulk.h"

#include <poll.h>
#include <rpc/rpc.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int get_int(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0 ? v : -1;
}

static int usage(const char *why)
{
	fprintf(stderr,
		"tirpc-bulk-client: %s\n"
		"usage: tirpc-bulk-client --connect=ADDR:PORT [--bufs=default|initial|lock]\n"
		"       [--bufsize=SIZE] [--size=SIZE] [--bytes=SIZE] [--seconds=N]\n"
		"       [--floor-guard=MS] [--cut-check=SIZE] [--json]\n",
		why);
	return 2;
}

/* Cuts the server's end, then asks until it reads @want again, unlocked.
 * The time in ms, or -1 after 10 s. */
static double cut_check(CLIENT *clnt, int want, bulk_stat *before, bulk_stat *cut, bulk_stat *after)
{
	int small = 8192;
	bulk_stat *st = bulk_stat_1(NULL, clnt);
	if (!st)
		return -2;
	*before = *st;
	st = bulk_cut_1(&small, clnt);
	if (!st)
		return -2;
	*cut = *st;
	const double t0 = now_s();
	while (now_s() - t0 < 10) {
		st = bulk_stat_1(NULL, clnt);
		if (!st)
			return -2;
		*after = *st;
		if (st->sndbuf >= want && st->buf_lock == 0)
			return (now_s() - t0) * 1000;
		poll(NULL, 0, 1);
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct bulk_opts o;
	const char *bad_args = bulk_parse(argc, argv, 1, BULK_MAX, &o);
	if (bad_args)
		return usage(bad_args);

	/* Sized before connect(): the window scale is fixed in the handshake. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockbuf_floor floor;
	if (fd < 0 || size_socket("tirpc-bulk-client", fd, o.mode, (int)o.bufsize, &floor) < 0)
		return 1;
	if (connect(fd, (struct sockaddr *)&o.addr, sizeof(o.addr)) < 0) {
		perror("tirpc-bulk-client: connect");
		return 1;
	}
	if (o.guard_ms) {
		int g = sockbuf_guard_new(0);
		int err = g < 0 ? g : sockbuf_guard_add(g, fd, &floor);
		if (err == 0)
			err = sockbuf_guard_start(g, (unsigned int)o.guard_ms * 1000u);
		if (err < 0) {
			fprintf(stderr, "tirpc-bulk-client: floor guard: %s\n", strerror(-err));
			return 1;
		}
	}
	struct netbuf nb = {sizeof(o.addr), sizeof(o.addr), &o.addr};
	CLIENT *clnt = clnt_vc_create(fd, &nb, BULK_PROG, BULK_VERS, 0, 0);
	if (!clnt) {
		clnt_pcreateerror("tirpc-bulk-client: clnt_vc_create");
		return 1;
	}
	struct timeval tmo = {60, 0};
	clnt_control(clnt, CLSET_TIMEOUT, (char *)&tmo);

	bulk_read_args args = {0, (u_int)o.call};
	long long got = 0, calls = 0, bad = 0;
	const double t0 = now_s();
	double t = t0;
	while (got < o.bytes && t - t0 < o.seconds) {
		bulk_data *res = bulk_read_1(&args, clnt);
		if (!res) {
			clnt_perror(clnt, "tirpc-bulk-client: BULK_READ");
			return 1;
		}
		/* The pattern's first and last byte, and the length. */
		if (res->bulk_data_len != args.count || res->bulk_data_val[0] != 0 ||
		    res->bulk_data_val[args.count - 1] != (char)((args.count - 1) * 131u >> 3))
			bad++;
		got += res->bulk_data_len;
		calls++;
		clnt_freeres(clnt, (xdrproc_t)xdr_bulk_data, (char *)res);
		t = now_s();
	}
	const double secs = t - t0;
	const int csnd = get_int(fd, SO_SNDBUF), crcv = get_int(fd, SO_RCVBUF);
	const int clock_ = get_int(fd, SO_BUF_LOCK);
	bulk_stat srv = {0}, before = {0}, cut = {0}, after = {0};
	bulk_stat *st = bulk_stat_1(NULL, clnt);
	if (st)
		srv = *st;
	double restore_ms = 0;
	if (o.cut_want)
		restore_ms = cut_check(clnt, (int)o.cut_want, &before, &cut, &after);
	if (o.json) {
		printf("{\"bytes\":%lld,\"calls\":%lld,\"bad\":%lld,\"seconds\":%.3f,"
		       "\"mb_s\":%.3f,\"client\":{\"sndbuf\":%d,\"rcvbuf\":%d,\"lock\":%d},"
		       "\"server\":{\"sndbuf\":%d,\"rcvbuf\":%d,\"lock\":%d,\"rcv_wscale\":%d}",
		       got, calls, bad, secs, secs > 0 ? (double)got / secs / 1e6 : 0.0, csnd, crcv,
		       clock_, srv.sndbuf, srv.rcvbuf, srv.buf_lock, srv.rcv_wscale);
		if (o.cut_want)
			printf(",\"cut\":{\"before\":%d,\"cut\":%d,\"cut_lock\":%d,\"after\":%d,"
			       "\"after_lock\":%d,\"restore_ms\":%.1f,\"guard_interval_us\":%d,"
			       "\"guard_max_late_us\":%d,\"guard_restored\":%d}",
			       before.sndbuf, cut.sndbuf, cut.buf_lock, after.sndbuf,
			       after.buf_lock, restore_ms, after.guard_interval_us,
			       after.guard_max_late_us, after.guard_restored);
		printf("}\n");
	} else {
		printf("%lld bytes in %lld READs of %lld, %.2f s: %.3f MB/s (%lld bad)\n"
		       "client socket: snd %d rcv %d lock %d; server's: snd %d rcv %d lock %d "
		       "wscale %d\n",
		       got, calls, o.call, secs, secs > 0 ? (double)got / secs / 1e6 : 0.0, bad,
		       csnd, crcv, clock_, srv.sndbuf, srv.rcvbuf, srv.buf_lock, srv.rcv_wscale);
		if (o.cut_want)
			printf("server's send buffer cut %d -> %d (lock %d), %s %.1f ms later "
			       "(%d, lock %d)\n",
			       before.sndbuf, cut.sndbuf, cut.buf_lock,
			       restore_ms >= 0 ? "restored" : "NOT restored", restore_ms,
			       after.sndbuf, after.buf_lock);
	}
	clnt_destroy(clnt);
	return bad || restore_ms < 0 ? 1 : 0;
}
