/* SPDX-License-Identifier: MIT */
/* What the BULK examples (tirpc, asio) share: options, and sizing
 * a socket with sockbuf before listen() or connect(). */
#ifndef SOCKBUF_EXAMPLE_BULK_CLI_H
#define SOCKBUF_EXAMPLE_BULK_CLI_H

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum bufs_mode { bufs_default, bufs_initial, bufs_lock };

/* "--name=value" -> value, or NULL. */
static inline const char *opt_value(const char *arg, const char *name)
{
	size_t n = strlen(name);
	return strncmp(arg, name, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

/* "128K", "4M", "1048576" -> bytes, or -1. */
static inline long long parse_size(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (end == s || v < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	return *end ? -1 : v;
}

static inline int parse_bufs(const char *s)
{
	if (strcmp(s, "default") == 0)
		return bufs_default;
	if (strcmp(s, "initial") == 0)
		return bufs_initial;
	if (strcmp(s, "lock") == 0)
		return bufs_lock;
	return -1;
}

/* "198.18.32.1:2049" -> @sa; 0 or -1. */
static inline int parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(colon + 1));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Sizes @fd before listen() or connect(): nothing (default), an initial
 * size that keeps autotuning (initial; @floor filled), or a lock.  Says
 * on @who's line what the kernel made of it.  0 or -errno. */
static inline int size_socket(const char *who, int fd, int mode, int size,
			      struct sockbuf_floor *floor)
{
	struct sockbuf_report rep;
	int err = 0;
	memset(floor, 0, sizeof(*floor));
	if (mode == bufs_initial) {
		err = sockbuf_set_initial_bufsize(fd, size, size, SOCKBUF_F_FALLBACK_LOCK, &rep);
		if (err == 0)
			sockbuf_report_floor(&rep, floor);
	} else if (mode == bufs_lock) {
		err = sockbuf_lock_bufsize(fd, size, size, 0, &rep);
	}
	if (err < 0) {
		fprintf(stderr, "%s: sizing the socket: %s\n", who, strerror(-err));
		return err;
	}
	if (mode != bufs_default)
		fprintf(stderr, "%s: snd %d (%s) rcv %d (%s), %s, floor snd %d rcv %d\n", who,
			rep.snd.effective, sockbuf_strategy_name(rep.snd.strategy),
			rep.rcv.effective, sockbuf_strategy_name(rep.rcv.strategy),
			rep.snd.locked == 1 ? "locked" : "unlocked", floor->snd, floor->rcv);
	return 0;
}

#endif
