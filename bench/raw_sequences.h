// SPDX-License-Identifier: MIT
// The raw setsockopt/getsockopt sequences the public calls issue on a kernel
// with SO_BUF_LOCK and TCP_INFO (5.15+), written out by hand.  strace of the
// library gives the same calls in the same order (docs/performance.md).
#pragma once

#include <sockbuf/sockbuf.h>

#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace raw
{

inline int get_int(int fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);
	if (::getsockopt(fd, level, name, &v, &len) < 0)
		return -1;
	return v;
}

inline bool set_int(int fd, int level, int name, int v)
{
	return ::setsockopt(fd, level, name, &v, sizeof(v)) == 0;
}

// TCP_INFO (1 byte), SO_SNDBUF set+get, SO_RCVBUF set+get: what set_initial
// and lock both issue after SO_PROTOCOL.  @sum: the sizes read back plus
// the state, which the benchmarks keep from being optimised away.
inline bool set_sizes(int fd, int snd, int rcv, int *sum)
{
	unsigned char state = 0;
	socklen_t len = sizeof(state);
	if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &state, &len) < 0)
		return false;
	if (!set_int(fd, SOL_SOCKET, SO_SNDBUF, snd / 2))
		return false;
	int eff_snd = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	if (!set_int(fd, SOL_SOCKET, SO_RCVBUF, rcv / 2))
		return false;
	int eff_rcv = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	*sum = eff_snd + eff_rcv + state;
	return true;
}

// --- sockbuf_set_initial_bufsize(fd, 256K, 256K, 0) -------------------------
// SO_PROTOCOL, TCP_INFO (1 byte), SO_SNDBUF set+get, SO_RCVBUF set+get,
// SO_BUF_LOCK 0: 4 getsockopt + 3 setsockopt.
inline int set_initial(int fd, int snd, int rcv)
{
	int sum = 0;
	if (get_int(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP || !set_sizes(fd, snd, rcv, &sum) ||
	    !set_int(fd, SOL_SOCKET, SO_BUF_LOCK, 0))
		return -1;
	return sum;
}

// --- sockbuf_lock_bufsize(fd, 256K, 256K, 0) --------------------------------
// SO_PROTOCOL, TCP_INFO (1 byte), SO_SNDBUF set+get, SO_RCVBUF set+get:
// 4 getsockopt + 2 setsockopt.
inline int lock(int fd, int snd, int rcv)
{
	int sum = 0;
	if (get_int(fd, SOL_SOCKET, SO_PROTOCOL) < 0 || !set_sizes(fd, snd, rcv, &sum))
		return -1;
	return sum;
}

// --- sockbuf_get_state(fd) --------------------------------------------------
// SO_PROTOCOL, SO_DOMAIN, SO_TYPE, SO_SNDBUF, SO_RCVBUF, SO_BUF_LOCK,
// TCP_INFO (full struct): 7 getsockopt.
inline int get_state(int fd, struct sockbuf_state *st)
{
	st->protocol = get_int(fd, SOL_SOCKET, SO_PROTOCOL);
	st->domain = get_int(fd, SOL_SOCKET, SO_DOMAIN);
	st->type = get_int(fd, SOL_SOCKET, SO_TYPE);
	st->sndbuf = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	st->rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	st->lock = get_int(fd, SOL_SOCKET, SO_BUF_LOCK);
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	std::memset(&ti, 0, sizeof(ti));
	if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	st->tcp_state = ti.tcpi_state;
	return 0;
}

// --- sockbuf_check_floor(fd, floor, NULL) -----------------------------------
// SO_SNDBUF, SO_RCVBUF: 2 getsockopt.
inline int check_floor(int fd, const struct sockbuf_floor *f)
{
	int snd = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	int rcv = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	if (snd < 0 || rcv < 0)
		return -1;
	return (snd < f->snd ? SOCKBUF_SND : 0) | (rcv < f->rcv ? SOCKBUF_RCV : 0);
}

} // namespace raw
