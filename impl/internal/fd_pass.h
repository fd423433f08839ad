// SPDX-License-Identifier: MIT
// Passing a descriptor over a unix socket (SCM_RIGHTS): the floor
// registry's registration with the daemon (and sockbufd's receipt of
// it), and `sockbuf run`'s seccomp listener, handed from the child to
// its supervisor.  One descriptor a message, and one message a call.
#pragma once

#include <cstddef>

struct msghdr;

namespace sockbuf::fd_pass
{

// Async-signal-safe (sendmsg(2) only, no allocation).  Sends the @len
// bytes at @data and the descriptor @fd in one message on @sock, with
// MSG_NOSIGNAL (a closed peer is -EPIPE, not SIGPIPE); an interrupted call
// is not retried.  0 when all @len bytes went, -EIO when fewer did, or
// -errno.
int send_fd(int sock, const void *data, size_t len, int fd);

// Receives one message of up to @len bytes into @data on @sock, retrying
// a call interrupted before any data (EINTR).  The descriptor it carries
// comes with FD_CLOEXEC set (MSG_CMSG_CLOEXEC); any further descriptors
// in it are closed.  Returns the descriptor, -EPIPE when the message
// carried none or was not @len bytes long (the peer closed, or sent
// without one; a descriptor that came with it is closed), or -errno.
int recv_fd(int sock, void *data, size_t len);

// The descriptors that the message @mh (filled by recvmsg(2)) carries
// (SCM_RIGHTS): the first, or -1 when it carried none; every further one
// is closed.  Reads @mh only.
int take_fds(struct msghdr *mh);

} // namespace sockbuf::fd_pass
