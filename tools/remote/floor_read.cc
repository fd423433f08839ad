// SPDX-License-Identifier: MIT
// The floor registry read from outside (floor_read.h): each process's
// table file found, read twice and parsed (floor_parse.cc), and the
// files of ended processes removed.
#include "floor_read.h"

#include "proc_fds.h"

#include "read_file.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace sockbuf::registry
{

std::string file_path(const std::string &dir, int pid, uint64_t start_time)
{
	return dir + "/" + file_prefix + std::to_string(pid) + "." + std::to_string(start_time);
}

namespace
{

int fail(std::string *why, int err, const std::string &text)
{
	if (why)
		*why = text;
	return err;
}

// One whole copy of the file, through read(): a file shrunk under us
// gives a short read, never a SIGBUS.
bool read_all(int fd, std::vector<char> *buf)
{
	return lseek(fd, 0, SEEK_SET) == 0 &&
	       fileio::read_all(fd, buf->data(), buf->size()) == ssize_t(buf->size());
}

// Whether process @pid maps the file with inode @ino (an exec() drops the
// mapping).  Unreadable maps: assumed mapped (pid and start time matched).
bool still_mapped(int pid, ino_t ino)
{
	std::string maps;
	if (fileio::read_file(("/proc/" + std::to_string(pid) + "/maps").c_str(), &maps) < 0)
		return true;
	for (size_t at = 0; at < maps.size();) {
		size_t end = maps.find('\n', at);
		if (end == std::string::npos)
			end = maps.size();
		std::string line = maps.substr(at, end - at);
		at = end + 1;
		unsigned long long inode = 0;
		char path[256] = "";
		if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %llu %255s", &inode, path) == 2 &&
		    inode == ino && std::strstr(path, file_prefix))
			return true;
	}
	return false;
}

} // namespace

namespace
{

// Opens @path as a table of user @uid may be: a regular file, not a
// link, owned by @uid, mode 0600, of the table's size.  The fd, or -errno
// with the reason in @why.
int open_table(const std::string &path, uid_t uid, std::string *why)
{
	int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int err = errno;
		return fail(why, -err, path + ": " + std::strerror(err));
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return fail(why, -EIO, path + ": fstat failed");
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
		close(fd);
		return fail(why, -EPERM,
			    path + ": not a regular file of the process's user with mode 0600");
	}
	if (size_t(st.st_size) != file_size) {
		close(fd);
		return fail(why, -EBADMSG,
			    path + ": size " + std::to_string(st.st_size) + ", expected " +
				std::to_string(file_size));
	}
	return fd;
}

// The user @pid's table at @path must belong to: the process's, or root
// (a worker forked by a root master publishes its inherited floors at
// fork(), the shim's fork seed, before it changes user; only root can have
// made a root-owned file).  0, or -ESRCH when the process is gone.
int table_user(int pid, const std::string &path, uid_t *uid)
{
	struct stat proc;
	if (stat(("/proc/" + std::to_string(pid)).c_str(), &proc) != 0)
		return -ESRCH;
	*uid = proc.st_uid;
	struct stat owner;
	if (stat(path.c_str(), &owner) == 0 && owner.st_uid == 0)
		*uid = 0;
	return 0;
}

} // namespace

int read_file(const std::string &path, int pid, uint64_t start_time, uid_t uid, table *out,
	      std::string *why)
{
	int fd = open_table(path, uid, why);
	if (fd < 0)
		return fd;
	std::vector<char> a(file_size), b(file_size);
	const bool whole = read_all(fd, &a) && read_all(fd, &b);
	close(fd);
	if (!whole)
		return fail(why, -EBADMSG, path + ": shorter than its size");
	return parse_images(a.data(), b.data(), pid, start_time, path, out, why);
}

int read_header(int pid, uint64_t start_time, header_info *out, std::string *why)
{
	const std::string path = file_path(default_dir, pid, start_time);
	uid_t uid = 0;
	if (table_user(pid, path, &uid) != 0)
		return fail(why, -ESRCH, "process " + std::to_string(pid) + " is gone");
	int fd = open_table(path, uid, why);
	if (fd < 0)
		return fd;
	char bytes[sizeof(file_header)];
	const ssize_t n = pread(fd, bytes, sizeof(bytes), 0);
	close(fd);
	if (n != ssize_t(sizeof(bytes)))
		return fail(why, -EBADMSG, path + ": shorter than its header");
	return parse_header(bytes, pid, start_time, path, out, why);
}

int read_fd(int fd, int pid, uint64_t start_time, const std::string &what, table *out,
	    std::string *why)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return fail(why, -EIO, what + ": fstat failed");
	if (!S_ISREG(st.st_mode))
		return fail(why, -EPERM, what + ": not a regular file");
	if (size_t(st.st_size) != file_size)
		return fail(why, -EBADMSG,
			    what + ": size " + std::to_string(st.st_size) + ", expected " +
				std::to_string(file_size));
	std::vector<char> a(file_size), b(file_size);
	if (!read_all(fd, &a) || !read_all(fd, &b))
		return fail(why, -EBADMSG, what + ": shorter than its size");
	return parse_images(a.data(), b.data(), pid, start_time, what, out, why);
}

namespace
{

// The own table (a memfd, floor_registry.h) that process @pid started at
// @start holds: 0, -ENOENT (none), or -errno of the one found.  Through
// /proc/PID/fd, with the rights that reading its sockets takes.
int read_own(int pid, uint64_t start, table *out, std::string *why)
{
	int ret = -ENOENT;
	const auto look = [&](const cli::remote::fd_link &l) {
		if (l.target.substr(0, std::strlen(memfd_link)) != memfd_link)
			return true;
		const int fd = open(l.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return true;
		table t;
		std::string w;
		const int r = read_fd(fd, pid, start, l.path, &t, &w);
		close(fd);
		// A forked child still holds its parent's table (the pid
		// differs): not this process's.
		if (r == 0 && t.publisher == 0) {
			*out = std::move(t);
			ret = 0;
			return false;
		}
		if (r != -ESTALE && ret == -ENOENT) {
			ret = r;
			*why = w;
		}
		return true;
	};
	if (cli::remote::for_each_fd_link(pid, look) < 0)
		return -ENOENT;
	return ret;
}

} // namespace

int read_pid(int pid, table *out, std::string *why)
{
	const uint64_t start = process_start_time(pid);
	if (start == 0)
		return fail(why, -ESRCH, "process " + std::to_string(pid) + " is gone");
	std::string w;
	const int own = read_own(pid, start, out, &w);
	if (own != -ENOENT) {
		if (own < 0 && why)
			*why = w;
		return own;
	}
	// A table another process publishes for it (foreign_table).
	const std::string path = file_path(default_dir, pid, start);
	uid_t uid = 0;
	if (table_user(pid, path, &uid) != 0)
		return fail(why, -ESRCH, "process " + std::to_string(pid) + " is gone");
	int ret = read_file(path, pid, start, uid, out, why);
	if (ret < 0)
		return ret;
	struct stat st;
	// Only while its publisher maps it.
	if (out->publisher <= 0 || stat(path.c_str(), &st) != 0 ||
	    !still_mapped(out->publisher, st.st_ino)) {
		*out = table{};
		return fail(why, -ESTALE, path + ": left by a publisher that has gone");
	}
	return 0;
}

namespace
{

// A decimal number of at most @max digits, without sign, space or
// leading zero, that ends at @end: strtoul and sscanf take "+1", " 1" and
// "01" for 1, and a name must have one spelling only.
bool strict_number(const char *p, char end, size_t max, unsigned long long *out)
{
	size_t n = 0;
	unsigned long long v = 0;
	for (; p[n] >= '0' && p[n] <= '9'; n++) {
		if (n == max)
			return false;
		v = v * 10 + unsigned(p[n] - '0');
	}
	if (n == 0 || p[n] != end || (p[0] == '0' && n > 1))
		return false;
	*out = v;
	return true;
}

} // namespace

bool parse_file_name(const char *name, int *pid, uint64_t *start_time)
{
	const size_t plen = std::strlen(file_prefix);
	if (std::strncmp(name, file_prefix, plen) != 0)
		return false;
	const char *p = name + plen;
	unsigned long long v = 0, start = 0;
	if (!strict_number(p, '.', 10, &v) || v == 0 || v > 0x7fffffff)
		return false;
	const char *dot = std::strchr(p, '.');
	if (!strict_number(dot + 1, '\0', 20, &start))
		return false;
	*pid = int(v);
	*start_time = start;
	return true;
}

int clean_stale(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	if (!d)
		return 0;
	int removed = 0;
	while (dirent *e = readdir(d)) {
		int pid = 0;
		uint64_t start = 0;
		if (!parse_file_name(e->d_name, &pid, &start))
			continue;
		if (process_start_time(pid) == start)
			continue; // alive
		std::string path = dir + "/" + e->d_name;
		struct stat st;
		if (lstat(path.c_str(), &st) != 0 || (geteuid() != 0 && st.st_uid != geteuid()))
			continue;
		if (unlink(path.c_str()) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

} // namespace sockbuf::registry
