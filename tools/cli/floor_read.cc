// SPDX-License-Identifier: MIT
#include "floor_read.h"

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

int read_pid(int pid, table *out, std::string *why)
{
	const uint64_t start = process_start_time(pid);
	const std::string path = file_path(default_dir, pid, start);
	uid_t uid = 0;
	if (start == 0 || table_user(pid, path, &uid) != 0)
		return fail(why, -ESRCH, "process " + std::to_string(pid) + " is gone");
	int ret = read_file(path, pid, start, uid, out, why);
	if (ret < 0)
		return ret;
	struct stat st;
	// A foreign table: its publisher maps it, never the process.
	if (stat(path.c_str(), &st) == 0 && !still_mapped(pid, st.st_ino) &&
	    !(out->publisher > 0 && still_mapped(out->publisher, st.st_ino))) {
		*out = table{};
		return fail(why, -ESTALE, path + ": left by an earlier program of this process");
	}
	return 0;
}

bool parse_file_name(const char *name, int *pid, uint64_t *start_time)
{
	const size_t plen = std::strlen(file_prefix);
	if (std::strncmp(name, file_prefix, plen) != 0)
		return false;
	unsigned long p = 0;
	unsigned long long start = 0;
	int used = 0;
	if (std::sscanf(name + plen, "%lu.%llu%n", &p, &start, &used) != 2 ||
	    name[plen + size_t(used)] != '\0' || p == 0 || p > 0x7fffffff)
		return false;
	*pid = int(p);
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
