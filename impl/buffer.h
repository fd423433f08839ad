// SPDX-License-Identifier: MIT
// Per-direction primitives on one socket, in the library's unit.  Index 0
// is the send buffer, 1 the receive buffer.
#pragma once

#include <cstdint>
#include <sys/socket.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55 // Linux 4.12 (asm-generic/socket.h)
#endif

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

// Both sizes with one getsockopt(SO_MEMINFO) (Linux 4.12): the same
// sk_sndbuf/sk_rcvbuf values get_size() reads, for half the syscalls.
// 0, or -errno: -ENOPROTOOPT where the kernel has no SO_MEMINFO.
int get_sizes(int fd, int *snd_out, int *rcv_out);
// The SO_MEMINFO read get_sizes() makes, for callers that batch it
// (io_uring): its length and where the two sizes sit.
inline constexpr unsigned int meminfo_len = 4 * sizeof(uint32_t);
int meminfo_snd(const uint32_t *mem);
int meminfo_rcv(const uint32_t *mem);

// SO_BUF_LOCK bits (SOCKBUF_SND/SOCKBUF_RCV).
int get_lock(int fd, int *bits);
int set_lock(int fd, int bits);

// Why a size set with SO_*BUF reads back as it does.
uint32_t clamps_after_setbuf(int requested, int effective);

// Same for a receive buffer raised through SO_RCVLOWAT; tcp_rmem_max is
// tcp_rmem[2] (-1 unknown).
uint32_t clamps_after_rcvlowat(int requested, int effective, int tcp_rmem_max);

} // namespace sockbuf::buffer
