// SPDX-License-Identifier: MIT
// The net sysctls that bound buffer sizes, read.
#include "sysctl.h"

#include "read_file.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

namespace sockbuf::sysctl
{

int setbuf_stored_max(int mem_max_sysctl)
{
	if (mem_max_sysctl < 0)
		return -1;
	return 2 * std::min(mem_max_sysctl, 0x7fffffff / 2);
}

int read_ints(const char *path, int *out, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = -1;
	char buf[128];
	ssize_t len = fileio::read_file(path, buf, sizeof(buf) - 1);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	int got = 0;
	char *p = buf;
	while (got < n) {
		char *end = nullptr;
		errno = 0;
		long v = std::strtol(p, &end, 10);
		if (end == p || errno != 0)
			break;
		// Sysctls such as tcp_mem are in pages and can pass INT_MAX on
		// big machines: saturate instead of wrapping.
		out[got++] = v > INT_MAX ? INT_MAX : (v < INT_MIN ? INT_MIN : (int)v);
		p = end;
	}
	return got;
}

int read_int(const char *path)
{
	int v = -1;
	read_ints(path, &v, 1);
	return v;
}

} // namespace sockbuf::sysctl
