// SPDX-License-Identifier: MIT
// Per-direction primitives on one socket, in the library's unit.  Index 0
// is the send buffer, 1 the receive buffer.
#pragma once

#include <cstdint>

namespace sockbuf::buffer
{

inline constexpr int snd = 0;
inline constexpr int rcv = 1;
inline constexpr int dir_bit(int i)
{
	return 1 << i;
} // SOCKBUF_SND/RCV

// setsockopt(SO_SNDBUF/SO_RCVBUF or the FORCE variants) with half of size.
int set_size(int fd, int i, int size, bool force);
int get_size(int fd, int i, int *out);

// SO_BUF_LOCK bits (SOCKBUF_SND/SOCKBUF_RCV).
int get_lock(int fd, int *bits);
int set_lock(int fd, int bits);

// Why a size set with SO_*BUF reads back as it does.
uint32_t clamps_after_setbuf(int requested, int effective);

// Same for a receive buffer raised through SO_RCVLOWAT; tcp_rmem_max is
// tcp_rmem[2] (-1 unknown).
uint32_t clamps_after_rcvlowat(int requested, int effective, int tcp_rmem_max);

} // namespace sockbuf::buffer
