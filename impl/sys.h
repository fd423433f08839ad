// SPDX-License-Identifier: MIT
// The only place that calls the socket syscalls.  Everything above goes
// through here, so a test build can inject errors (EINTR, ENOPROTOOPT,
// EPERM, ENOMEM, ...) into exactly these calls.  Production builds call
// libc directly; the seam exists only when SOCKBUF_TEST_SEAM is defined.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

namespace sockbuf::sys
{

// Each returns 0 (or the new fd for socket()) or a negative errno.
int getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int socket(int domain, int type, int protocol);
void close(int fd);
// fcntl(F_DUPFD_CLOEXEC): a second descriptor of the same open file, or
// -errno.  The guard writes through one so that the number it checked
// cannot be re-pointed before the write.
int dup_cloexec(int fd);

// io_uring_setup(2) (the new fd or -errno) and io_uring_enter(2) (the
// number submitted or -errno), for the guard's batched reads.
int uring_setup(unsigned int entries, void *params);
int uring_enter(int fd, unsigned int to_submit, unsigned int min_complete, unsigned int flags);

// read(2): the count or -errno, one call, EINTR not retried (read_file.h
// retries it).  Async-signal-safe.
ssize_t read(int fd, void *buf, size_t len);

// openat(2) (AT_FDCWD for open(2)): the new fd or -errno, EINTR not
// retried.  The presence file's reader and writer (daemon_presence.h) open
// its directory and then the file in that directory through it.
int openat(int dirfd, const char *path, int flags, mode_t mode = 0);

// Integer getsockopt/setsockopt, the common case.
int get_int(int fd, int level, int name, int *out);
int set_int(int fd, int level, int name, int value);

#ifdef SOCKBUF_TEST_SEAM
// A hook sees every call first.  Returning 1 means "let it through";
// anything else is the result the caller gets (0 or -errno).
struct hooks {
	int (*getsockopt)(int fd, int level, int name, void *val, socklen_t *len);
	int (*setsockopt)(int fd, int level, int name, const void *val, socklen_t len);
	int (*socket)(int domain, int type, int protocol);
	int (*dup_cloexec)(int fd);
};
inline constexpr int pass = 1;
void set_hooks(const hooks *h); // nullptr removes them
// Sees every io_uring_setup first, like the hooks above (nullptr removes
// it): a test makes the ring unavailable with it.
void set_uring_setup_hook(int (*fn)(unsigned int entries, void *params));
// Replaces every read() above (nullptr removes it): the hook's result is
// the call's (the count or -errno); a hook that lets a call through makes
// it itself.  Tests open the EINTR path of read_file.h with it.
void set_read_hook(ssize_t (*fn)(int fd, void *buf, size_t len));
// Sees every openat() above first (nullptr removes it): pass lets the call
// through, anything else is its result (the fd or -errno).  Tests swap a
// directory between its check and the open of a file in it with it.
void set_openat_hook(int (*fn)(int dirfd, const char *path, int flags, mode_t mode));
#endif

} // namespace sockbuf::sys
