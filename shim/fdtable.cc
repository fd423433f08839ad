// SPDX-License-Identifier: MIT
#include "fdtable.h"

#include "real.h"

#include <sys/socket.h>

namespace sockbuf::shim
{

namespace
{
// Zero-initialised, in .bss: pages are touched only for fds in use.
fd_state g_table[fd_table_size];
std::atomic<int> g_high_water{0};
} // namespace

int fd_high_water()
{
	return g_high_water.load(std::memory_order_acquire);
}

fd_state *fd_slot(int fd)
{
	if (fd < 0 || fd >= fd_table_size)
		return nullptr;
	return &g_table[fd];
}

uint64_t fd_cookie(int fd)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);
	if (real::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
		return 0;
	return cookie;
}

bool fd_owned(const fd_state *e, uint64_t cookie)
{
	return e && cookie && e->cookie.load(std::memory_order_acquire) == cookie;
}

void fd_claim(fd_state *e, uint64_t cookie)
{
	if (fd_owned(e, cookie))
		return;
	for (int d = 0; d < 2; d++) {
		e->requested[d].store(0, std::memory_order_relaxed);
		e->floor[d].store(0, std::memory_order_relaxed);
	}
	e->port.store(0, std::memory_order_relaxed);
	e->role.store(role_any, std::memory_order_relaxed);
	e->flags.store(0, std::memory_order_relaxed);
	e->cookie.store(cookie, std::memory_order_release);
	const int end = int(e - g_table) + 1;
	int seen = g_high_water.load(std::memory_order_relaxed);
	while (seen < end &&
	       !g_high_water.compare_exchange_weak(seen, end, std::memory_order_release))
		;
}

} // namespace sockbuf::shim
