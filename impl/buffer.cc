// SPDX-License-Identifier: MIT
// Per-direction size, lock and read-back primitives on one socket, in the library's unit.
#include "buffer.h"

#include "sys.h"

#include <sockbuf/sockbuf.h>

#include <cerrno>
#include <linux/sock_diag.h>
#include <sys/socket.h>

namespace sockbuf::buffer
{

namespace
{
constexpr int opt_size[2] = {SO_SNDBUF, SO_RCVBUF};
constexpr int opt_force[2] = {SO_SNDBUFFORCE, SO_RCVBUFFORCE};
// The kernel copies min(optlen, its array): ask for the first four u32
// only, up to SK_MEMINFO_SNDBUF.
static_assert(SK_MEMINFO_RCVBUF < 4 && SK_MEMINFO_SNDBUF < 4);
} // namespace

int set_size(int fd, int i, int size, bool force)
{
	// The kernel stores twice what it is given: hand it half.
	return sys::set_int(fd, SOL_SOCKET, force ? opt_force[i] : opt_size[i], size / 2);
}

int get_size(int fd, int i, int *out)
{
	return sys::get_int(fd, SOL_SOCKET, opt_size[i], out);
}

int meminfo_snd(const uint32_t *mem)
{
	return int(mem[SK_MEMINFO_SNDBUF]);
}

int meminfo_rcv(const uint32_t *mem)
{
	return int(mem[SK_MEMINFO_RCVBUF]);
}

int get_sizes(int fd, int *snd_out, int *rcv_out)
{
	uint32_t mem[meminfo_len / sizeof(uint32_t)] = {};
	socklen_t len = meminfo_len;
	int ret = sys::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len);
	if (ret < 0)
		return ret;
	if (len != meminfo_len)
		return -EPROTO;
	*snd_out = meminfo_snd(mem);
	*rcv_out = meminfo_rcv(mem);
	return 0;
}

int get_lock(int fd, int *bits)
{
	return sys::get_int(fd, SOL_SOCKET, SO_BUF_LOCK, bits);
}

int set_lock(int fd, int bits)
{
	return sys::set_int(fd, SOL_SOCKET, SO_BUF_LOCK, bits);
}

uint32_t clamps_after_setbuf(int requested, int effective)
{
	uint32_t c = 0;
	if (requested & 1)
		c |= SOCKBUF_CLAMP_ODD;
	int even = requested & ~1;
	if (effective < even)
		c |= SOCKBUF_CLAMP_MEM_MAX;
	else if (effective > even)
		c |= SOCKBUF_CLAMP_SOCK_MIN;
	return c;
}

uint32_t clamps_after_rcvlowat(int requested, int effective, int tcp_rmem_max)
{
	uint32_t c = 0;
	if (requested & 1)
		c |= SOCKBUF_CLAMP_ODD;
	int even = requested & ~1;
	if (effective > even)
		c |= SOCKBUF_CLAMP_ALREADY_LARGER;
	else if (effective < even && tcp_rmem_max >= 0 && requested / 2 > tcp_rmem_max / 2)
		c |= SOCKBUF_CLAMP_RCVLOWAT_CAP;
	return c;
}

} // namespace sockbuf::buffer
