// SPDX-License-Identifier: MIT
#include "force_ceiling.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using json = nlohmann::ordered_json;

namespace sockbuf::kcheck
{

namespace
{

int get_int(int fd, int opt)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return ::getsockopt(fd, SOL_SOCKET, opt, &v, &len) == 0 ? v : -errno;
}

int set_int(int fd, int opt, int v)
{
	return ::setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)) == 0 ? 0 : -errno;
}

json errno_or_null(int err)
{
	return err ? json(std::string(std::strerror(-err))) : json(nullptr);
}

std::string read_text(const char *path)
{
	std::ifstream in(path);
	std::string s;
	std::getline(in, s);
	return in || in.eof() ? s : std::string();
}

// Writes @text to @path: 0 or -errno.
int write_text(const char *path, const std::string &text)
{
	int fd = ::open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = ::write(fd, text.data(), text.size());
	int err = n < 0 ? -errno : 0;
	::close(fd);
	return err;
}

// The child's answer, one fixed record through a pipe.
struct ns_file {
	int exists;
	int writable; // access(W_OK)
	int write_err;
	char before[64], after_child[64];
};

constexpr const char *files[] = {"/proc/sys/net/core/wmem_max", "/proc/sys/net/core/rmem_max",
				 "/proc/sys/net/ipv4/tcp_wmem"};
constexpr int nfiles = 3;

// A value different from @now: the first number plus 4096.
std::string changed(const std::string &now)
{
	long first = std::strtol(now.c_str(), nullptr, 10);
	std::string rest = now.substr(std::min(now.size(), now.find_first_of(" \t")));
	return std::to_string(first + 4096) + (rest == now ? "" : rest);
}

} // namespace

json force_raw(int size)
{
	json j = {{"size", size}};
	const int opt_force[2] = {SO_SNDBUFFORCE, SO_RCVBUFFORCE};
	const int opt_size[2] = {SO_SNDBUF, SO_RCVBUF};
	const char *names[2] = {"snd", "rcv"};
	for (int i = 0; i < 2; i++) {
		int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			j[names[i]] = {{"error", std::strerror(errno)}};
			continue;
		}
		int set_err = set_int(fd, opt_force[i], size / 2);
		int stored = get_int(fd, opt_size[i]);
		int lock_before = get_int(fd, SO_BUF_LOCK);
		int unlock_err = set_int(fd, SO_BUF_LOCK, 0);
		int lock_after = get_int(fd, SO_BUF_LOCK);
		int after_unlock = get_int(fd, opt_size[i]);
		::close(fd);
		j[names[i]] = {
		    {"force_err", errno_or_null(set_err)},
		    {"stored", stored},
		    {"force_stored", set_err == 0 && stored == (size & ~1)},
		    {"lock_before_unlock", lock_before},
		    {"unlock_err", errno_or_null(unlock_err)},
		    {"lock_after_unlock", lock_after},
		    {"after_unlock", after_unlock},
		    {"unlock_keeps", unlock_err == 0 && lock_after == 0 && after_unlock == stored}};
	}
	j["init_ns"] = {{"wmem_max", read_text("/proc/sys/net/core/wmem_max")},
			{"rmem_max", read_text("/proc/sys/net/core/rmem_max")},
			{"tcp_wmem", read_text("/proc/sys/net/ipv4/tcp_wmem")},
			{"tcp_rmem", read_text("/proc/sys/net/ipv4/tcp_rmem")}};
	return j;
}

json netns_sysctls(bool may_write)
{
	ns_file res[nfiles] = {};
	int pipefd[2];
	if (::pipe2(pipefd, O_CLOEXEC) != 0)
		return {{"error", std::strerror(errno)}};
	pid_t pid = ::fork();
	if (pid < 0)
		return {{"error", std::strerror(errno)}};
	if (pid == 0) {
		::close(pipefd[0]);
		if (::unshare(CLONE_NEWNET) != 0)
			_exit(10);
		for (int i = 0; i < nfiles; i++) {
			ns_file &f = res[i];
			f.exists = ::access(files[i], F_OK) == 0;
			f.writable = f.exists && ::access(files[i], W_OK) == 0;
			std::string now = f.exists ? read_text(files[i]) : "";
			std::snprintf(f.before, sizeof(f.before), "%s", now.c_str());
			if (f.exists && may_write) {
				f.write_err = write_text(files[i], changed(now));
				std::snprintf(f.after_child, sizeof(f.after_child), "%s",
					      read_text(files[i]).c_str());
			}
		}
		ssize_t n = ::write(pipefd[1], res, sizeof(res));
		_exit(n == (ssize_t)sizeof(res) ? 0 : 11);
	}
	::close(pipefd[1]);
	ssize_t n = ::read(pipefd[0], res, sizeof(res));
	::close(pipefd[0]);
	int status = 0;
	::waitpid(pid, &status, 0);
	if (n != (ssize_t)sizeof(res) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return {{"error", "child in a new network namespace failed"}};
	json j = {{"written", may_write}};
	for (int i = 0; i < nfiles; i++) {
		const ns_file &f = res[i];
		std::string init_now = read_text(files[i]);
		json e = {{"exists", f.exists != 0}, {"writable", f.writable != 0}};
		if (f.exists && may_write) {
			bool moved_in_child =
			    f.write_err == 0 && std::string(f.after_child) != std::string(f.before);
			e["write_err"] = errno_or_null(f.write_err);
			e["init_ns_after"] = init_now;
			e["per_netns"] = moved_in_child && init_now == std::string(f.before);
			// A shared value that the child moved: put it back.
			if (moved_in_child && init_now != std::string(f.before))
				write_text(files[i], f.before);
		}
		j[files[i] + std::strlen("/proc/sys/")] = e;
	}
	return j;
}

} // namespace sockbuf::kcheck
