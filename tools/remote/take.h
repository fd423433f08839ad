// SPDX-License-Identifier: MIT
// pidfd_getfd() of another process's socket that keeps the socket's
// cgroup-v1 net_cls classid and net_prio index.
//
// The kernel's receive path (__receive_sock()) sets both to the taking
// thread's own.  Where the owner's net_cls or net_prio cgroup differs
// from the calling thread's, take_socket() also runs a short-lived thread with a
// file table of its own (only the pidfd in it, so that joining a net_prio
// cgroup re-marks no other socket) that joins the owner's cgroups
// through their v1 `tasks` files and takes the socket once more: the
// last receive marks it with the owner's values, and the copy returned
// (taken first) stays the same socket.  Nothing more where they do not
// differ (cgroup v2 has neither), and no call more than pidfd_getfd()
// where the host has no v1 net_cls or net_prio cgroup but a root.  Where the owner's cgroups cannot
// be joined (not root, a read-only cgroup mount as under systemd's ProtectControlGroups=), the
// socket gets the taker's values as before, and class_note() says why.
#pragma once

#include <string>
#include <sys/types.h>

namespace sockbuf::cli::remote
{

// pidfd_getfd(@pidfd, @fd, 0) of process @pid; -1 with errno as it.
int take_socket(int pidfd, pid_t pid, int fd);

// Why the last take_socket() on this thread left the socket with the
// taker's values where the owner's differ (empty: kept, or nothing to
// keep).
std::string class_note();

} // namespace sockbuf::cli::remote
