// SPDX-License-Identifier: MIT
// The program's right to FORCE, judged as the kernel's capable() would.
#include "force_rights.h"

#include <cap-ng.h>
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <linux/capability.h>
#include <sys/stat.h>

namespace sockbuf::cli::run
{

namespace
{

// This process's user namespace is the initial one: its uid_map maps
// every id to itself ("0 0 4294967295").
bool in_initial_userns()
{
	std::FILE *f = std::fopen("/proc/self/uid_map", "re");
	if (!f)
		return false;
	unsigned long inside = 1, outside = 1, count = 0, extra = 0;
	int n = std::fscanf(f, "%lu %lu %lu", &inside, &outside, &count);
	const bool more = std::fscanf(f, "%lu", &extra) == 1; // a second line
	std::fclose(f);
	return n == 3 && inside == 0 && outside == 0 && count == 4294967295ul && !more;
}

// CAP_NET_ADMIN in the effective set of @pid, asked of libcap-ng.
bool net_admin_effective_of(pid_t pid)
{
	void *saved = capng_save_state();
	capng_setpid(int(pid));
	bool held = capng_get_caps_process() == 0 &&
		    capng_have_capability(CAPNG_EFFECTIVE, CAP_NET_ADMIN) != 0;
	if (saved)
		capng_restore_state(&saved); // this process's own state back
	return held;
}

} // namespace

int program_may_force(pid_t pid)
{
	struct stat mine, theirs;
	if (stat("/proc/self/ns/user", &mine) != 0 ||
	    stat(fmt::format("/proc/{}/ns/user", pid).c_str(), &theirs) != 0)
		return -errno;
	if (mine.st_dev != theirs.st_dev || mine.st_ino != theirs.st_ino || !in_initial_userns())
		return 0;
	return net_admin_effective_of(pid) ? 1 : 0;
}

} // namespace sockbuf::cli::run
