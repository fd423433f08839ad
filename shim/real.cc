// SPDX-License-Identifier: MIT
#include "real.h"

#include <atomic>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::shim::real
{

namespace
{

using setsockopt_fn = int (*)(int, int, int, const void *, socklen_t);
using getsockopt_fn = int (*)(int, int, int, void *, socklen_t *);
using socket_fn = int (*)(int, int, int);
using listen_fn = int (*)(int, int);
using connect_fn = int (*)(int, const struct sockaddr *, socklen_t);
using accept_fn = int (*)(int, struct sockaddr *, socklen_t *);
using accept4_fn = int (*)(int, struct sockaddr *, socklen_t *, int);

// Written once at load time, read from any thread or signal handler.
std::atomic<setsockopt_fn> next_setsockopt{nullptr};
std::atomic<getsockopt_fn> next_getsockopt{nullptr};
std::atomic<socket_fn> next_socket{nullptr};
std::atomic<listen_fn> next_listen{nullptr};
std::atomic<connect_fn> next_connect{nullptr};
std::atomic<accept_fn> next_accept{nullptr};
std::atomic<accept4_fn> next_accept4{nullptr};

template <typename T> void lookup(std::atomic<T> *slot, const char *name)
{
	// The next definition after this library: libc's, or that of a
	// library preloaded after us.  Never our own symbol.
	if (void *p = dlsym(RTLD_NEXT, name))
		slot->store(reinterpret_cast<T>(p), std::memory_order_release);
}

} // namespace

void resolve()
{
	lookup(&next_setsockopt, "setsockopt");
	lookup(&next_getsockopt, "getsockopt");
	lookup(&next_socket, "socket");
	lookup(&next_listen, "listen");
	lookup(&next_connect, "connect");
	lookup(&next_accept, "accept");
	lookup(&next_accept4, "accept4");
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (auto f = next_setsockopt.load(std::memory_order_acquire))
		return f(fd, level, name, val, len);
	return int(syscall(SYS_setsockopt, fd, level, name, val, len));
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (auto f = next_getsockopt.load(std::memory_order_acquire))
		return f(fd, level, name, val, len);
	return int(syscall(SYS_getsockopt, fd, level, name, val, len));
}

int socket(int domain, int type, int protocol)
{
	if (auto f = next_socket.load(std::memory_order_acquire))
		return f(domain, type, protocol);
	return int(syscall(SYS_socket, domain, type, protocol));
}

int listen(int fd, int backlog)
{
	if (auto f = next_listen.load(std::memory_order_acquire))
		return f(fd, backlog);
	return int(syscall(SYS_listen, fd, backlog));
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (auto f = next_connect.load(std::memory_order_acquire))
		return f(fd, addr, len);
	return int(syscall(SYS_connect, fd, addr, len));
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (auto f = next_accept.load(std::memory_order_acquire))
		return f(fd, addr, len);
	return int(syscall(SYS_accept, fd, addr, len));
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	if (auto f = next_accept4.load(std::memory_order_acquire))
		return f(fd, addr, len, flags);
	return int(syscall(SYS_accept4, fd, addr, len, flags));
}

} // namespace sockbuf::shim::real

// The sockbuf library linked into the shim calls setsockopt, getsockopt
// and socket by name; -Wl,--wrap sends those calls here so that they reach
// the kernel and not the shim's own interposers.
extern "C" {
int __wrap_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return sockbuf::shim::real::setsockopt(fd, level, name, val, len);
}
int __wrap_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return sockbuf::shim::real::getsockopt(fd, level, name, val, len);
}
int __wrap_socket(int domain, int type, int protocol)
{
	return sockbuf::shim::real::socket(domain, type, protocol);
}
}
