// SPDX-License-Identifier: MIT
// Argument and socket checks every public call makes before it changes
// anything.
#pragma once

namespace sockbuf::validate
{

// 0, -EINVAL (negative, or both zero when !allow_both_zero) or -EOVERFLOW
// (above SOCKBUF_SIZE_MAX).
int sizes(int snd, int rcv, bool allow_both_zero);

// 0 or -EINVAL for bits outside @allowed or contradictory fallbacks.
int flags(unsigned int flags, unsigned int allowed);

// Reads SO_PROTOCOL: -EBADF for fd < 0 or closed, -ENOTSOCK for a
// non-socket, else 0 with *protocol set (IPPROTO_TCP, IPPROTO_UDP, 0...).
int socket_protocol(int fd, int *protocol);

// Like socket_protocol() and -EPROTOTYPE unless the socket is TCP.
int tcp_socket(int fd);

// The TCP state byte of TCP_INFO, or -1 when it cannot be read.
int tcp_state(int fd);

} // namespace sockbuf::validate
