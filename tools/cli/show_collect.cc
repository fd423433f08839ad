// SPDX-License-Identifier: MIT
#include "show_collect.h"

#include "floor_read.h"
#include "proc_fds.h"
#include "sysctl.h"
#include "take.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unordered_map>

namespace sockbuf::cli::show
{

namespace
{

class unique_fd
{
public:
	explicit unique_fd(int fd = -1) : fd_(fd) {}
	~unique_fd()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	unique_fd(const unique_fd &) = delete;
	unique_fd &operator=(const unique_fd &) = delete;
	int get() const { return fd_; }

private:
	int fd_;
};

// socket inode -> fd for one process, from /proc/PID/fd.
int socket_fds(int pid, std::unordered_map<uint32_t, int> *out)
{
	return remote::for_each_fd_link(pid, [out](const remote::fd_link &l) {
		const std::string target(l.target);
		unsigned long ino = 0;
		if (std::sscanf(target.c_str(), "socket:[%lu]", &ino) == 1)
			out->emplace(uint32_t(ino), l.fd);
		return true;
	});
}

// The lock bits of another process's socket, through a duplicate.
void read_lock(shown_socket *s, int pidfd, int pidfd_err)
{
	if (pidfd < 0) {
		s->lock_note = fmt::format("pidfd_open: {}", std::strerror(pidfd_err));
		return;
	}
	int dup = remote::take_socket(pidfd, s->pid, s->fd);
	if (dup < 0) {
		const int e = errno;
		s->lock_note = fmt::format("pidfd_getfd: {}{}", std::strerror(e),
					   e == EPERM || e == EACCES
					       ? " (needs the rights of ptrace attach: the "
						 "process's user, or CAP_SYS_PTRACE)"
					       : "");
		return;
	}
	unique_fd guard(dup); // closes our copy only: the socket stays open
	int bits = -1;
	socklen_t len = sizeof(bits);
	if (getsockopt(dup, SOL_SOCKET, SO_BUF_LOCK, &bits, &len) == 0)
		s->lock = bits;
	else
		s->lock_note = fmt::format("SO_BUF_LOCK: {}", std::strerror(errno));
}

int64_t ns_inode(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0 ? int64_t(st.st_ino) : -1;
}

// Enter @pid's network namespace if it differs from ours.
int enter_netns(int pid, std::string *why)
{
	std::string theirs = fmt::format("/proc/{}/ns/net", pid);
	int64_t a = ns_inode("/proc/self/ns/net"), b = ns_inode(theirs);
	if (b < 0) {
		int err = errno;
		*why = fmt::format("{}: {}", theirs, std::strerror(err));
		return -err;
	}
	if (a == b)
		return 0;
	unique_fd ns(open(theirs.c_str(), O_RDONLY | O_CLOEXEC));
	if (ns.get() < 0 || setns(ns.get(), CLONE_NEWNET) != 0) {
		int err = errno;
		*why = fmt::format("process {} is in another network namespace and entering it "
				   "failed: {}",
				   pid, std::strerror(err));
		return -err;
	}
	return 0;
}

void add_socket(collection *out, const diag::socket_info &si, int pid, int fd, int pidfd,
		int pidfd_err)
{
	shown_socket s;
	s.pid = pid;
	s.fd = fd;
	s.info = si;
	read_lock(&s, pidfd, pidfd_err);
	out->sockets.push_back(std::move(s));
}

// The floors @pid published, on its sockets in @out; a note when its
// table is there but unusable.
void attach_floors(collection *out, int pid)
{
	registry::table t;
	std::string why;
	int ret = registry::read_pid(pid, &t, &why);
	if (ret == -ENOENT || ret == -ESRCH)
		return; // nothing published (or gone meanwhile)
	if (ret < 0) {
		out->notes.push_back(fmt::format(
		    "process {}: floors unknown, its floor table is unusable: {}", pid, why));
		return;
	}
	if (t.dropped)
		out->notes.push_back(fmt::format("process {}: {} floors did not fit its floor "
						 "table and are not shown",
						 pid, t.dropped));
	std::unordered_map<uint64_t, const registry::entry *> by_inode;
	for (const auto &e : t.entries)
		by_inode.emplace(e.inode, &e);
	for (auto &s : out->sockets) {
		auto it = by_inode.find(s.info.inode);
		if (s.pid != pid || it == by_inode.end())
			continue;
		s.floor_snd = it->second->snd;
		s.floor_rcv = it->second->rcv;
		s.floor_by = it->second->who;
		s.guard_mem_us = t.guard.mem_us;
		s.guard_set_us = t.guard.set_us;
		s.guard_served_by = t.guard.served_by;
	}
}

int dump_tcp(std::vector<diag::socket_info> *all, std::string *why)
{
	int ret = diag::dump(all, {});
	if (ret < 0)
		*why = fmt::format("inet_diag dump: {}", std::strerror(-ret));
	return ret;
}

} // namespace

net_limits read_limits()
{
	net_limits l;
	l.rcvbuf_max = sysctl::setbuf_stored_max(sysctl::read_int("/proc/sys/net/core/rmem_max"));
	l.sndbuf_max = sysctl::setbuf_stored_max(sysctl::read_int("/proc/sys/net/core/wmem_max"));
	sysctl::read_ints("/proc/sys/net/ipv4/tcp_rmem", l.tcp_rmem, 3);
	sysctl::read_ints("/proc/sys/net/ipv4/tcp_wmem", l.tcp_wmem, 3);
	return l;
}

int collect_pid(int pid, collection *out, std::string *why)
{
	std::unordered_map<uint32_t, int> fds;
	int ret = socket_fds(pid, &fds);
	if (ret < 0) {
		// Which sockets are the process's is known from its descriptor
		// table alone: unreadable, nothing can be listed (the lock bits
		// of a process whose table is readable but whose sockets cannot
		// be taken show as unknown instead).
		*why = fmt::format("/proc/{}/fd: {}{}", pid, std::strerror(-ret),
				   ret == -EACCES || ret == -EPERM
				       ? fmt::format(": process {}'s sockets cannot be told apart "
						     "without the rights of ptrace attach on it "
						     "(its user, or CAP_SYS_PTRACE: try as root)",
						     pid)
				       : "");
		return ret;
	}
	ret = enter_netns(pid, why);
	if (ret < 0)
		return ret;
	out->limits = read_limits();
	std::vector<diag::socket_info> all;
	ret = dump_tcp(&all, why);
	if (ret < 0)
		return ret;
	unique_fd pidfd(int(syscall(SYS_pidfd_open, pid, 0)));
	int pidfd_err = pidfd.get() < 0 ? errno : 0;
	for (const auto &si : all)
		if (auto it = fds.find(si.inode); it != fds.end() && si.inode != 0)
			add_socket(out, si, pid, it->second, pidfd.get(), pidfd_err);
	attach_floors(out, pid);
	std::sort(out->sockets.begin(), out->sockets.end(),
		  [](const shown_socket &a, const shown_socket &b) { return a.fd < b.fd; });
	return 0;
}

int collect_all(collection *out, std::string *why)
{
	out->limits = read_limits();
	std::unordered_map<uint32_t, std::vector<diag::owner>> owners;
	int ret = diag::socket_owners(&owners);
	if (ret < 0) {
		*why = fmt::format("/proc: {}", std::strerror(-ret));
		return ret;
	}
	std::vector<diag::socket_info> all;
	ret = dump_tcp(&all, why);
	if (ret < 0)
		return ret;
	std::unordered_map<int, int> pidfds; // pid -> pidfd (or -errno)
	for (const auto &si : all) {
		auto it = owners.find(si.inode);
		if (si.inode == 0 || it == owners.end())
			continue;
		for (const auto &o : it->second) {
			auto [p, fresh] = pidfds.emplace(o.pid, -1);
			if (fresh) {
				int fd = int(syscall(SYS_pidfd_open, o.pid, 0));
				p->second = fd >= 0 ? fd : -errno;
			}
			int pidfd = p->second >= 0 ? p->second : -1;
			add_socket(out, si, o.pid, o.fd, pidfd, p->second < 0 ? -p->second : 0);
		}
	}
	for (const auto &[pid, fd] : pidfds) {
		attach_floors(out, pid);
		if (fd >= 0)
			close(fd);
	}
	std::sort(out->sockets.begin(), out->sockets.end(), [](const auto &a, const auto &b) {
		return a.pid != b.pid ? a.pid < b.pid : a.fd < b.fd;
	});
	out->notes.push_back("--all lists the sockets of this network namespace only");
	return 0;
}

} // namespace sockbuf::cli::show
