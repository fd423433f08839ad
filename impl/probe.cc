// SPDX-License-Identifier: MIT
// What this kernel offers, found once per process with real sockets.
#include "probe.h"

#include "caps.h"
#include "cgroup.h"
#include "fd_serial.h"
#include "sys.h"
#include "sysctl.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/utsname.h>

namespace sockbuf::probe
{

namespace
{

int tcp_socket()
{
	return sys::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
}

// The kernel's floors: ask for 1 byte, read what it stored.
void probe_minimums(int fd, struct sockbuf_probe_info *p)
{
	if (sys::set_int(fd, SOL_SOCKET, SO_SNDBUF, 1) == 0)
		sys::get_int(fd, SOL_SOCKET, SO_SNDBUF, &p->min_sndbuf);
	if (sys::set_int(fd, SOL_SOCKET, SO_RCVBUF, 1) == 0)
		sys::get_int(fd, SOL_SOCKET, SO_RCVBUF, &p->min_rcvbuf);
}

// SO_BUF_LOCK: readable means known; clearing the bits on a socket that
// SO_SNDBUF just locked, and reading 0 back, means usable.
void probe_buf_lock(int fd, struct sockbuf_probe_info *p)
{
	int lock = -1;
	if (sys::get_int(fd, SOL_SOCKET, SO_BUF_LOCK, &lock) != 0)
		return;
	p->known |= SOCKBUF_FEAT_BUF_LOCK;
	if (sys::set_int(fd, SOL_SOCKET, SO_BUF_LOCK, 0) == 0 &&
	    sys::get_int(fd, SOL_SOCKET, SO_BUF_LOCK, &lock) == 0 && lock == 0)
		p->features |= SOCKBUF_FEAT_BUF_LOCK;
	// The socket has been through the unlock recipe (SO_RCVBUF, then the
	// lock cleared) without connecting: any window clamp now is the
	// kernel's doing, and would survive into the handshake.
	int clamp = 0;
	if ((p->features & SOCKBUF_FEAT_BUF_LOCK) &&
	    sys::get_int(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &clamp) == 0 && clamp != 0)
		p->quirks |= SOCKBUF_QUIRK_RCVBUF_CLAMPS_WINDOW;
}

// SO_RCVLOWAT raises an unlocked TCP receive buffer to twice the mark.
// Needs a socket of its own: the first one was locked by probe_minimums().
// A socket that cannot be made is the probe's error, not a missing feature.
int probe_rcvlowat(struct sockbuf_probe_info *p)
{
	int fd = tcp_socket();
	if (fd < 0)
		return fd;
	int before = 0, after = 0;
	if (sys::get_int(fd, SOL_SOCKET, SO_RCVBUF, &before) == 0 &&
	    sys::set_int(fd, SOL_SOCKET, SO_RCVLOWAT, before) == 0) {
		p->known |= SOCKBUF_FEAT_RCVLOWAT_RAISE;
		if (sys::get_int(fd, SOL_SOCKET, SO_RCVBUF, &after) == 0 && after > before)
			p->features |= SOCKBUF_FEAT_RCVLOWAT_RAISE;
	}
	sys::close(fd);
	return 0;
}

// SO_RESERVE_MEM: ENOPROTOOPT on kernels without it, EOPNOTSUPP when the
// socket is charged to no memory cgroup.  That result decides; the cgroup
// files only say why (cgroup.h).
void probe_reserve_mem(int fd, struct sockbuf_probe_info *p)
{
	int ret = sys::set_int(fd, SOL_SOCKET, SO_RESERVE_MEM, 4096);
	if (ret != -ENOPROTOOPT)
		p->known |= SOCKBUF_FEAT_RESERVE_MEM;
	if (ret == 0) {
		p->features |= SOCKBUF_FEAT_RESERVE_MEM;
		sys::set_int(fd, SOL_SOCKET, SO_RESERVE_MEM, 0);
	}
	cgroup::facts f;
	if (ret == -EOPNOTSUPP)
		cgroup::read_system(&f);
	p->reserve_state = cgroup::explain(ret, f);
}

void probe_tcp_info(int fd, struct sockbuf_probe_info *p)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (sys::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
		p->known |= SOCKBUF_FEAT_TCP_INFO;
		p->features |= SOCKBUF_FEAT_TCP_INFO;
	}
}

void read_sysctls(struct sockbuf_probe_info *p)
{
	p->sndbuf_max = sysctl::setbuf_stored_max(sysctl::read_int("/proc/sys/net/core/wmem_max"));
	p->rcvbuf_max = sysctl::setbuf_stored_max(sysctl::read_int("/proc/sys/net/core/rmem_max"));
	p->wmem_default = sysctl::read_int("/proc/sys/net/core/wmem_default");
	p->rmem_default = sysctl::read_int("/proc/sys/net/core/rmem_default");
	sysctl::read_ints("/proc/sys/net/ipv4/tcp_wmem", p->tcp_wmem, 3);
	sysctl::read_ints("/proc/sys/net/ipv4/tcp_rmem", p->tcp_rmem, 3);
}

// Runs the probe; fill_cache_locked() keeps what it found.
int run(struct sockbuf_probe_info *out)
{
	struct sockbuf_probe_info p;
	std::memset(&p, 0, sizeof(p));
	p.min_sndbuf = p.min_rcvbuf = p.tcp_sndbuf = p.tcp_rcvbuf = -1;

	int fd = tcp_socket();
	if (fd < 0)
		return fd;
	sys::get_int(fd, SOL_SOCKET, SO_SNDBUF, &p.tcp_sndbuf);
	sys::get_int(fd, SOL_SOCKET, SO_RCVBUF, &p.tcp_rcvbuf);
	probe_tcp_info(fd, &p);
	probe_reserve_mem(fd, &p);
	probe_minimums(fd, &p); // locks fd: SO_BUF_LOCK probe needs that
	probe_buf_lock(fd, &p);
	sys::close(fd);

	int ret = probe_rcvlowat(&p);
	if (ret < 0)
		return ret;
	if (caps::net_admin_effective())
		p.features |= SOCKBUF_FEAT_FORCE;
	p.known |= SOCKBUF_FEAT_FORCE; // the options exist on every kernel
	read_sysctls(&p);

	struct utsname u;
	if (uname(&u) == 0)
		std::snprintf(p.release, sizeof(p.release), "%s", u.release);
	*out = p;
	return 0;
}

std::mutex g_lock;
struct sockbuf_probe_info g_probe; // guarded by g_lock
std::atomic<bool> g_ready{false};
std::atomic<uint32_t> g_features{0};
std::atomic<uint32_t> g_known{0};
std::atomic<uint32_t> g_quirks{0};
std::atomic<int> g_tcp_wmem_max{-1};
std::atomic<int> g_tcp_rmem_max{-1};

// Caller holds g_lock.
int fill_cache_locked()
{
	struct sockbuf_probe_info p;
	int ret = run(&p);
	if (ret < 0)
		return ret;
	static bool fork_handler_installed = false; // guarded by g_lock
	if (!fork_handler_installed) {
		fd_serial::install_fork_handler();
		fork_handler_installed = true;
	}
	g_probe = p;
	g_features.store(p.features, std::memory_order_relaxed);
	g_known.store(p.known, std::memory_order_relaxed);
	g_quirks.store(p.quirks, std::memory_order_relaxed);
	g_tcp_wmem_max.store(p.tcp_wmem[2], std::memory_order_relaxed);
	g_tcp_rmem_max.store(p.tcp_rmem[2], std::memory_order_relaxed);
	g_ready.store(true, std::memory_order_release);
	return 0;
}

} // namespace

int cached(facts *out)
{
	if (!g_ready.load(std::memory_order_acquire)) {
		std::lock_guard<std::mutex> guard(g_lock);
		if (!g_ready.load(std::memory_order_relaxed)) {
			int ret = fill_cache_locked();
			if (ret < 0)
				return ret;
		}
	}
	*out =
	    facts{g_features.load(std::memory_order_relaxed),
		  g_known.load(std::memory_order_relaxed), g_quirks.load(std::memory_order_relaxed),
		  g_tcp_wmem_max.load(std::memory_order_relaxed),
		  g_tcp_rmem_max.load(std::memory_order_relaxed)};
	return 0;
}

#ifdef SOCKBUF_TEST_SEAM
void reset_for_tests()
{
	std::lock_guard<std::mutex> guard(g_lock);
	g_ready.store(false, std::memory_order_release);
}
#endif

int get(struct sockbuf_probe_info *out, bool fresh)
{
	std::lock_guard<std::mutex> guard(g_lock);
	if (fresh || !g_ready.load(std::memory_order_relaxed)) {
		int ret = fill_cache_locked();
		if (ret < 0)
			return ret;
	}
	if (out)
		*out = g_probe;
	return 0;
}

} // namespace sockbuf::probe
