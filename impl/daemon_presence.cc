// SPDX-License-Identifier: MIT
// The daemon's presence file: written by sockbufd, read by `sockbuf show`
// and by floor guards that hand over (daemon_presence.h).
#include "daemon_presence.h"

#include "floor_registry.h"
#include "read_file.h"
#include "sys.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::presence
{

std::string dir()
{
	const char *env = secure_getenv("SOCKBUF_DAEMON_DIR");
	return env && *env ? std::string(env) : std::string(default_dir);
}

std::string file()
{
	return dir() + "/" + file_name;
}

uint64_t netns_of(const std::string &proc)
{
	struct stat st;
	return stat((proc + "/ns/net").c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

namespace
{

// How long a guard's hand-over check waits for the daemon's answer.
constexpr int register_wait_ms = 200;

// A directory or file whose owner is @uid and that no one else may write.
bool owned_alone(const struct stat &st, uid_t uid)
{
	return st.st_uid == uid && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

// The run directory @d, held: a descriptor of it (O_PATH) if it is a
// directory, not a symbolic link, owned by @uid alone; or -EPERM (it is
// not), -ENOENT, -errno.  The file is then opened, renamed or removed
// relative to this descriptor (openat and the like), so the directory
// checked is the directory used: checking the path and then opening the
// path again let anyone who could swap a component of it between the two
// (a symbolic link to a directory of their own) have a file of theirs
// read as root's.
//
// O_PATH: the checks need only fstat() and the *at() calls a directory to
// start from, not the right to list it (a reader needs search permission
// on it, as by path), and nothing is opened for real (a FIFO or device
// put in its place does not block or wake a driver).  Without
// O_DIRECTORY: O_NOFOLLOW then opens a link itself rather than failing,
// and fstat() tells a link or anything else not a directory (-EPERM)
// from a missing one (-ENOENT).
//
// A trailing slash would have the last component followed even with
// O_NOFOLLOW: taken off.
int open_dir(std::string d, uid_t uid)
{
	while (d.size() > 1 && d.back() == '/')
		d.pop_back();
	const int dfd = sys::openat(AT_FDCWD, d.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return dfd;
	struct stat st;
	int err = 0;
	if (fstat(dfd, &st) != 0)
		err = -errno;
	// Anyone who may write the directory may put a file of their own there.
	else if (!S_ISDIR(st.st_mode) || !owned_alone(st, uid))
		err = -EPERM;
	if (err) {
		::close(dfd);
		return err;
	}
	return dfd;
}

// read_serving() in the directory @dfd holds (open_dir()).
int read_in(int dfd, serving *out)
{
	// O_NONBLOCK: a FIFO in its place would otherwise block the open.
	const int fd = sys::openat(dfd, file_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return fd == -ELOOP ? -EPERM : fd;
	struct stat st;
	char text[160];
	ssize_t n = -EINVAL;
	if (fstat(fd, &st) != 0)
		n = -errno;
	else if (!S_ISREG(st.st_mode) || !owned_alone(st, 0))
		n = -EPERM;
	else
		n = fileio::read_all(fd, text, sizeof(text) - 1);
	::close(fd);
	if (n < 0)
		return int(n);
	text[n] = '\0';
	return parse_line(text, out);
}

} // namespace

std::string line_of(const serving &s)
{
	char text[160];
	const int len = std::snprintf(text, sizeof(text),
				      "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
				      int(s.pid), s.start, s.netns, s.shm_dev, s.shm_ino);
	return std::string(text, size_t(len));
}

int parse_line(const char *text, serving *out)
{
	int pid = 0;
	unsigned long long start = 0, ns = 0, dev = 0, ino = 0;
	char end = 0;
	if (std::sscanf(text, "%d %llu %llu %llu %llu%c", &pid, &start, &ns, &dev, &ino, &end) !=
		6 ||
	    end != '\n' || pid <= 0 || start == 0 || ns == 0)
		return -EINVAL;
	out->pid = pid;
	out->start = start;
	out->netns = ns;
	out->shm_dev = dev;
	out->shm_ino = ino;
	return 0;
}

int announce()
{
	const std::string d = dir();
	if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
		return -errno;
	// What readers will check, checked here too (this process's user for
	// root), and the directory held: the file is written and renamed in
	// the directory checked, never in one swapped in for it meanwhile,
	// where root's O_TRUNC and fchmod() would land on what another user
	// put there.
	const int dfd = open_dir(d, geteuid());
	if (dfd < 0)
		return dfd;
	struct stat shm = {};
	stat(registry::default_dir, &shm); // zeros if none: no guard then matches
	const std::string text =
	    line_of({getpid(), registry::process_start_time(getpid()), netns_of("/proc/self"),
		     uint64_t(shm.st_dev), uint64_t(shm.st_ino)});
	const ssize_t len = ssize_t(text.size());
	const std::string tmp = std::string(file_name) + ".tmp";
	int err = 0;
	const int fd = sys::openat(dfd, tmp.c_str(),
				   O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		err = fd;
	} else {
		// The umask may have taken bits; readers want exactly "not
		// writable by others", and the mode given is that.
		ssize_t n = 0;
		if (fchmod(fd, 0644) != 0)
			err = -errno;
		else if ((n = write(fd, text.data(), text.size())) != len)
			err = n < 0 ? -errno : -EIO;
		if (::close(fd) != 0 && !err)
			err = -errno;
		if (!err && renameat(dfd, tmp.c_str(), dfd, file_name) != 0)
			err = -errno;
		if (err)
			unlinkat(dfd, tmp.c_str(), 0);
	}
	::close(dfd);
	return err;
}

int read_serving(serving *out)
{
	const int dfd = open_dir(dir(), 0);
	if (dfd < 0)
		return dfd;
	const int err = read_in(dfd, out);
	::close(dfd);
	return err;
}

void withdraw()
{
	const int dfd = open_dir(dir(), 0);
	if (dfd < 0)
		return;
	serving s;
	// Only our own: a daemon started since may have replaced it.  Removed
	// from the directory it was read in.
	if (read_in(dfd, &s) == 0 && s.pid == getpid())
		unlinkat(dfd, file_name, 0);
	::close(dfd);
}

bool serves(pid_t pid)
{
	serving s;
	if (read_serving(&s) != 0 || registry::process_start_time(s.pid) != s.start)
		return false; // gone (killed: the file stays), or another process now
	return netns_of("/proc/" + std::to_string(pid)) == s.netns;
}

int serving_pidfd(serving *out)
{
	serving &s = *out;
	if (int err = read_serving(&s))
		return err;
	if (netns_of("/proc/self") != s.netns)
		return -EXDEV;
	// A process that is not dumpable (it changed its credentials) has a
	// root-owned /proc/PID, and the daemon refuses its table (its owner
	// is not /proc's); with Yama's ptrace_scope at 3 no pidfd_getfd()
	// works at all.
	if (prctl(PR_GET_DUMPABLE) != 1)
		return -EACCES;
	std::string yama;
	if (fileio::read_file("/proc/sys/kernel/yama/ptrace_scope", &yama) == 0 &&
	    std::atoi(yama.c_str()) >= 3)
		return -EACCES;
	const int pidfd = int(syscall(SYS_pidfd_open, s.pid, 0));
	if (pidfd < 0)
		return errno == ESRCH ? -ENOENT : -errno;
	// After the open: the pidfd names the daemon only if the number still
	// names the process the file was written by.
	if (registry::process_start_time(s.pid) != s.start) {
		close(pidfd);
		return -ENOENT;
	}
	// Served only once the daemon has this process's table and said so
	// (no table yet: nothing to serve, the table offers itself when
	// made).  Its refusal is the answer (-EXDEV: another network
	// namespace, -EACCES, -EUSERS: too many tables of this user).
	const int reg = registry::register_own(dir().c_str(), register_wait_ms);
	if (reg < 0 && reg != -ENODATA) {
		close(pidfd);
		return reg == -ECONNREFUSED ? -ENOENT : reg;
	}
	return pidfd; // pidfd_open sets O_CLOEXEC itself
}

int open_run_dir(uid_t owner)
{
	return open_dir(dir(), owner);
}

} // namespace sockbuf::presence
