// SPDX-License-Identifier: MIT
#include "shutdown.h"

#include "net.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <poll.h>
#include <stdexcept>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace examples
{

int block_stop_signals()
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPIPE);
	if (sigprocmask(SIG_BLOCK, &set, nullptr) < 0)
		throw std::runtime_error("sigprocmask failed");
	sigdelset(&set, SIGPIPE);
	int fd = signalfd(-1, &set, SFD_CLOEXEC);
	if (fd < 0)
		throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
	return fd;
}

void accept_until_stopped(int lfd, int sigfd, int finished_fd, double seconds, long max_clients,
			  const std::function<void(int fd)> &serve)
{
	long finished = 0;
	const double start = now_seconds();
	for (;;) {
		int timeout_ms = -1;
		if (seconds > 0) {
			double left = seconds - (now_seconds() - start);
			if (left <= 0)
				break;
			timeout_ms = static_cast<int>(left * 1000) + 1;
		}
		pollfd pfd[3] = {{lfd, POLLIN, 0}, {sigfd, POLLIN, 0}, {finished_fd, POLLIN, 0}};
		if (poll(pfd, 3, timeout_ms) < 0 && errno != EINTR)
			throw std::runtime_error("poll failed");
		if (pfd[1].revents)
			break;
		if (pfd[2].revents) {
			uint64_t n = 0;
			if (::read(finished_fd, &n, sizeof(n)) == sizeof(n))
				finished += static_cast<long>(n);
			if (max_clients && finished >= max_clients)
				break;
		}
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			set_nodelay(fd);
			serve(fd);
		}
	}
}

} // namespace examples
