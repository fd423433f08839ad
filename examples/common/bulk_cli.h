/* SPDX-License-Identifier: MIT */
/* What the BULK examples (tirpc, asio) share: their options, parsed in
 * one place, and sizing a socket with sockbuf before listen() or
 * connect(). */
#ifndef SOCKBUF_EXAMPLE_BULK_CLI_H
#define SOCKBUF_EXAMPLE_BULK_CLI_H

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
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
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || v < 0 || errno)
		return -1;
	int shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	if (*end || v > (LLONG_MAX >> shift))
		return -1;
	return v << shift;
}

/* A whole decimal number in [@lo, @hi] -> @out; 0 or -1 (garbage, a
 * trailing unit, out of range: atoi() would have said 0). */
static inline int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
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
	int port;
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host) ||
	    parse_int(colon + 1, 0, 65535, &port) < 0)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* The options of the BULK programs.  The server takes --listen, --bufs,
 * --bufsize, --floor-guard and --seconds; the client --connect in place
 * of --listen, and --size, --bytes, --cut-check and --json besides. */
struct bulk_opts {
	struct sockaddr_in addr; /* --listen or --connect */
	int mode;		 /* --bufs: bufs_* */
	long long bufsize;	 /* --bufsize, both directions */
	int guard_ms;		 /* --floor-guard: 0, none */
	int seconds;		 /* client: reading time; server: exit after (0: never) */
	long long call;		 /* client --size: bytes a READ asks for */
	long long bytes;	 /* client --bytes: stop after this many */
	long long cut_want;	 /* client --cut-check: 0, none */
	int json;		 /* client --json */
};

/* Parses @argv into @o for the client (@client != 0) or the server.
 * @call_max: the largest READ the protocol carries.  NULL, or why the
 * arguments are wrong (for the program's usage line). */
static inline const char *bulk_parse(int argc, char **argv, int client, long long call_max,
				     struct bulk_opts *o)
{
	const char *addr_opt = client ? "--connect" : "--listen";
	int have_addr = 0;
	memset(o, 0, sizeof(*o));
	o->mode = bufs_default;
	o->bufsize = 128 << 10;
	o->seconds = client ? 10 : 0;
	o->call = 1 << 20;
	o->bytes = 64LL << 20;
	for (int i = 1; i < argc; i++) {
		const char *v;
		if ((v = opt_value(argv[i], addr_opt))) {
			if (parse_addr(v, &o->addr) < 0)
				return client ? "--connect=ADDR:PORT: not an IPv4 address and port"
					      : "--listen=ADDR:PORT: not an IPv4 address and port";
			have_addr = 1;
		} else if ((v = opt_value(argv[i], "--bufs"))) {
			if ((o->mode = parse_bufs(v)) < 0)
				return "--bufs must be default, initial or lock";
		} else if ((v = opt_value(argv[i], "--bufsize"))) {
			o->bufsize = parse_size(v);
			if (o->bufsize <= 0 || o->bufsize > SOCKBUF_SIZE_MAX)
				return "--bufsize out of range";
		} else if ((v = opt_value(argv[i], "--floor-guard"))) {
			if (parse_int(v, 1, 60000, &o->guard_ms) < 0)
				return "--floor-guard=MS out of range (1-60000)";
		} else if ((v = opt_value(argv[i], "--seconds"))) {
			if (parse_int(v, client ? 1 : 0, 3600, &o->seconds) < 0)
				return client ? "--seconds out of range (1-3600)"
					      : "--seconds out of range (0-3600)";
		} else if (client && (v = opt_value(argv[i], "--size"))) {
			o->call = parse_size(v);
			if (o->call <= 0 || o->call > call_max)
				return "--size out of range (1-16M)";
		} else if (client && (v = opt_value(argv[i], "--bytes"))) {
			if ((o->bytes = parse_size(v)) < 0)
				return "--bytes out of range";
		} else if (client && (v = opt_value(argv[i], "--cut-check"))) {
			if ((o->cut_want = parse_size(v)) < 0 || o->cut_want > SOCKBUF_SIZE_MAX)
				return "--cut-check out of range";
		} else if (client && strcmp(argv[i], "--json") == 0) {
			o->json = 1;
		} else {
			return "unknown option";
		}
	}
	if (!have_addr)
		return client ? "--connect=ADDR:PORT is required"
			      : "--listen=ADDR:PORT is required";
	if (o->guard_ms && o->mode != bufs_initial)
		return "--floor-guard=MS goes with --bufs=initial";
	return NULL;
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
