// SPDX-License-Identifier: GPL-2.0
/*
 * sndbuf_hold RTT_MS [SECONDS]: does a forced, unlocked send buffer keep
 * its size while the congestion window grows (tcp_sndbuf_expand())?
 *
 * In a network namespace of its own: loopback (64 KB MTU, so a few dozen
 * segments in flight ask for more than tcp_wmem[2]) delayed by netem,
 * RTT_MS / 2 each way (iproute2's tc); tcp_rmem[2] 32 MB there so that the
 * receive window does not cap the flight. The sender sets SO_SNDBUFFORCE
 * 8 MB (16 MB stored, above the 4 MB tcp_wmem[2]) then SO_BUF_LOCK 0,
 * before connect(), and writes for SECONDS (default 10, at most 1 GB);
 * the main thread samples SO_SNDBUF every 5 ms. One JSON line on stdout.
 * Needs root. Built statically for the kernel matrix's kmod guest.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

#define FORCE (8 << 20)
#define MAX_BYTES (1LL << 30)

static volatile int done;
static long long sent, received;
static int cfd, afd, seconds = 10;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int get_int(int fd, int name)
{
	socklen_t len = sizeof(int);
	int v = -1;

	return getsockopt(fd, SOL_SOCKET, name, &v, &len) ? -errno : v;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

static void *sender(void *arg)
{
	static char buf[1 << 20];
	double end = now_s() + seconds;
	ssize_t n;

	(void)arg;
	while (sent < MAX_BYTES && now_s() < end) {
		n = send(cfd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		sent += n;
	}
	shutdown(cfd, SHUT_WR);
	return NULL;
}

static void *receiver(void *arg)
{
	static char buf[1 << 20];
	ssize_t n;

	(void)arg;
	while ((n = recv(afd, buf, sizeof(buf), 0)) > 0)
		received += n;
	done = 1;
	return NULL;
}

static void fail(const char *what)
{
	printf("{\"error\": \"%s: %s\"}\n", what, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct ifreq ifr = { .ifr_name = "lo" };
	int rtt = argc > 1 ? atoi(argv[1]) : 120;
	int lfd, v, set, lowest, last, samples = 0;
	double t0, first_below = -1, elapsed;
	socklen_t len = sizeof(addr);
	pthread_t st, rt;
	char cmd[160];

	if (argc > 2)
		seconds = atoi(argv[2]);
	if (unshare(CLONE_NEWNET))
		fail("unshare");
	lfd = socket(AF_INET, SOCK_DGRAM, 0);
	if (lfd < 0 || ioctl(lfd, SIOCGIFFLAGS, &ifr))
		fail("lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(lfd, SIOCSIFFLAGS, &ifr))
		fail("lo up");
	close(lfd);
	/* iproute2's tc: busybox has one too, without netem. */
	snprintf(cmd, sizeof(cmd),
		 "%s qdisc add dev lo root netem delay %dms limit 100000 2>&1",
		 access("/usr/sbin/tc", X_OK) ? "tc" : "/usr/sbin/tc", rtt / 2);
	if (rtt > 0 && system(cmd))
		fail("tc netem");
	if (write_file("/proc/sys/net/ipv4/tcp_rmem", "4096 131072 33554432"))
		fail("tcp_rmem");

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	v = FORCE;
	if (setsockopt(cfd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)))
		fail("SO_SNDBUFFORCE");
	v = 0;
	if (setsockopt(cfd, SOL_SOCKET, SO_BUF_LOCK, &v, sizeof(v)))
		fail("SO_BUF_LOCK");
	set = get_int(cfd, SO_SNDBUF);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) ||
	    connect(cfd, (struct sockaddr *)&addr, sizeof(addr)))
		fail("connect");
	afd = accept(lfd, NULL, NULL);
	if (afd < 0)
		fail("accept");

	t0 = now_s();
	lowest = get_int(cfd, SO_SNDBUF);
	last = lowest;
	pthread_create(&rt, NULL, receiver, NULL);
	pthread_create(&st, NULL, sender, NULL);
	while (!done) {
		last = get_int(cfd, SO_SNDBUF);
		samples++;
		if (last < lowest)
			lowest = last;
		if (last < set && first_below < 0)
			first_below = now_s() - t0;
		usleep(5000);
	}
	elapsed = now_s() - t0;
	pthread_join(st, NULL);
	pthread_join(rt, NULL);
	printf("{\"rtt_ms\": %d, \"sndbuf_set\": %d, \"lock\": %d, "
	       "\"sndbuf_lowest\": %d, \"sndbuf_last\": %d, "
	       "\"first_below_set_s\": %.3f, \"samples\": %d, "
	       "\"bytes\": %lld, \"seconds\": %.2f, \"mb_per_s\": %.1f}\n",
	       rtt, set, get_int(cfd, SO_BUF_LOCK), lowest, last, first_below,
	       samples, received, elapsed, received / elapsed / 1e6);
	return 0;
}
