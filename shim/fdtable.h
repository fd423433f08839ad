// SPDX-License-Identifier: MIT
// What the shim remembers per socket, in a fixed-size table indexed by fd:
// no allocation, no lock, usable from a signal handler.  An entry belongs
// to a socket only while its cookie matches the socket's SO_COOKIE, so a
// closed fd number reused by another socket never inherits stale state
// (close() is not interposed).
#pragma once

#include "config.h"

#include <atomic>
#include <cstdint>

namespace sockbuf::shim
{

// Fds at or above this have no entry: the shim still converts their size
// requests but keeps no floors or roles for them.
inline constexpr int fd_table_size = 65536;

// Per-direction flag bits in fd_state::flags.
inline constexpr uint8_t flag_force(dir d)
{
	return uint8_t(1u << d); // the request used SO_*BUFFORCE
}
inline constexpr uint8_t flag_initial(dir d)
{
	return uint8_t(4u << d); // converted to an unlocked initial size
}
// The floors are the listener's, inherited at accept() (published as
// registry::by_listener until the program sizes the socket itself).
inline constexpr uint8_t flag_inherited = 16;
// The socket is TCP (SO_PROTOCOL read once, while the entry is its).
inline constexpr uint8_t flag_tcp = 32;
// The registry holds the entry's floors as they are now (publish_floors()).
inline constexpr uint8_t flag_published = 64;

struct fd_state {
	std::atomic<uint64_t> cookie{0};
	std::atomic<int32_t> requested[2] = {}; // the program's setsockopt value
	std::atomic<int32_t> floor[2] = {};	// set_initial's floor, kernel unit
	std::atomic<uint16_t> port{0};
	std::atomic<uint8_t> role{role_any};
	std::atomic<uint8_t> flags{0};
};

// The entry for @fd, or nullptr when @fd is outside the table.
fd_state *fd_slot(int fd);

// The socket's SO_COOKIE, or 0 when @fd is not a socket.
uint64_t fd_cookie(int fd);

// Whether @e currently describes the socket with @cookie.
bool fd_owned(const fd_state *e, uint64_t cookie);

// Makes @e describe the socket with @cookie, clearing what a previous
// socket with the same fd number left there.
void fd_claim(fd_state *e, uint64_t cookie);

// One past the highest fd ever claimed: the floor guard scans no further.
int fd_high_water();

} // namespace sockbuf::shim
