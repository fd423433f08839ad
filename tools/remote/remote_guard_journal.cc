// SPDX-License-Identifier: MIT
// The remote guard's restore journal (remote_guard.h, journal()): what a
// restore is about to write, saved before it writes, so that a guard
// killed between its SO_*BUF write and its lock clear leaves no lock
// behind once a guard starts again on the same file (recover_journal(),
// look_left()).
#include "closer.h"
#include "remote_guard.h"
#include "remote_guard_internal.h"
#include "take.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sockbuf::cli::remote
{

namespace
{

// What a restore recorded in @r left on its socket @dup: the lock bits of
// the directions it writes that were clear before it, cleared; a bit set
// before the restore, or of a direction it does not write (the program's
// own SO_SNDBUF after the kill), is kept.  The line to say, or "" when
// nothing was left.
std::string put_back(int dup, const journal_record &r)
{
	int lock = 0;
	socklen_t len = sizeof(lock);
	if (getsockopt(dup, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0)
		return fmt::format("pid {} fd {}: left mid-restore: SO_BUF_LOCK: {}", r.pid, r.fd,
				   std::strerror(errno));
	const int dirs = r.dirs ? r.dirs : snd_lock | rcv_lock;
	const int left = lock & ~r.lock & dirs;
	if (!left)
		return "";
	const int want = lock & ~left;
	if (setsockopt(dup, SOL_SOCKET, SO_BUF_LOCK, &want, sizeof(want)) != 0)
		return fmt::format("pid {} fd {}: lock bits {} left by a restore cut short: {}",
				   r.pid, r.fd, lock, std::strerror(errno));
	return fmt::format(
	    "pid {} fd {}: lock bits {} -> {}, as before a restore that was cut short", r.pid, r.fd,
	    lock, want);
}

std::vector<journal_record> read_left(int fd)
{
	std::vector<journal_record> out;
	for (size_t i = 1; i <= max_left; i++) {
		journal_record r = {};
		if (pread(fd, &r, sizeof(r), off_t(i * sizeof(r))) == ssize_t(sizeof(r)) &&
		    r.magic == journal_magic)
			out.push_back(r);
	}
	return out;
}

int write_left(int fd, const std::vector<journal_record> &left)
{
	for (size_t i = 1; i <= max_left; i++) {
		const journal_record r = i <= left.size() ? left[i - 1] : journal_record{};
		if (pwrite(fd, &r, sizeof(r), off_t(i * sizeof(r))) != ssize_t(sizeof(r)))
			return -errno;
	}
	return 0;
}

} // namespace

guard::guard(bool restore, uint32_t who) : restore_(restore), who_(who) {}

int guard::journal(const std::string &path)
{
	const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (journal_fd_ >= 0)
		close(journal_fd_);
	journal_fd_ = fd;
	left_ = read_left(fd);
	return 0;
}

bool guard::note(const socket_ref *s, int dup)
{
	if (journal_fd_ < 0)
		return true;
	journal_record r = {};
	if (s) {
		int lock = 0;
		socklen_t len = sizeof(lock);
		if (getsockopt(dup, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0)
			return true; // no SO_BUF_LOCK (before 5.14): nothing to put back
		const int dirs = (s->floor.snd ? snd_lock : 0) | (s->floor.rcv ? rcv_lock : 0);
		r = {journal_magic, s->pid, s->fd, s->cookie, lock, dirs};
	}
	if (pwrite(journal_fd_, &r, sizeof(r), 0) == ssize_t(sizeof(r)))
		return true;
	totals_.errors++;
	return false;
}

void guard::look_left(int dup, uint64_t cookie, pid_t pid)
{
	for (size_t i = 0; i < left_.size(); i++) {
		if (left_[i].cookie != cookie)
			continue;
		std::string said = put_back(dup, left_[i]);
		if (said.empty())
			said =
			    fmt::format("pid {} fd {}: left mid-restore, found with its lock bits "
					"as before",
					left_[i].pid, left_[i].fd);
		notes_.push_back(said + fmt::format(" (found at its first look, in pid {})", pid));
		left_.erase(left_.begin() + long(i));
		if (journal_fd_ >= 0)
			(void)write_left(journal_fd_, left_);
		return;
	}
}

std::vector<std::string> recover_journal(const std::string &path)
{
	std::vector<std::string> said;
	const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			said.push_back(fmt::format("{}: {}", path, std::strerror(errno)));
		return said;
	}
	std::vector<journal_record> todo;
	journal_record r = {};
	if (pread(fd, &r, sizeof(r), 0) == ssize_t(sizeof(r)) && r.magic == journal_magic)
		todo.push_back(r);
	for (const journal_record &l : read_left(fd))
		todo.push_back(l);
	std::vector<journal_record> left;
	for (const journal_record &t : todo) {
		const int pidfd = int(syscall(SYS_pidfd_open, t.pid, 0));
		const int dup = pidfd < 0 ? -1 : take_socket(pidfd, t.pid, t.fd);
		if (dup >= 0 && cookie_of(dup) == t.cookie) {
			if (std::string line = put_back(dup, t); !line.empty())
				said.push_back(line);
		} else if (left.size() < max_left) {
			// The process is gone, or no longer holds it there: a copy
			// may live on in another process (a forked worker).
			left.push_back(t);
			said.push_back(
			    fmt::format("pid {} fd {}: left mid-restore, not there now: its "
					"lock bits are looked at when a process this "
					"daemon serves holds it",
					t.pid, t.fd));
		}
		if (dup >= 0)
			close_copy(dup, t.pid);
		if (pidfd >= 0)
			close(pidfd);
	}
	const journal_record clear = {};
	if ((pwrite(fd, &clear, sizeof(clear), 0) < 0 || write_left(fd, left) < 0) && said.empty())
		said.push_back(fmt::format("{}: {}", path, std::strerror(errno)));
	close(fd);
	return said;
}

} // namespace sockbuf::cli::remote
