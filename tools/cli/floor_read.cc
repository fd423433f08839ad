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

int read_header(const std::string &path, int pid, uint64_t start_time, uid_t uid, header_info *out,
		std::string *why)
{
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
	uint64_t start = process_start_time(pid);
	struct stat proc;
	std::string proc_dir = "/proc/" + std::to_string(pid);
	if (start == 0 || stat(proc_dir.c_str(), &proc) != 0)
		return fail(why, -ESRCH, "process " + std::to_string(pid) + " is gone");
	std::string path = file_path(default_dir, pid, start);
	// The process's user, or root: a worker forked by a root master
	// publishes its inherited floors at fork() (the shim's fork seed),
	// before it changes user; only root can have made a root-owned file.
	struct stat owner;
	uid_t uid = proc.st_uid;
	if (stat(path.c_str(), &owner) == 0 && owner.st_uid == 0)
		uid = 0;
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

int clean_stale(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	if (!d)
		return 0;
	const size_t plen = std::strlen(file_prefix);
	int removed = 0;
	while (dirent *e = readdir(d)) {
		if (std::strncmp(e->d_name, file_prefix, plen) != 0)
			continue;
		unsigned long pid = 0;
		unsigned long long start = 0;
		int used = 0;
		if (std::sscanf(e->d_name + plen, "%lu.%llu%n", &pid, &start, &used) != 2 ||
		    e->d_name[plen + size_t(used)] != '\0' || pid == 0 || pid > 0x7fffffff)
			continue;
		if (process_start_time(int(pid)) == start)
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
