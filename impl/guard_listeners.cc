// SPDX-License-Identifier: MIT
// Listener watches (sockbuf_guard_add_listener()): connections a framework
// accepts on its own, found at the start of each full pass by the
// listener's family, port and address, in this process's descriptor table
// only, and added with the listener's floor.  The same search the
// supervisor makes for another process (tools/remote/remote_guard.cc,
// adopt_accepted()), without pidfd_getfd(): the descriptors are ours.
#include "guard.h"

#include "guard_internal.h"

#include "diag.h"
#include "sys.h"
#include "validate.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sockbuf::guard
{

namespace
{

// Passes a connection the dump shows, and no descriptor of ours holds,
// is looked for (a socket still being accepted, or another process's).
constexpr int unmapped_tries = 3;

struct local_addr {
	int family = 0;
	uint16_t port = 0; // host order
	bool any = true;
	uint8_t addr[16] = {};
};

// The local address of @fd; 0 or -errno.
int local_of(int fd, local_addr *out)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	if (::getsockname(fd, reinterpret_cast<struct sockaddr *>(&ss), &len) < 0)
		return -errno;
	out->family = ss.ss_family;
	if (ss.ss_family == AF_INET) {
		const auto *in = reinterpret_cast<const struct sockaddr_in *>(&ss);
		out->port = ntohs(in->sin_port);
		std::memcpy(out->addr, &in->sin_addr, 4);
		out->any = in->sin_addr.s_addr == htonl(INADDR_ANY);
		return 0;
	}
	if (ss.ss_family == AF_INET6) {
		const auto *in6 = reinterpret_cast<const struct sockaddr_in6 *>(&ss);
		out->port = ntohs(in6->sin6_port);
		std::memcpy(out->addr, &in6->sin6_addr, 16);
		out->any = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
		return 0;
	}
	return -EAFNOSUPPORT;
}

size_t addr_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

} // namespace

int floor_guard::add_listener(int fd, const struct sockbuf_floor &floor)
{
	int ret = validate::sizes(floor.snd, floor.rcv, false);
	if (ret == 0)
		ret = validate::tcp_socket(fd);
	if (ret == 0)
		ret = validate::tcp_type(fd, -1);
	if (ret < 0)
		return ret;
	int listening = 0;
	ret = sys::get_int(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening);
	if (ret < 0)
		return ret;
	if (!listening)
		return -EINVAL; // as accept(2) says of a socket not listening
	ret = check_range(floor);
	if (ret < 0)
		return ret;
	local_addr la;
	ret = local_of(fd, &la);
	if (ret < 0)
		return ret;
	const int64_t inode = diag::socket_inode(fd);
	if (inode < 0)
		return int(inode);
	listener_watch w = {};
	w.fd = fd;
	w.inode = uint32_t(inode);
	w.cookie = socket_cookie(fd);
	w.family = la.family;
	w.port = la.port;
	w.any_addr = la.any;
	std::memcpy(w.addr, la.addr, sizeof(w.addr));
	w.floor = floor;

	std::lock_guard<std::mutex> lock(mu_);
	for (const listener_watch &o : listeners_)
		if (o.inode == w.inode)
			return -EEXIST;
	try {
		listeners_.push_back(w);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
	watching_.store(true, std::memory_order_relaxed);
	// A guard sockbufd serves takes its sockets back: the daemon does
	// not follow listeners.
	if (served_fd_.load(std::memory_order_relaxed) >= 0)
		wake_for_handover();
	return 0;
}

bool floor_guard::end_watch(uint32_t inode)
{
	for (size_t k = 0; k < listeners_.size(); k++)
		if (listeners_[k].inode == inode) {
			listeners_.erase(listeners_.begin() + long(k));
			watching_.store(!listeners_.empty(), std::memory_order_relaxed);
			return true;
		}
	return false;
}

int floor_guard::adopt_accepted()
{
	std::vector<listener_watch> watches;
	{
		std::lock_guard<std::mutex> lock(mu_);
		watches = listeners_;
	}
	// A watch whose descriptor no longer names its listener ends.
	for (size_t k = watches.size(); k-- > 0;) {
		const listener_watch &w = watches[k];
		const int64_t ino = diag::socket_inode(w.fd);
		const uint64_t cookie = ino >= 0 ? socket_cookie(w.fd) : 0;
		if (ino >= 0 && uint32_t(ino) == w.inode && (w.cookie == 0 || cookie == w.cookie))
			continue;
		{
			std::lock_guard<std::mutex> lock(mu_);
			end_watch(w.inode);
		}
		watches.erase(watches.begin() + long(k));
	}
	if (watches.empty())
		return 0;
	if (diag_err_ != 0 || !diag_.is_open())
		return adopt_walk(watches);

	// The connections on the watched ports the dump shows: inode ->
	// (cookie, watch).
	struct seen {
		uint64_t cookie;
		size_t watch;
	};
	std::unordered_map<uint32_t, seen> want;
	std::unordered_map<uint64_t, int> unmapped;
	for (size_t k = 0; k < watches.size(); k++) {
		const listener_watch &w = watches[k];
		diag::filter f;
		f.family = w.family;
		f.states = full_socket_states() & ~(1u << TCP_LISTEN);
		f.local_port = w.port;
		f.tcp_info = false;
		const int err = diag_.each(f, [&](const diag::socket_info &si) {
			// An inode: accepted (one still in the accept queue has none).
			if (si.inode == 0 || si.local.port != w.port)
				return;
			if (!w.any_addr &&
			    std::memcmp(si.local.addr, w.addr, addr_len(w.family)) != 0)
				return;
			auto u = unmapped_.find(si.cookie);
			if (u != unmapped_.end() && u->second <= 0) {
				unmapped.emplace(si.cookie, 0); // given up on, still there
				return;
			}
			want.emplace(si.inode, seen{si.cookie, k});
		});
		if (err < 0) {
			// The dump failed: this pass walks the table instead.
			unmapped_.clear();
			return adopt_walk(watches);
		}
	}
	{
		std::lock_guard<std::mutex> lock(mu_);
		for (auto it = want.begin(); it != want.end();)
			it = by_inode_.count(it->first) ? want.erase(it) : std::next(it);
	}
	int adopted = 0;
	if (!want.empty())
		diag::each_socket_fd(0, [&](int fd, uint32_t ino) {
			auto it = want.find(ino);
			if (it == want.end())
				return;
			const listener_watch &w = watches[it->second.watch];
			// Identity: a duplicate taken now still names the socket
			// the dump showed; the entry is made from it.
			const int dup = sys::dup_cloexec(fd);
			if (dup >= 0) {
				if (add(fd, w.floor, ino, dup) == 0)
					adopted++;
				sys::close(dup);
			}
			want.erase(it);
		});
	for (const auto &[ino, s] : want) {
		auto u = unmapped_.find(s.cookie);
		unmapped[s.cookie] = (u == unmapped_.end() ? unmapped_tries : u->second) - 1;
	}
	unmapped_ = std::move(unmapped);
	return adopted;
}

int floor_guard::adopt_walk(const std::vector<listener_watch> &watches)
{
	std::vector<std::pair<int, uint32_t>> socks;
	diag::each_socket_fd(0, [&](int fd, uint32_t ino) { socks.emplace_back(fd, ino); });
	{
		std::lock_guard<std::mutex> lock(mu_);
		for (size_t i = socks.size(); i-- > 0;)
			if (by_inode_.count(socks[i].second)) {
				socks[i] = socks.back();
				socks.pop_back();
			}
	}
	std::unordered_map<uint32_t, bool> foreign;
	int adopted = 0;
	for (const auto &[fd, ino] : socks) {
		if (foreign_.count(ino)) {
			foreign.emplace(ino, true);
			continue;
		}
		const int dup = sys::dup_cloexec(fd);
		if (dup < 0)
			continue;
		local_addr la;
		int listening = 1, protocol = 0;
		struct stat st;
		if (fstat(dup, &st) == 0 && uint32_t(st.st_ino) == ino &&
		    validate::socket_protocol(dup, &protocol) == 0 &&
		    sys::get_int(dup, SOL_SOCKET, SO_ACCEPTCONN, &listening) == 0 &&
		    local_of(dup, &la) == 0) {
			const listener_watch *match = nullptr;
			if (protocol == IPPROTO_TCP && !listening)
				for (const listener_watch &w : watches)
					if (w.family == la.family && w.port == la.port &&
					    (w.any_addr || std::memcmp(w.addr, la.addr,
								       addr_len(w.family)) == 0)) {
						match = &w;
						break;
					}
			if (match) {
				if (add(fd, match->floor, ino, dup) == 0)
					adopted++;
			} else if (la.port != 0 || protocol != IPPROTO_TCP) {
				foreign.emplace(ino, true); // bound elsewhere: never ours
			}
		}
		sys::close(dup);
	}
	foreign_ = std::move(foreign);
	return adopted;
}

} // namespace sockbuf::guard
