// SPDX-License-Identifier: MIT
#include "memcg.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace sockbuf::kcheck
{

namespace
{

int write_file(const std::string &path, const std::string &text)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text.data(), text.size());
	int rc = n < 0 ? -errno : n == static_cast<ssize_t>(text.size()) ? 0 : -EIO;
	close(fd);
	return rc;
}

} // namespace

bool memcg_controls_memory(const std::string &parent)
{
	std::ifstream in(parent + "/cgroup.subtree_control");
	std::string word;
	while (in >> word)
		if (word == "memory")
			return true;
	return false;
}

int memcg_create(const std::string &dir)
{
	rmdir(dir.c_str());
	return mkdir(dir.c_str(), 0755) ? -errno : 0;
}

int memcg_remove(const std::string &dir)
{
	return rmdir(dir.c_str()) ? -errno : 0;
}

int memcg_add_pid(const std::string &dir, pid_t pid)
{
	return write_file(dir + "/cgroup.procs", std::to_string(pid));
}

int memcg_set_max(const std::string &dir, long long bytes)
{
	return write_file(dir + "/memory.max", bytes < 0 ? "max" : std::to_string(bytes));
}

long long memcg_value(const std::string &dir, const char *file)
{
	std::ifstream in(dir + "/" + file);
	std::string v;
	if (!(in >> v))
		return -1;
	if (v == "max")
		return -2;
	try {
		return std::stoll(v);
	} catch (const std::exception &) {
		return -1;
	}
}

std::map<std::string, long long> memcg_keyed(const std::string &dir, const char *file)
{
	std::map<std::string, long long> out;
	std::ifstream in(dir + "/" + file);
	std::string key;
	long long v = 0;
	while (in >> key >> v)
		out[key] = v;
	return out;
}

long long memcg_stat(const std::string &dir, const char *key)
{
	auto all = memcg_keyed(dir, "memory.stat");
	auto it = all.find(key);
	return it == all.end() ? -1 : it->second;
}

} // namespace sockbuf::kcheck
