// SPDX-License-Identifier: MIT
// Whether sockbufd serves a process's floors: the daemon says so in a
// file while it runs (its pid, start time and network namespace), and
// `sockbuf show` reads it for each socket's served_by.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace sockbuf::cli::presence
{

// /run/sockbufd/serving (the unit's RuntimeDirectory).
inline constexpr const char *dir = "/run/sockbufd";
inline constexpr const char *file = "/run/sockbufd/serving";

// Written by the daemon at start: "PID START NETNS\n", through a file
// renamed into place.  0 or -errno.
int announce();
// Removed at a clean exit (a killed daemon's file names a dead process,
// or one started later: readers check the start time).
void withdraw();

// The inode of the network namespace of the process whose /proc
// directory is @proc ("/proc/self", "/proc/PID"), or 0.
uint64_t netns_of(const std::string &proc);

// Whether a live sockbufd serves the network namespace process @pid is
// in (the daemon serves the sockets of its own namespace only).
bool serves(pid_t pid);

} // namespace sockbuf::cli::presence
