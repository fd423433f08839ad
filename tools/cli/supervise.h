// SPDX-License-Identifier: MIT
// `sockbuf run --via seccomp`: sockbuf's policy for a program the LD_PRELOAD
// shim cannot reach (static, Go, anything making its own system calls).
//
// The child installs a seccomp filter that sends only
// setsockopt(SOL_SOCKET, SO_SNDBUF|SO_RCVBUF|SO_SNDBUFFORCE|SO_RCVBUFFORCE)
// and listen() to user notification (every other system call runs at full
// speed; listen() is answered by the kernel, after the supervisor noted
// the port of a listener it sized) and
// executes the program; this process stays its parent and answers each
// notification: it reads the value from the program's memory, checks the
// notification is still valid, takes the socket with pidfd_getfd(),
// applies the policy the shim would (shim/engine.cc) and answers with
// what the program's own setsockopt() would have returned.  The filter is
// inherited: threads, fork and exec are followed.  The floors it sets are
// published for the program (`sockbuf show`) and, with the configuration's
// guard:MS (--floor-guard), guarded from here (remote_guard.h): no copy
// of a socket is kept open.
#pragma once

#include "shim/config.h"

#include <string>

namespace sockbuf::cli::run
{

// 0 when this kernel offers what the supervisor needs (seccomp user
// notification with SECCOMP_USER_NOTIF_FLAG_CONTINUE, 5.5; pidfd_open
// and pidfd_getfd, 5.6), else -errno and the reason in @why.  The test
// seam SOCKBUF_RUN_FAULT=notif|pidfd_getfd in the environment makes it
// report that part missing (-ENOSYS).
int supervisor_available(std::string *why);

// What the supervisor cannot do that the shim can, for @cfg: "" when
// nothing, else the configuration items it would have to ignore.
std::string supervisor_unsupported(const shim::config &cfg);

// Starts argv[0] (PATH search) under the filter, supervises it and every
// process and thread it starts, and returns the exit status for `sockbuf
// run`: the program's own, 128 + signal when a signal ended it, 126/127
// when it could not be executed, 125 when the supervisor could not be set
// up.  Signals sent to this process (kill, not the terminal) are passed on.
// When the program exits while processes it started still run under the
// filter (a daemon that forked away), a copy of the supervisor stays with
// them in the background until the last one ends.
int supervise(char **argv, const shim::config &cfg);

} // namespace sockbuf::cli::run
