// SPDX-License-Identifier: MIT
#include "shutdown.h"

#include <csignal>
#include <cstring>
#include <stdexcept>
#include <sys/signalfd.h>

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

} // namespace examples
