// SPDX-License-Identifier: MIT
// Small helpers for tests on real sockets.
#pragma once

#include <sockbuf/sockbuf.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace sockbuf::test
{

// What the library found this kernel offers (its cached probe).
inline struct sockbuf_probe_info probe()
{
	struct sockbuf_probe_info p;
	sockbuf_probe(&p, 0);
	return p;
}

// Whether this kernel lets the library unlock (SO_BUF_LOCK, 5.15+).
inline bool has_buf_lock()
{
	return probe().features & SOCKBUF_FEAT_BUF_LOCK;
}

// An fd closed on scope exit.
struct fd {
	int v = -1;
	explicit fd(int x) : v(x) {}
	~fd()
	{
		if (v >= 0)
			::close(v);
	}
	fd(const fd &) = delete;
	fd &operator=(const fd &) = delete;
	operator int() const { return v; }
};

inline int tcp()
{
	return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}
inline int udp()
{
	return ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

inline int getopt_int(int s, int level, int name)
{
	int v = -12345;
	socklen_t len = sizeof(v);
	return ::getsockopt(s, level, name, &v, &len) == 0 ? v : -12345;
}
inline int sndbuf(int s)
{
	return getopt_int(s, SOL_SOCKET, SO_SNDBUF);
}
inline int rcvbuf(int s)
{
	return getopt_int(s, SOL_SOCKET, SO_RCVBUF);
}
inline int buflock(int s)
{
	return getopt_int(s, SOL_SOCKET, SO_BUF_LOCK);
}

// First integer of a /proc/sys file (or -1).
inline int sysctl_int(const char *path, int index = 0)
{
	std::ifstream in(path);
	int v = -1;
	for (int i = 0; i <= index && (in >> v); i++) {
	}
	return in ? v : -1;
}

// A connected loopback TCP pair: client and the accepted server socket.
struct tcp_pair {
	int listener = -1, client = -1, server = -1;
	~tcp_pair()
	{
		for (int f : {listener, client, server})
			if (f >= 0)
				::close(f);
	}
};

inline bool make_pair(tcp_pair *p)
{
	struct sockaddr_in sa {
	};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	p->listener = tcp();
	if (::bind(p->listener, (sockaddr *)&sa, sizeof(sa)) || ::listen(p->listener, 1) ||
	    ::getsockname(p->listener, (sockaddr *)&sa, &len))
		return false;
	p->client = tcp();
	if (::connect(p->client, (sockaddr *)&sa, sizeof(sa)))
		return false;
	p->server = ::accept(p->listener, nullptr, nullptr);
	return p->server >= 0;
}

} // namespace sockbuf::test
