// SPDX-License-Identifier: MIT
// How a server stops: on SIGINT/SIGTERM, after --seconds, or once
// --max-clients connections have ended.
#pragma once

#include <functional>

namespace examples
{

// SIGINT/SIGTERM as a file descriptor, so a server's poll() loop sees them.
// Call before starting any thread: the signals stay blocked in all threads.
int block_stop_signals(); // returns a signalfd, throws on failure

// Accepts on @lfd and hands each connection, TCP_NODELAY set (see
// set_nodelay), to @serve, until a signal arrives on @sigfd, @seconds have
// passed (0: no limit) or @max_clients connections have ended (0: no
// limit), as the servers count them on the eventfd @finished_fd.  Throws
// when poll() fails.
void accept_until_stopped(int lfd, int sigfd, int finished_fd, double seconds, long max_clients,
			  const std::function<void(int fd)> &serve);

} // namespace examples
