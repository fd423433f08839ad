// SPDX-License-Identifier: MIT
// Helpers for the tests that run with the shim preloaded.
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace shim_test
{

inline int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, level, name, &v, &len) != 0)
		return -1000 - errno;
	return v;
}

inline int lock_bits(int fd)
{
	return get_int(fd, SOL_SOCKET, SO_BUF_LOCK);
}

inline int rcvbuf(int fd)
{
	return get_int(fd, SOL_SOCKET, SO_RCVBUF);
}

inline int sndbuf(int fd)
{
	return get_int(fd, SOL_SOCKET, SO_SNDBUF);
}

// libc's own setsockopt/getsockopt, past the shim: what a program gets
// without it.
using setsockopt_fn = int (*)(int, int, int, const void *, socklen_t);
using getsockopt_fn = int (*)(int, int, int, void *, socklen_t *);
inline void *libc_handle()
{
	static void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	return h;
}
inline int plain_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	static auto f = reinterpret_cast<setsockopt_fn>(dlsym(libc_handle(), "setsockopt"));
	return f(fd, level, name, val, len);
}
inline int plain_get_int(int fd, int level, int name)
{
	static auto f = reinterpret_cast<getsockopt_fn>(dlsym(libc_handle(), "getsockopt"));
	int v = -1;
	socklen_t len = sizeof(v);
	return f(fd, level, name, &v, &len) == 0 ? v : -1000 - errno;
}

inline bool shim_loaded()
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "setsockopt");
	return sym && dladdr(sym, &info) && info.dli_fname &&
	       std::string(info.dli_fname).find("libsockbuf-shim.so") != std::string::npos;
}

inline int set_int(int fd, int name, int value)
{
	return setsockopt(fd, SOL_SOCKET, name, &value, sizeof(value));
}

struct fd_guard {
	int fd;
	explicit fd_guard(int f) : fd(f) {}
	~fd_guard()
	{
		if (fd >= 0)
			close(fd);
	}
	fd_guard(const fd_guard &) = delete;
	fd_guard &operator=(const fd_guard &) = delete;
};

inline int tcp()
{
	return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

inline sockaddr_in loopback(uint16_t port)
{
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

// Bound to 127.0.0.1:@port (0: any) and listening; -errno on failure.
inline int listener_on(int fd, uint16_t port)
{
	sockaddr_in a = loopback(port);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0)
		return -errno;
	if (listen(fd, 16) != 0)
		return -errno;
	return 0;
}

inline uint16_t port_of(int fd)
{
	sockaddr_in a{};
	socklen_t len = sizeof(a);
	getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
	return ntohs(a.sin_port);
}

inline int connect_to(int fd, uint16_t port)
{
	sockaddr_in a = loopback(port);
	return connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0 ? 0 : -errno;
}

#define REQUIRE_SHIM()                                                                             \
	ASSERT_TRUE(shim_test::shim_loaded())                                                      \
	    << "run with LD_PRELOAD=libsockbuf-shim.so (ctest sets it)"

} // namespace shim_test
