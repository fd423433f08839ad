// SPDX-License-Identifier: MIT
// The next definitions of the functions the shim interposes (normally
// libc's, or another preloaded library's), resolved once with
// dlsym(RTLD_NEXT) at load time.  Before that (another library's
// constructor calling in early) they fall back to the raw system call.
//
// The shim's own code and the sockbuf library linked into it must reach
// the kernel through these, never through the interposed symbols: the
// library's calls are redirected here at link time (-Wl,--wrap).
#pragma once

#include <sys/socket.h>

namespace sockbuf::shim::real
{

void resolve(); // at load time; allocation-free afterwards

int setsockopt(int fd, int level, int name, const void *val, socklen_t len);
int getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int socket(int domain, int type, int protocol);
int listen(int fd, int backlog);
int connect(int fd, const struct sockaddr *addr, socklen_t len);
int accept(int fd, struct sockaddr *addr, socklen_t *len);
int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

} // namespace sockbuf::shim::real
