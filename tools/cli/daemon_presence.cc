// SPDX-License-Identifier: MIT
#include "daemon_presence.h"

#include "floor_registry.h"
#include "read_file.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sockbuf::cli::presence
{

uint64_t netns_of(const std::string &proc)
{
	struct stat st;
	return stat((proc + "/ns/net").c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

int announce()
{
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -errno;
	const std::string text = fmt::format(
	    "{} {} {}\n", getpid(), registry::process_start_time(getpid()), netns_of("/proc/self"));
	const std::string tmp = std::string(file) + ".tmp";
	int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
	if (close(fd) != 0 || !ok || std::rename(tmp.c_str(), file) != 0) {
		const int err = errno ? errno : EIO;
		unlink(tmp.c_str());
		return -err;
	}
	return 0;
}

void withdraw()
{
	std::string text;
	int pid = 0;
	// Only our own: a daemon started since may have replaced it.
	if (fileio::read_file(file, &text) == 0 && std::sscanf(text.c_str(), "%d", &pid) == 1 &&
	    pid == getpid())
		unlink(file);
}

bool serves(pid_t pid)
{
	std::string text;
	if (fileio::read_file(file, &text) < 0)
		return false;
	int dpid = 0;
	unsigned long long start = 0, ns = 0;
	if (std::sscanf(text.c_str(), "%d %llu %llu", &dpid, &start, &ns) != 3 || dpid <= 0)
		return false;
	if (registry::process_start_time(dpid) != start || start == 0)
		return false; // gone (killed: the file stays), or another process now
	return ns != 0 && netns_of("/proc/" + std::to_string(pid)) == ns;
}

} // namespace sockbuf::cli::presence
