// SPDX-License-Identifier: MIT
#include "child.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace sockbuf::contract
{

void close_all_but(std::vector<int> keep)
{
	std::sort(keep.begin(), keep.end());
	unsigned lo = 3;
	for (int k : keep) {
		if (k < 3)
			continue;
		if (unsigned(k) > lo)
			syscall(SYS_close_range, lo, unsigned(k) - 1, 0);
		lo = unsigned(k) + 1;
	}
	syscall(SYS_close_range, lo, ~0u, 0);
}

bool after_fork(int sig, std::vector<int> keep, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, sig);
	if (parent >= 0 && getppid() != parent)
		return false;
	close_all_but(std::move(keep));
	return true;
}

bool write_all(int fd, const void *p, size_t n)
{
	const char *c = static_cast<const char *>(p);
	while (n) {
		const ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= size_t(w);
	}
	return true;
}

} // namespace sockbuf::contract
