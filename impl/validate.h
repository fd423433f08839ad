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

// Like socket_protocol() and -EPROTOTYPE unless the protocol is
// IPPROTO_TCP.  That is not yet TCP: tcp_type() tells the rest.
int tcp_socket(int fd);

// Whether a socket that tcp_socket() passed is TCP: a raw socket
// (SOCK_RAW, IPPROTO_TCP) and a NETLINK_XFRM socket read 6 in SO_PROTOCOL
// too.  @state is what tcp_state() read, -1 when it was not read: TCP_INFO
// answers on a TCP socket and on none of those, so SO_TYPE is read only
// when it did not (TCP is the one SOCK_STREAM socket of protocol 6).
// 0, -EPROTOTYPE, or the -errno of getsockopt(SO_TYPE).
int tcp_type(int fd, int state);

// The TCP state byte of TCP_INFO, or -1 when it cannot be read.
int tcp_state(int fd);

} // namespace sockbuf::validate
