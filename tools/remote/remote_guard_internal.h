// SPDX-License-Identifier: MIT
// What the remote guard's two files share (remote_guard.cc: passes and
// restores; remote_guard_listeners.cc: accepted connections, and the
// search of a process's table by inode).
#pragma once

#include <cstdint>
#include <map>
#include <sys/types.h>
#include <utility>

namespace sockbuf::cli::remote
{

// The socket's cookie (SO_COOKIE), or 0.
uint64_t cookie_of(int fd);

// The states a dump reports sizes for (as the library's guard asks).
uint32_t full_socket_states();

// The states of a connection (no listener, nor a socket only bound).
uint32_t connected_states();

// The fd numbers in @pid's table of the sockets whose inode is a key of
// @want (filled in as found).
void find_inodes(pid_t pid, std::map<uint32_t, std::pair<pid_t, int>> *want);

} // namespace sockbuf::cli::remote
