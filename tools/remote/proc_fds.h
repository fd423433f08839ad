// SPDX-License-Identifier: MIT
// Another process's open descriptors, as /proc/PID/fd lists them: the one
// walk behind `sockbuf show`'s socket map, the registry reader's search
// for a process's own table and sockbufd's scan for tables at its start.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace sockbuf::cli::remote
{

// What a descriptor of the walk is: its number, its /proc/PID/fd/N path
// (to open it through) and the link's target ("socket:[1234]", a path,
// "/memfd:name (deleted)"; cut at 255 bytes).
struct fd_link {
	int fd;
	const std::string &path;
	std::string_view target;
};

// Calls @fn for each open descriptor of process @pid whose link can be
// read (one closed meanwhile is passed over), until @fn returns false.
// 0, or -errno when /proc/PID/fd cannot be opened (-ENOENT: no such
// process; -EACCES: not ours to read).
int for_each_fd_link(pid_t pid, const std::function<bool(const fd_link &)> &fn);

} // namespace sockbuf::cli::remote
