// SPDX-License-Identifier: MIT
// listen() under the filter: a listener the supervisor sized is noted
// before the kernel runs the call, so that the connections it accepts
// adopt its floor.
#include "supervise_parts.h"

#include <fmt/core.h>

#include <cstdio>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

int supervisor::decide_listen(const struct seccomp_notif &req)
{
	if (guard_.size() == 0)
		return continue_call;
	const int fd = int(req.data.args[0]);
	const pid_t tid = pid_t(req.pid);
	// The inode behind the number in the calling thread's own
	// table, without taking it.
	char path[64], link[64];
	fmt::format_to_n(path, sizeof(path) - 1, "/proc/{}/fd/{}", tid, fd).out[0] = '\0';
	const ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return continue_call;
	link[n] = '\0';
	unsigned long ino = 0;
	if (std::sscanf(link, "socket:[%lu]", &ino) != 1 || !guard_.find_inode(uint32_t(ino)))
		return continue_call;
	pid_t tgid = 0;
	const int sock = take(req, fd, "listen", &tgid);
	if (sock < 0)
		return -sock;
	guard_.note_listen(sock); // by its cookie: the identity rule
	// Closed here: a socket about to listen has no data to send,
	// so even a last close never lingers (no closer thread needed).
	close(sock);
	return continue_call;
}

} // namespace sockbuf::cli::run::supervision
