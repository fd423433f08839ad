// SPDX-License-Identifier: MIT
#include "netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sockbuf::contract
{

namespace
{

int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

int set_flags_up(int sock, const char *ifname)
{
	ifreq ifr = {};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

// An address on lo under its own label (an alias, like `ip addr add ...
// dev lo label lo:X`), with a /24 mask.
int add_lo_address(int sock, const char *label, const char *addr)
{
	ifreq ifr = {};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", label);
	auto *sin = reinterpret_cast<sockaddr_in *>(&ifr.ifr_addr);
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
	if (ioctl(sock, SIOCSIFADDR, &ifr) < 0)
		return -errno;
	inet_pton(AF_INET, "255.255.255.0", &sin->sin_addr);
	if (ioctl(sock, SIOCSIFNETMASK, &ifr) < 0)
		return -errno;
	return 0;
}

} // namespace

int enter_user_netns()
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
		return -errno;
	char map[64];
	snprintf(map, sizeof(map), "0 %u 1", unsigned(uid));
	int err = write_file("/proc/self/uid_map", map);
	if (err == 0)
		err = write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", unsigned(gid));
	if (err == 0)
		err = write_file("/proc/self/gid_map", map);
	return err;
}

int enter_fresh_netns(std::string *what)
{
	if (unshare(CLONE_NEWNET) < 0) {
		*what = "unshare(CLONE_NEWNET)";
		return -errno;
	}
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		*what = "socket";
		return -errno;
	}
	int err = set_flags_up(sock, "lo");
	if (err < 0)
		*what = "lo up";
	if (err == 0 && (err = add_lo_address(sock, "lo:sbc1", server_addr)) < 0)
		*what = "address on lo";
	if (err == 0 && (err = add_lo_address(sock, "lo:sbc2", client_addr)) < 0)
		*what = "address on lo";
	close(sock);
	return err;
}

int read_sysctl(const std::string &path, std::string *out)
{
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = '\0';
	*out = buf;
	while (!out->empty() && (out->back() == '\n' || out->back() == ' '))
		out->pop_back();
	return 0;
}

int write_sysctl(const std::string &path, const std::string &value)
{
	return write_file(path.c_str(), value.c_str());
}

bool read_triple(const std::string &path, long out[3])
{
	std::string text;
	if (read_sysctl(path, &text) < 0)
		return false;
	return sscanf(text.c_str(), "%ld %ld %ld", &out[0], &out[1], &out[2]) == 3;
}

int run_program(const std::vector<std::string> &argv, std::string *output)
{
	std::string found;
	for (const char *dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
		std::string p = dir + argv[0];
		if (access(p.c_str(), X_OK) == 0) {
			found = p;
			break;
		}
	}
	if (found.empty())
		return -ENOENT;
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return err;
	}
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		std::vector<char *> args;
		args.reserve(argv.size() + 1);
		for (const auto &a : argv)
			args.push_back(const_cast<char *>(a.c_str()));
		args.push_back(nullptr);
		execv(found.c_str(), args.data());
		_exit(127);
	}
	close(pipefd[1]);
	char buf[512];
	ssize_t n;
	while ((n = read(pipefd[0], buf, sizeof(buf))) > 0)
		if (output)
			output->append(buf, size_t(n));
	close(pipefd[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

} // namespace sockbuf::contract
