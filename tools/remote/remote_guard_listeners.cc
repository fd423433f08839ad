// SPDX-License-Identifier: MIT
// The remote guard's listeners (remote_guard.h): the connections a
// guarded listener accepts, found in the owner's descriptor tables and
// its children's, and added with the listener's floor; a listener noted
// at listen(); and the search of a process's table by inode that
// sync_published() shares.
#include "remote_guard.h"
#include "remote_guard_internal.h"

#include "closer.h"
#include "take.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <map>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace sockbuf::cli::remote
{

namespace
{

// @pid and every process below it (/proc/PID/task/TID/children).
void process_tree(pid_t pid, std::vector<pid_t> *out, int depth = 0)
{
	out->push_back(pid);
	if (depth > 32)
		return;
	DIR *d = opendir(fmt::format("/proc/{}/task", pid).c_str());
	if (!d)
		return;
	std::vector<pid_t> kids;
	while (struct dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::FILE *f = std::fopen(
		    fmt::format("/proc/{}/task/{}/children", pid, e->d_name).c_str(), "re");
		if (!f)
			continue;
		int k;
		while (std::fscanf(f, "%d", &k) == 1)
			kids.push_back(k);
		std::fclose(f);
	}
	closedir(d);
	for (pid_t k : kids)
		process_tree(k, out, depth + 1);
}

} // namespace

// The fd numbers in @pid's table of the sockets whose inode is a key of
// @want (filled in as found).
void find_inodes(pid_t pid, std::map<uint32_t, std::pair<pid_t, int>> *want)
{
	diag::each_socket_fd(pid, [&](int fd, uint32_t ino) {
		auto it = want->find(ino);
		if (it != want->end() && it->second.first == 0)
			it->second = {pid, fd};
	});
}

// Takes fd @fd of @pid if it still names the socket with @cookie and adds
// it with @floor.  True when added.
bool guard::adopt(pid_t pid, int fd, uint64_t cookie, const struct sockbuf_floor &floor,
		  bool inherited)
{
	process *pr = proc(pid);
	const int dup = pr ? take(*pr, fd) : -1;
	if (dup < 0)
		return false;
	// Identity: the number names the socket the dump showed.
	const bool ok = cookie_of(dup) == cookie && add(pid, fd, dup, floor, inherited) == 0;
	put(*pr, dup);
	return ok;
}

void guard::adopt_accepted(const std::vector<listening> &listeners)
{
	constexpr int tries = 3; // passes an unmapped socket is looked for
	std::map<uint64_t, int> seen_unmapped;
	std::map<uint64_t, std::vector<pid_t>> tree_seen;
	for (const listening &l : listeners) {
		std::vector<pid_t> tree;
		process_tree(l.listener.pid, &tree);
		// Copies of the listener in processes not looked at yet.
		std::vector<pid_t> &seen = tree_seen[l.listener.cookie];
		seen = tree_seen_[l.listener.cookie];
		for (pid_t p : tree) {
			if (p == l.listener.pid ||
			    std::find(seen.begin(), seen.end(), p) != seen.end())
				continue;
			seen.push_back(p);
			std::map<uint32_t, std::pair<pid_t, int>> copy{{l.listener.inode, {0, -1}}};
			find_inodes(p, &copy);
			const auto &at = copy.begin()->second;
			if (at.first)
				adopt(at.first, at.second, l.listener.cookie, l.listener.floor,
				      l.listener.inherited);
		}
		// The listener's connections: same local port and family, not
		// guarded yet, with an inode (accepted: a socket in the accept
		// queue has none), connected (a socket only bound to the port is
		// none: e.g. a listener the program makes again, waiting in its
		// trapped listen() during this pass).
		std::unordered_map<uint64_t, bool> guarded;
		for (const socket_ref &s : socks_)
			guarded.emplace(s.cookie, true);
		std::map<uint32_t, uint64_t> fresh; // inode -> cookie
		diag::filter f;
		f.family = l.listener.family;
		f.states = connected_states();
		f.local_port = l.port;
		f.tcp_info = false;
		diag_.each(f, [&](const diag::socket_info &si) {
			if (si.inode == 0 || si.local.port != l.port || si.state == TCP_CLOSE ||
			    guarded.count(si.cookie) || preceded(l.listener.cookie, si.cookie))
				return;
			auto u = unmapped_.find(si.cookie);
			const int left = u == unmapped_.end() ? tries : u->second;
			if (left <= 0) {
				seen_unmapped[si.cookie] = 0; // given up on, still there
				return;
			}
			fresh.emplace(si.inode, si.cookie);
		});
		if (fresh.empty())
			continue;
		std::map<uint32_t, std::pair<pid_t, int>> where;
		for (const auto &[ino, cookie] : fresh)
			where.emplace(ino, std::pair<pid_t, int>{0, -1});
		for (pid_t p : tree)
			find_inodes(p, &where);
		for (const auto &[ino, at] : where) {
			const uint64_t cookie = fresh[ino];
			if (at.first == 0) {
				auto u = unmapped_.find(cookie);
				seen_unmapped[cookie] =
				    (u == unmapped_.end() ? tries : u->second) - 1;
				continue;
			}
			if (adopt(at.first, at.second, cookie, l.listener.floor, true))
				totals_.inherited++;
		}
	}
	unmapped_ = std::move(seen_unmapped);
	tree_seen_ = std::move(tree_seen);
}

bool guard::note_listen(int dup)
{
	const uint64_t cookie = cookie_of(dup);
	auto s = std::find_if(socks_.begin(), socks_.end(), [cookie](const socket_ref &o) {
		return cookie && o.cookie == cookie;
	});
	if (s == socks_.end())
		return false;
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	if (getsockname(dup, reinterpret_cast<struct sockaddr *>(&ss), &len) != 0)
		return false;
	uint16_t port = 0;
	if (ss.ss_family == AF_INET)
		port = ntohs(reinterpret_cast<const struct sockaddr_in &>(ss).sin_port);
	else if (ss.ss_family == AF_INET6)
		port = ntohs(reinterpret_cast<const struct sockaddr_in6 &>(ss).sin6_port);
	if (port == 0)
		return false; // bound by listen() itself: a pass finds it listening
	noted n;
	n.listener = *s;
	n.port = port;
	n.seen_ms = monotonic_ms();
	if (!diag_.is_open())
		dump_err_ = diag_.open();
	diag::filter f;
	f.family = s->family;
	f.states = connected_states();
	f.local_port = port;
	f.tcp_info = false;
	constexpr size_t before_max = 4096;
	diag_.each(f, [&](const diag::socket_info &si) {
		if (si.inode != 0 && si.local.port == port && si.state != TCP_CLOSE &&
		    n.before.size() < before_max)
			n.before.push_back(si.cookie);
	});
	std::sort(n.before.begin(), n.before.end());
	noted_[cookie] = std::move(n);
	return true;
}

bool guard::preceded(uint64_t listener, uint64_t cookie) const
{
	auto it = noted_.find(listener);
	return it != noted_.end() &&
	       std::binary_search(it->second.before.begin(), it->second.before.end(), cookie);
}

std::vector<uint64_t> guard::closed_listeners(std::vector<listening> *listeners)
{
	const uint64_t now = monotonic_ms(), prev = last_pass_ms_;
	last_pass_ms_ = now;
	std::vector<uint64_t> closed;
	for (auto it = noted_.begin(); it != noted_.end();) {
		const uint64_t cookie = it->first;
		noted &n = it->second;
		const auto is = [cookie](const auto &x) { return x.cookie == cookie; };
		if (std::any_of(listeners->begin(), listeners->end(),
				[&is](const listening &l) { return is(l.listener); })) {
			n.seen_ms = now; // listening: adopt_accepted() has it
			++it;
		} else if (std::any_of(socks_.begin(), socks_.end(), is)) {
			++it; // open, not listening (yet, or its listen() failed)
		} else if (n.seen_ms >= prev) {
			// Closed since the last pass, or since it listened.
			listeners->push_back({n.port, n.listener});
			closed.push_back(cookie);
			++it;
		} else {
			it = noted_.erase(it); // closed longer than a pass ago
		}
	}
	return closed;
}

} // namespace sockbuf::cli::remote
