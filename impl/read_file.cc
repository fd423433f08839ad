// SPDX-License-Identifier: MIT
// Whole small files read with EINTR retried, through the syscall seam.
#include "read_file.h"

#include "sys.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace sockbuf::fileio
{

namespace
{

// One read(2) that returns data, the end of the file or an error other
// than EINTR.
ssize_t read_once(int fd, char *buf, size_t len)
{
	ssize_t n = -EINTR;
	for (int i = 0; i < eintr_retries && n == -EINTR; i++)
		n = sys::read(fd, buf, len);
	return n;
}

} // namespace

ssize_t read_all(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	while (got < cap) {
		ssize_t n = read_once(fd, buf + got, cap - got);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		got += size_t(n);
	}
	return ssize_t(got);
}

ssize_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read_all(fd, buf, cap);
	::close(fd);
	return n;
}

int read_file(const char *path, std::string *out, size_t cap)
{
	out->clear();
	int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[16384];
	int err = 0;
	while (out->size() < cap) {
		ssize_t n = read_once(fd, buf, std::min(sizeof(buf), cap - out->size()));
		if (n < 0)
			err = int(n);
		if (n <= 0)
			break;
		out->append(buf, size_t(n));
	}
	::close(fd);
	return err;
}

} // namespace sockbuf::fileio
