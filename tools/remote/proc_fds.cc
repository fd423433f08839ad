// SPDX-License-Identifier: MIT
#include "proc_fds.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace sockbuf::cli::remote
{

int for_each_fd_link(pid_t pid, const std::function<bool(const fd_link &)> &fn)
{
	const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
	DIR *d = opendir(dir.c_str());
	if (!d)
		return -errno;
	while (dirent *e = readdir(d)) {
		char *end = nullptr;
		const long fd = std::strtol(e->d_name, &end, 10);
		if (e->d_name[0] == '.' || *end != '\0' || fd < 0)
			continue;
		const std::string path = dir + "/" + e->d_name;
		char target[256];
		const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		if (!fn(fd_link{int(fd), path, std::string_view(target, size_t(n))}))
			break;
	}
	closedir(d);
	return 0;
}

} // namespace sockbuf::cli::remote
