// SPDX-License-Identifier: MIT
// The daemon's presence file: written by sockbufd, read by `sockbuf show`
// and by floor guards that hand over (daemon_presence.h).
#include "daemon_presence.h"

#include "floor_registry.h"
#include "read_file.h"

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

int announce()
{
	const std::string d = dir(), f = file(), tmp = f + ".tmp";
	if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
		return -errno;
	struct stat shm = {};
	stat(registry::default_dir, &shm); // zeros if none: no guard then matches
	char text[160];
	const int len = std::snprintf(
	    text, sizeof(text), "%d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", getpid(),
	    registry::process_start_time(getpid()), netns_of("/proc/self"), uint64_t(shm.st_dev),
	    uint64_t(shm.st_ino));
	const int fd =
	    open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	// The umask may have taken bits; readers want exactly "not writable
	// by others", and the mode given is that.
	const bool ok = fchmod(fd, 0644) == 0 && write(fd, text, size_t(len)) == ssize_t(len);
	if (close(fd) != 0 || !ok || std::rename(tmp.c_str(), f.c_str()) != 0) {
		const int err = errno ? errno : EIO;
		unlink(tmp.c_str());
		return -err;
	}
	return 0;
}

int read_serving(serving *out)
{
	const std::string d = dir(), f = file();
	struct stat dst;
	if (stat(d.c_str(), &dst) != 0)
		return errno == ENOENT ? -ENOENT : -errno;
	// Anyone who may write the directory may put a file of their own there.
	if (!S_ISDIR(dst.st_mode) || dst.st_uid != 0 || (dst.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	struct stat st;
	char text[160];
	ssize_t n = -EINVAL;
	if (fstat(fd, &st) != 0)
		n = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		n = -EPERM;
	else
		n = fileio::read_all(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return int(n);
	text[n] = '\0';
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

void withdraw()
{
	serving s;
	// Only our own: a daemon started since may have replaced it.
	if (read_serving(&s) == 0 && s.pid == getpid())
		unlink(file().c_str());
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
	// Where this process publishes (a container's private /dev/shm is
	// another), the daemon must read.
	struct stat shm;
	if (stat(registry::default_dir, &shm) != 0 || uint64_t(shm.st_dev) != s.shm_dev ||
	    uint64_t(shm.st_ino) != s.shm_ino)
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
	return pidfd; // pidfd_open sets O_CLOEXEC itself
}

} // namespace sockbuf::presence
