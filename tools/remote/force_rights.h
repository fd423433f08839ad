// SPDX-License-Identifier: MIT
// force_rights.h - whether a supervised program could use SO_*BUFFORCE
// itself.
//
// The kernel allows SO_SNDBUFFORCE/SO_RCVBUFFORCE only to a caller with
// CAP_NET_ADMIN in the initial user namespace (sk_setsockopt():
// sockopt_capable(), that is capable()): a program that is root in a user
// namespace of its own gets EPERM, even on a socket of a network
// namespace that namespace owns (measured on 6.18: `unshare -Urn` then
// SO_RCVBUFFORCE: EPERM).  The supervisor makes the call with its own
// credentials, so it asks this first, with the program's.
#pragma once

#include <sys/types.h>

namespace sockbuf::cli::run
{

// 1 when process @pid could make a FORCE call itself: it is in the
// initial user namespace (this process's, when this process is in it:
// its uid_map is the identity over all ids, as systemd also tells) and
// has CAP_NET_ADMIN in its effective set (libcap-ng); 0 when it could
// not; -errno when that cannot be told (the supervisor then treats it as
// 0).
int program_may_force(pid_t pid);

} // namespace sockbuf::cli::run
