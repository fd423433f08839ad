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

// The journal: record 0 is the restore being written (one thread, one
// socket at a time); records 1 to max_left are restores cut short whose
// socket a start did not find in the process recorded (it exited, a copy
// of the socket lives on elsewhere), looked at again when a guarded
// process is found holding it.
struct journal_record {
	uint64_t magic; // journal_magic while a restore writes, 0 otherwise
	int32_t pid, fd;
	uint64_t cookie;
	int32_t lock; // SO_BUF_LOCK before the restore
	// The lock bits the restore may set: its floor's directions (0 in
	// the records of 0.6.0: both).
	int32_t dirs;
};
static_assert(sizeof(journal_record) == 32);
constexpr uint64_t journal_magic = 0x736f636b6a726e31ull; // "sockjrn1"
constexpr size_t max_left = 3;
// SO_BUF_LOCK's bits (the kernel's SOCK_SNDBUF_LOCK, SOCK_RCVBUF_LOCK).
constexpr int snd_lock = 1, rcv_lock = 2;

} // namespace sockbuf::cli::remote
