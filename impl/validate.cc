// SPDX-License-Identifier: MIT
// The argument and socket checks every public call makes before it changes anything.
#include "validate.h"

#include "sys.h"

#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace sockbuf::validate
{

int sizes(int snd, int rcv, bool allow_both_zero)
{
	if (snd < 0 || rcv < 0)
		return -EINVAL;
	if (snd == 0 && rcv == 0 && !allow_both_zero)
		return -EINVAL;
	if (snd > SOCKBUF_SIZE_MAX || rcv > SOCKBUF_SIZE_MAX)
		return -EOVERFLOW;
	return 0;
}

int flags(unsigned int flags, unsigned int allowed)
{
	if (flags & ~allowed)
		return -EINVAL;
	const unsigned int both = SOCKBUF_F_FALLBACK_LOCK | SOCKBUF_F_FALLBACK_DEFAULT;
	if ((flags & both) == both)
		return -EINVAL;
	return 0;
}

int socket_protocol(int fd, int *protocol)
{
	if (fd < 0)
		return -EBADF;
	return sys::get_int(fd, SOL_SOCKET, SO_PROTOCOL, protocol);
}

int tcp_socket(int fd)
{
	int protocol = -1;
	int ret = socket_protocol(fd, &protocol);
	if (ret < 0)
		return ret;
	return protocol == IPPROTO_TCP ? 0 : -EPROTOTYPE;
}

int tcp_type(int fd, int state)
{
	if (state >= 0)
		return 0;
	int type = -1;
	int ret = sys::get_int(fd, SOL_SOCKET, SO_TYPE, &type);
	if (ret < 0)
		return ret;
	return type == SOCK_STREAM ? 0 : -EPROTOTYPE;
}

int tcp_state(int fd)
{
	// tcpi_state is the first byte of struct tcp_info: ask for just it.
	unsigned char state = 0;
	socklen_t len = sizeof(state);
	if (sys::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &state, &len) < 0 || len < 1)
		return -1;
	return state;
}

} // namespace sockbuf::validate
