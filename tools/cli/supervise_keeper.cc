// SPDX-License-Identifier: MIT
// The keeper: a process that holds the notification listener while the
// program lives, should the supervisor be killed outright.
#include "supervise_parts.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <iterator>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

namespace
{

// Moves @fd to a number of 3 or more (close-on-exec), closing the old one.
int above_stdio(int fd)
{
	if (fd > STDERR_FILENO)
		return fd;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	close(fd);
	return moved;
}

} // namespace

// The keeper: a second holder of the notification listener.  A
// supervisor killed outright (SIGKILL) has its files closed before its
// children are signalled, and a listener closed with calls waiting
// answers them ENOSYS: the program would see ENOSYS in the moment before
// PR_SET_PDEATHSIG ends it.  The keeper keeps the listener open until the
// program is gone (its pidfd readable) and at most @grace_ms after the
// supervisor (a program that kept running, e.g. a set-user-ID one whose
// exec cleared its death signal, then gets ENOSYS rather than a call
// that never returns).  It holds nothing else (no standard stream stays
// open through it), and every signal but SIGKILL stays blocked, as the
// supervisor blocked them: ^C to the process group leaves it alone.
// Returns its pid, or -errno (the supervisor works without one).
pid_t start_keeper(int listener, pid_t program, int grace_ms)
{
	int prog = pidfd_open(program); // unreaped: the number is still the program's
	int sup = pidfd_open(getpid());
	if (prog < 0 || sup < 0) {
		int e = errno;
		if (prog >= 0)
			close(prog);
		if (sup >= 0)
			close(sup);
		return -e;
	}
	pid_t k = fork();
	if (k == 0) {
		prog = above_stdio(prog);
		sup = above_stdio(sup);
		int keep[3] = {above_stdio(dup(listener)), prog, sup};
		int null = open("/dev/null", O_RDWR);
		for (int fd = STDIN_FILENO; null >= 0 && fd <= STDERR_FILENO; fd++)
			dup2(null, fd);
		std::sort(std::begin(keep), std::end(keep));
		unsigned int from = STDERR_FILENO + 1;
		for (int fd : keep) {
			if (fd < 0)
				_exit(1);
			if (unsigned(fd) > from)
				syscall(SYS_close_range, from, unsigned(fd) - 1, 0);
			from = unsigned(fd) + 1;
		}
		syscall(SYS_close_range, from, ~0u, 0);
		prctl(PR_SET_NAME, "sockbuf-keeper");
		struct pollfd p[2] = {{prog, POLLIN, 0}, {sup, POLLIN, 0}};
		for (;;) {
			int n = poll(p, 2, -1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || p[0].revents)
				_exit(0);
			if (p[1].revents)
				break;
		}
		struct pollfd last = {prog, POLLIN, 0};
		while (poll(&last, 1, grace_ms) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(prog);
	close(sup);
	return k < 0 ? -errno : k;
}

} // namespace sockbuf::cli::run::supervision
