// SPDX-License-Identifier: MIT
// Calls on one fd from different threads of this process run one at a
// time.  SO_BUF_LOCK holds both lock bits in one value, so unlocking one
// direction is a read-modify-write of that value, and SO_SNDBUF/SO_RCVBUF
// set a bit of it as a side effect: two calls that interleave can leave a
// bit set that both reports call clear (or clear one a lock call set).
//
// The lock is a spin word per stripe of fds, not a mutex: the LD_PRELOAD
// shim calls the library from the host program's setsockopt(), possibly in
// a signal handler or a child forked while another thread held a stripe.
// A thread that re-enters on a stripe it holds (a signal handler on the
// same thread) goes on without waiting; a forked child starts with every
// stripe free.  Not covered: the same socket reached through another fd
// (dup, SCM_RIGHTS, another process), or a setsockopt of the program's
// own made while a call runs.
#pragma once

namespace sockbuf::fd_serial
{

class guard
{
public:
	explicit guard(int fd);
	~guard();
	guard(const guard &) = delete;
	guard &operator=(const guard &) = delete;

private:
	int stripe_;
	bool held_; // false: re-entered on this thread's own stripe
};

// Registers the fork handler that frees every stripe in the child; called
// once while the probe cache is filled (not async-signal-safe).
void install_fork_handler();

} // namespace sockbuf::fd_serial
