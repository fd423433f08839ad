// SPDX-License-Identifier: MIT
#include "global.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sockbuf::contract
{

namespace
{
int g_tcp_mem_fd = -1;
}

int open_global_knobs()
{
	g_tcp_mem_fd = open("/proc/sys/net/ipv4/tcp_mem", O_RDWR | O_CLOEXEC);
	return g_tcp_mem_fd < 0 ? -errno : 0;
}

int tcp_mem_fd()
{
	return g_tcp_mem_fd;
}

int write_tcp_mem(const std::string &value)
{
	if (g_tcp_mem_fd < 0)
		return -EBADF;
	return pwrite(g_tcp_mem_fd, value.data(), value.size(), 0) < 0 ? -errno : 0;
}

std::string read_tcp_mem()
{
	char buf[128] = {};
	if (g_tcp_mem_fd < 0 || pread(g_tcp_mem_fd, buf, sizeof(buf) - 1, 0) <= 0)
		return "";
	std::string s(buf);
	while (!s.empty() && s.back() == '\n')
		s.pop_back();
	return s;
}

long tcp_mem_in_use()
{
	// sockstat's TCP memory counter is global, readable in any namespace.
	FILE *f = fopen("/proc/net/sockstat", "re");
	if (!f)
		return -1;
	char line[256];
	long mem = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "TCP:", 4) == 0) {
			const char *m = strstr(line, " mem ");
			if (m)
				mem = strtol(m + 5, nullptr, 10);
		}
	fclose(f);
	return mem;
}

} // namespace sockbuf::contract
