// SPDX-License-Identifier: MIT
// What the suite's helper processes (the cutter, the daemon mode's
// served process and daemon) do after fork(): system calls only.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <vector>

namespace sockbuf::contract
{

// Closes every descriptor from 3 up but @keep (close_range(2), Linux 5.9;
// before it, nothing is closed).
void close_all_but(std::vector<int> keep);

// A helper process's first steps after fork(): it is sent @sig when the
// process that forked it exits (PR_SET_PDEATHSIG), and closes every
// descriptor from 3 up but @keep.  With a @parent: false, before any
// descriptor is closed, when @parent already exited (before the signal
// was set, so none will come); the child then ends.
bool after_fork(int sig, std::vector<int> keep, pid_t parent = -1);

// Writes @n bytes of @p to @fd, through EINTR and short writes; false on
// an error or a write of 0.
bool write_all(int fd, const void *p, size_t n);

} // namespace sockbuf::contract
