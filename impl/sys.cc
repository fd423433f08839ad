// SPDX-License-Identifier: MIT
// The syscall seam: every socket syscall the library makes, with test-build fault injection.
#include "sys.h"

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::sys
{

#ifdef SOCKBUF_TEST_SEAM
namespace
{
std::atomic<const hooks *> g_hooks{nullptr};
} // namespace
void set_hooks(const hooks *h)
{
	g_hooks.store(h, std::memory_order_release);
}
namespace
{
std::atomic<int (*)(unsigned int, void *)> g_uring_setup_hook{nullptr};
} // namespace
void set_uring_setup_hook(int (*fn)(unsigned int entries, void *params))
{
	g_uring_setup_hook.store(fn, std::memory_order_release);
}
namespace
{
std::atomic<ssize_t (*)(int, void *, size_t)> g_read_hook{nullptr};
} // namespace
void set_read_hook(ssize_t (*fn)(int fd, void *buf, size_t len))
{
	g_read_hook.store(fn, std::memory_order_release);
}
namespace
{
std::atomic<int (*)(int, const char *, int, mode_t)> g_openat_hook{nullptr};
} // namespace
void set_openat_hook(int (*fn)(int dirfd, const char *path, int flags, mode_t mode))
{
	g_openat_hook.store(fn, std::memory_order_release);
}
#define SOCKBUF_HOOK(member, ...)                                                                  \
	do {                                                                                       \
		const hooks *h_ = g_hooks.load(std::memory_order_acquire);                         \
		if (h_ && h_->member) {                                                            \
			int r_ = h_->member(__VA_ARGS__);                                          \
			if (r_ != pass)                                                            \
				return r_;                                                         \
		}                                                                                  \
	} while (0)
#else
#define SOCKBUF_HOOK(member, ...) ((void)0)
#endif

namespace
{
// The socket options used here do not sleep interruptibly, but a signal
// can still surface as EINTR on some paths: retry a bounded number of
// times instead of handing callers an error they did not cause.
constexpr int eintr_retries = 8;

int get_once(int fd, int level, int name, void *val, socklen_t *len)
{
	SOCKBUF_HOOK(getsockopt, fd, level, name, val, len);
	return ::getsockopt(fd, level, name, val, len) == 0 ? 0 : -errno;
}

int set_once(int fd, int level, int name, const void *val, socklen_t len)
{
	SOCKBUF_HOOK(setsockopt, fd, level, name, val, len);
	return ::setsockopt(fd, level, name, val, len) == 0 ? 0 : -errno;
}
} // namespace

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	socklen_t want = *len;
	int ret = -EINTR;
	for (int i = 0; i < eintr_retries && ret == -EINTR; i++) {
		*len = want;
		ret = get_once(fd, level, name, val, len);
	}
	return ret;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int ret = -EINTR;
	for (int i = 0; i < eintr_retries && ret == -EINTR; i++)
		ret = set_once(fd, level, name, val, len);
	return ret;
}

int socket(int domain, int type, int protocol)
{
	SOCKBUF_HOOK(socket, domain, type, protocol);
	int fd = ::socket(domain, type, protocol);
	return fd >= 0 ? fd : -errno;
}

int uring_setup(unsigned int entries, void *params)
{
#ifdef SOCKBUF_TEST_SEAM
	if (auto fn = g_uring_setup_hook.load(std::memory_order_acquire)) {
		int r = fn(entries, params);
		if (r != pass)
			return r;
	}
#endif
	long fd = ::syscall(SYS_io_uring_setup, entries, params);
	return fd >= 0 ? int(fd) : -errno;
}

int uring_enter(int fd, unsigned int to_submit, unsigned int min_complete, unsigned int flags)
{
	long n = ::syscall(SYS_io_uring_enter, fd, to_submit, min_complete, flags, nullptr, 0);
	return n >= 0 ? int(n) : -errno;
}

ssize_t read(int fd, void *buf, size_t len)
{
#ifdef SOCKBUF_TEST_SEAM
	if (auto fn = g_read_hook.load(std::memory_order_acquire))
		return fn(fd, buf, len);
#endif
	ssize_t n = ::read(fd, buf, len);
	return n >= 0 ? n : -errno;
}

int openat(int dirfd, const char *path, int flags, mode_t mode)
{
#ifdef SOCKBUF_TEST_SEAM
	if (auto fn = g_openat_hook.load(std::memory_order_acquire)) {
		int r = fn(dirfd, path, flags, mode);
		if (r != pass)
			return r;
	}
#endif
	const int fd = ::openat(dirfd, path, flags, mode);
	return fd >= 0 ? fd : -errno;
}

void close(int fd)
{
	::close(fd);
}

int dup_cloexec(int fd)
{
	SOCKBUF_HOOK(dup_cloexec, fd);
	const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return copy >= 0 ? copy : -errno;
}

int get_int(int fd, int level, int name, int *out)
{
	socklen_t len = sizeof(*out);
	return getsockopt(fd, level, name, out, &len);
}

int set_int(int fd, int level, int name, int value)
{
	return setsockopt(fd, level, name, &value, sizeof(value));
}

} // namespace sockbuf::sys
