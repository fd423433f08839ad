// SPDX-License-Identifier: MIT
// sockbufd's progress file: written by the daemon after every iteration
// of its serving loop, read by the guards that stood down for it
// (daemon_progress.h).
#include "daemon_progress.h"

#include "daemon_presence.h"
#include "sys.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace sockbuf::progress
{

namespace
{

// The line: every number at a fixed width (20 digits hold any uint64_t,
// 10 any uint32_t).
constexpr const char *line_format =
    "sockbufd-progress 1 %020" PRIu64 " %020" PRIu64 " %010" PRIu32 " %010" PRIu32 " %010" PRIu32
    " %020" PRIu64 " %020" PRIu64 "\n";
constexpr size_t line_max = 160;

uint64_t monotonic_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

} // namespace

uint64_t own_timens()
{
	struct stat st;
	return stat("/proc/self/ns/time", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

writer::~writer()
{
	if (fd_ >= 0)
		::close(fd_);
}

int writer::open(const bounds &b)
{
	b_ = b;
	timens_ = own_timens();
	const int dfd = presence::open_run_dir(geteuid());
	if (dfd < 0)
		return dfd;
	const std::string tmp = std::string(file_name) + ".tmp";
	int err = 0;
	const int fd = sys::openat(dfd, tmp.c_str(),
				   O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		err = fd;
	} else if (fchmod(fd, 0644) != 0) {
		err = -errno; // readers want exactly "not writable by others"
	} else {
		fd_ = fd;
		err = beat(); // a whole line before the name is there
		if (!err && renameat(dfd, tmp.c_str(), dfd, file_name) != 0)
			err = -errno;
	}
	if (err) {
		if (fd >= 0)
			::close(fd);
		fd_ = -1;
		unlinkat(dfd, tmp.c_str(), 0);
	}
	::close(dfd);
	return err;
}

int writer::beat()
{
	if (fd_ < 0)
		return -EBADF;
	passes_++;
	char text[line_max];
	const int len = std::snprintf(text, sizeof(text), line_format, passes_, monotonic_ns(),
				      b_.period_us, b_.mem_us, b_.set_us, timens_, passes_);
	const ssize_t n = pwrite(fd_, text, size_t(len), 0);
	if (n == ssize_t(len))
		return 0;
	return n < 0 ? -errno : -EIO;
}

int open_file()
{
	const int dfd = presence::open_run_dir(0);
	if (dfd < 0)
		return dfd;
	// O_NONBLOCK: a FIFO in its place would block the open.
	const int fd = sys::openat(dfd, file_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	::close(dfd);
	if (fd < 0)
		return fd == -ELOOP ? -EPERM : fd;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) != 0)
		err = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		err = -EPERM;
	if (err) {
		::close(fd);
		return err;
	}
	return fd;
}

int read(int fd, reading *out)
{
	char text[line_max];
	const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EAGAIN;
	text[n] = '\0';
	reading r;
	unsigned long long passes = 0, beat = 0, ns = 0, last = 0;
	unsigned int period = 0, mem = 0, set = 0;
	int version = 0, used = 0;
	if (std::sscanf(text, "sockbufd-progress %d %llu %llu %u %u %u %llu %llu\n%n", &version,
			&passes, &beat, &period, &mem, &set, &ns, &last, &used) != 8 ||
	    version != 1)
		return -EINVAL;
	if (passes != last || used != int(n))
		return -EAGAIN; // read while it was rewritten
	r.passes = passes;
	r.beat_ns = beat;
	r.b = {period, mem, set};
	r.timens = ns;
	*out = r;
	return 0;
}

} // namespace sockbuf::progress
