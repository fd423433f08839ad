// SPDX-License-Identifier: MIT
#include "net.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace examples
{

namespace
{

[[noreturn]] void fail(const std::string &what, int err)
{
	throw std::runtime_error(what + ": " + std::strerror(err));
}

sockaddr_in to_sockaddr(const endpoint &ep)
{
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(ep.port);
	if (inet_pton(AF_INET, ep.addr.c_str(), &sa.sin_addr) != 1)
		throw std::runtime_error("not an IPv4 address: '" + ep.addr + "'");
	return sa;
}

int tcp_socket()
{
	int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fail("socket", errno);
	return fd;
}

} // namespace

namespace
{

// " clamps=mem_max,tcp_mem_max" or "".
std::string clamp_text(uint32_t clamps)
{
	char names[128];
	if (!clamps || sockbuf_clamp_names(clamps, names, sizeof(names)) < 0)
		return "";
	return std::string(" clamps=") + names;
}

// The raw baseline: what a program does without the library.  Half the
// size (the kernel doubles it), FORCE variants with @force (the plain ones
// when EPERM says CAP_NET_ADMIN is missing), then the lock bits cleared.
std::string apply_raw(int fd, int size, bool force)
{
	const int half = size / 2;
	const int plain[2] = {SO_SNDBUF, SO_RCVBUF};
	const int forced[2] = {SO_SNDBUFFORCE, SO_RCVBUFFORCE};
	bool denied = false;
	for (int i = 0; i < 2; i++) {
		int ret = -1;
		if (force && !denied) {
			ret = setsockopt(fd, SOL_SOCKET, forced[i], &half, sizeof(half));
			denied = ret < 0 && errno == EPERM; // no CAP_NET_ADMIN
		}
		if (ret < 0 && (!force || denied))
			ret = setsockopt(fd, SOL_SOCKET, plain[i], &half, sizeof(half));
		if (ret < 0)
			fail("setsockopt(SO_*BUF)", errno);
	}
	const int unlock = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &unlock, sizeof(unlock)) < 0)
		fail("setsockopt(SO_BUF_LOCK) (Linux 5.15)", errno);
	int snd = 0, rcv = 0;
	socklen_t len = sizeof(snd);
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
	len = sizeof(rcv);
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
	return std::string("bufs=raw requested ") + std::to_string(size) + " snd " +
	       std::to_string(snd) + " rcv " + std::to_string(rcv) +
	       (force && !denied ? " (SO_*BUFFORCE, SO_BUF_LOCK 0)" : " (SO_*BUF, SO_BUF_LOCK 0)") +
	       (denied ? " force-denied" : "");
}

} // namespace

std::string apply_bufs(int fd, bufs_mode mode, int size, bool force)
{
	struct sockbuf_report rep;
	const unsigned int flags = force ? SOCKBUF_F_ALLOW_FORCE : 0;
	int ret = 0;
	switch (mode) {
	case bufs_mode::kernel_default:
		return "bufs=default (kernel sizes, autotuning on)";
	case bufs_mode::raw:
		return apply_raw(fd, size, force);
	case bufs_mode::initial:
		ret = sockbuf_set_initial_bufsize(fd, size, size, flags, &rep);
		break;
	case bufs_mode::lock:
		ret = sockbuf_lock_bufsize(fd, size, size, flags, &rep);
		break;
	}
	if (ret < 0)
		fail(std::string("sockbuf ") + bufs_name(mode), -ret);
	return std::string("bufs=") + bufs_name(mode) + " requested " + std::to_string(size) +
	       " snd " + std::to_string(rep.snd.effective) + " (" +
	       sockbuf_strategy_name(rep.snd.strategy) + clamp_text(rep.snd.clamps) + ") rcv " +
	       std::to_string(rep.rcv.effective) + " (" + sockbuf_strategy_name(rep.rcv.strategy) +
	       clamp_text(rep.rcv.clamps) + ")" +
	       ((rep.flags & SOCKBUF_R_FORCE_DENIED) ? " force-denied" : "");
}

int listen_on(const endpoint &ep, bufs_mode mode, int size, std::string *note, bool force)
{
	sockaddr_in sa = to_sockaddr(ep);
	int fd = tcp_socket();
	int one = 1;
	try {
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
			fail("SO_REUSEADDR", errno);
		// Before listen(): the accepted sockets inherit sizes and locks.
		*note = apply_bufs(fd, mode, size, force);
		if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0)
			fail("bind " + ep.addr + ":" + std::to_string(ep.port), errno);
		if (listen(fd, 128) < 0)
			fail("listen", errno);
	} catch (...) {
		::close(fd);
		throw;
	}
	return fd;
}

int connect_to(const endpoint &ep, bufs_mode mode, int size, std::string *note, bool force)
{
	sockaddr_in sa = to_sockaddr(ep);
	int fd = tcp_socket();
	try {
		*note = apply_bufs(fd, mode, size, force); // before the handshake
		if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0)
			fail("connect " + ep.addr + ":" + std::to_string(ep.port), errno);
		int one = 1;
		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			fail("TCP_NODELAY", errno);
	} catch (...) {
		::close(fd);
		throw;
	}
	return fd;
}

void set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		fail("TCP_NODELAY", errno);
}

uint16_t local_port(int fd)
{
	sockaddr_in sa{};
	socklen_t len = sizeof(sa);
	if (getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len) < 0)
		fail("getsockname", errno);
	return ntohs(sa.sin_port);
}

bool read_full(int fd, void *buf, size_t len)
{
	auto *p = static_cast<char *>(buf);
	size_t got = 0;
	while (got < len) {
		ssize_t n = ::read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail("read", errno);
		}
		if (n == 0) {
			if (got == 0)
				return false;
			throw std::runtime_error("connection closed inside a message");
		}
		got += static_cast<size_t>(n);
	}
	return true;
}

void write_full(int fd, const void *buf, size_t len, int flags)
{
	const auto *p = static_cast<const char *>(buf);
	while (len > 0) {
		ssize_t n = ::send(fd, p, len, flags | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail("send", errno);
		}
		p += n;
		len -= static_cast<size_t>(n);
	}
}

double now_seconds()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace examples
