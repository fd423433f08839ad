// SPDX-License-Identifier: MIT
// Every process and thread under the filter: the socket a call names,
// taken from the calling thread's own descriptor table (pidfds kept per
// leader), and the background copy that serves those left running when
// the program exits.
#include "supervise_parts.h"

#include "closer.h"
#include "take.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

namespace
{

// pidfd_open() of a thread rather than its thread group (linux/pidfd.h,
// 6.9; O_EXCL's value); older kernels answer EINVAL.
constexpr unsigned int pidfd_thread = O_EXCL;

// The thread group of thread @tid (pidfd_open wants a leader).
pid_t tgid_of(pid_t tid)
{
	std::FILE *f = std::fopen(fmt::format("/proc/{}/status", tid).c_str(), "re");
	if (!f)
		return -1;
	char line[256];
	int tgid = -1;
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	std::fclose(f);
	return tgid;
}

// 1 when descriptor @fd of thread @tid (its own table) is the file @mine
// refers to, 0 when it is another or none, -errno when neither kcmp(2) nor
// /proc could tell.
int same_file(pid_t tid, int fd, int mine)
{
	long r = syscall(SYS_kcmp, tid, getpid(), KCMP_FILE, fd, mine);
	if (r >= 0)
		return r == 0;
	if (errno == EBADF)
		return 0;
	// No CONFIG_KCMP: the inode behind the thread's own /proc entry.
	struct stat theirs, ours;
	if (stat(fmt::format("/proc/{}/fd/{}", tid, fd).c_str(), &theirs) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(mine, &ours) != 0)
		return -errno;
	return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

} // namespace

int supervisor::leader_pidfd(pid_t pid)
{
	auto it = pidfds_.find(pid);
	if (it != pidfds_.end())
		return it->second;
	const int fd = pidfd_open(pid);
	if (fd < 0)
		return -1;
	if (pidfds_.size() >= 64) {
		for (auto i = pidfds_.begin(); i != pidfds_.end();) {
			struct pollfd p = {i->second, POLLIN, 0};
			if (poll(&p, 1, 0) == 1) { // readable: the process ended
				close(i->second);
				i = pidfds_.erase(i);
			} else {
				++i;
			}
		}
		if (pidfds_.size() >= 64)
			forget_all_pidfds();
	}
	pidfds_.emplace(pid, fd);
	return fd;
}

void supervisor::forget_pidfd(pid_t pid)
{
	auto it = pidfds_.find(pid);
	if (it == pidfds_.end())
		return;
	close(it->second);
	pidfds_.erase(it);
}

void supervisor::forget_all_pidfds()
{
	for (const auto &[pid, fd] : pidfds_)
		close(fd);
	pidfds_.clear();
}

int supervisor::take(const struct seccomp_notif &req, int fd, const char *call, pid_t *tgid_out)
{
	const pid_t tid = pid_t(req.pid);
	// The socket from the calling thread's own descriptor table: a
	// leader's pidfd reaches it; for another thread, a pidfd of the
	// thread itself (PIDFD_THREAD, 6.9), else the leader's, whose
	// table may not be the thread's (unshare(CLONE_FILES), checked
	// below) or may be gone (a leader that exited before its threads).
	pid_t tgid = tid;
	bool own_table = true;
	bool cached = true; // a leader's pidfd, kept from call to call
	int pidfd = leader_pidfd(tid);
	if (pidfd < 0) {
		cached = false;
		tgid = tgid_of(tid);
		// Test seam: SOCKBUF_RUN_FAULT=no_pidfd_thread, a kernel before 6.9.
		pidfd = test_fault("no_pidfd_thread")
			    ? -1
			    : int(syscall(SYS_pidfd_open, tid, pidfd_thread));
		if (pidfd < 0) {
			own_table = false;
			pidfd = tgid > 0 ? pidfd_open(tgid) : -1;
		}
	}
	// After reading memory and opening the pidfd, before acting: the
	// thread that asked is still waiting (not killed, its pid not
	// reused for another process).
	if (!still_valid(req.id)) {
		if (pidfd >= 0 && !cached)
			close(pidfd);
		return -gone;
	}
	if (pidfd < 0) {
		if (log_.on())
			log_.line(fmt::format("pid {} thread {}: pidfd_open: {}; its {} "
					      "goes to the kernel unchanged",
					      tgid, tid, std::strerror(errno), call));
		return -continue_call;
	}
	int sock = remote::take_socket(pidfd, tgid, fd);
	int getfd_err = errno;
	if (sock < 0 && getfd_err == ESRCH && cached) {
		// A kept pidfd of a process that has ended: the caller is a
		// new process with the same number.  A fresh pidfd, checked
		// as above.
		forget_pidfd(tid);
		pidfd = leader_pidfd(tid);
		if (!still_valid(req.id))
			return -gone;
		sock = pidfd < 0 ? -1 : remote::take_socket(pidfd, tgid, fd);
		getfd_err = errno;
	}
	if (!cached)
		close(pidfd);
	if (sock < 0) {
		if (getfd_err == EPERM || getfd_err == EACCES)
			no_access(tgid, "pidfd_getfd", getfd_err);
		else if ((getfd_err == EBADF || getfd_err == ESRCH) && !own_table && log_.on())
			log_.line(fmt::format(
			    "pid {} thread {} fd {}: not in the leader's descriptor table "
			    "(the leader exited, or the thread has a table of its own; "
			    "PIDFD_THREAD, Linux 6.9, would reach it); its {} "
			    "goes to the kernel unchanged",
			    tgid, tid, fd, call));
		return -continue_call; // EBADF and the like: the kernel says it
	}
	// A number taken from the leader's table for another thread: a
	// thread that called unshare(CLONE_FILES) has a table of its own,
	// where the number may name another socket: that one is written
	// only if it is the same file, else the kernel runs the call on
	// the thread's own descriptor.
	if (!own_table && same_file(tid, fd, sock) != 1) {
		if (log_.on())
			log_.line(fmt::format("pid {} thread {} fd {}: the thread has a "
					      "descriptor table of its own; its {} "
					      "goes to the kernel unchanged",
					      tgid, tid, fd, call));
		remote::closer::get().close_later(sock, 0);
		return -continue_call;
	}
	*tgid_out = tgid;
	return sock;
}

// Serves notifications until every process under the filter is gone.
void serve_rest(supervisor &sup, int listener)
{
	for (;;) {
		struct pollfd p = {listener, POLLIN, 0};
		int n = poll(&p, 1, sup.timeout_ms());
		sup.tick();
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
			return;
		if ((p.revents & POLLIN) && !sup.handle_one())
			return;
	}
}

} // namespace sockbuf::cli::run::supervision
