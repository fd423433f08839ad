// SPDX-License-Identifier: MIT
// The remote guard (remote_guard.h): another process's sockets kept at
// their floors from outside, without holding a copy of any of them.
#include "remote_guard.h"
#include "closer.h"
#include "remote_guard_internal.h"
#include "take.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unordered_map>

namespace sockbuf::cli::remote
{

namespace
{

// The test seam: SOCKBUF_RUN_FAULT=guard_no_precheck skips the /proc
// check of a pass, so that a reused number reaches the restore and only
// the cookie check at the write keeps it unwritten.
bool no_precheck()
{
	return test_fault("guard_no_precheck");
}

// A direction restored short of its floor by the owner's own limit
// (net.core.[rw]mem_max without FORCE).
bool short_by_mem_max(const struct sockbuf_floor &floor, const struct sockbuf_report &rep)
{
	const auto dir = [](int want, const struct sockbuf_dir_report &r) {
		return want > 0 && r.effective < want && (r.clamps & SOCKBUF_CLAMP_MEM_MAX);
	};
	return dir(floor.snd, rep.snd) || dir(floor.rcv, rep.rcv);
}

// The report of a restore with FORCE made after one without: a direction
// the second raised further is the second's; the first's otherwise (it
// had raised that direction already, or nothing was left to do).
void merge_forced(struct sockbuf_report *rep, const struct sockbuf_report &forced)
{
	if (forced.snd.effective > rep->snd.effective)
		rep->snd = forced.snd;
	if (forced.rcv.effective > rep->rcv.effective)
		rep->rcv = forced.rcv;
	rep->flags |= forced.flags;
}

} // namespace

uint64_t cookie_of(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);
	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) != 0 || len != sizeof(c))
		return 0;
	return c;
}

// The states a dump reports sizes for (as the library's guard asks).
uint32_t full_socket_states()
{
	return ~((1u << TCP_SYN_RECV) | (1u << TCP_TIME_WAIT) | (1u << 12 /* NEW_SYN_RECV */));
}

// The states of a connection (no listener, nor a socket only bound: dumped
// as TCP_CLOSE since 6.8's TCP_BOUND_INACTIVE, bit 13).
uint32_t connected_states()
{
	return full_socket_states() & ~((1u << TCP_LISTEN) | (1u << TCP_CLOSE) | (1u << 13));
}

guard::~guard()
{
	if (journal_fd_ >= 0)
		close(journal_fd_);
}

guard::process::~process()
{
	if (pidfd >= 0)
		close(pidfd);
}

void guard::end()
{
	socks_.clear();
	set_gen_++;
	procs_.clear();
}

guard::process *guard::proc(pid_t pid, int pidfd)
{
	auto it = procs_.find(pid);
	if (it != procs_.end())
		return it->second.get();
	auto p = std::make_unique<process>();
	p->pidfd =
	    pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 0) : int(syscall(SYS_pidfd_open, pid, 0));
	if (p->pidfd < 0)
		return nullptr;
	p->pid = pid;
	p->uid = owner_of(pid); // after the pidfd: the process of that pid
	if (who_)
		p->table.open(pid); // no table (publication off): guarded all the same
	return procs_.emplace(pid, std::move(p)).first->second.get();
}

int guard::add(pid_t pid, int fd, int dup, const struct sockbuf_floor &floor, bool inherited)
{
	// The same socket again with the same floors (a program that sizes
	// it twice): nothing to change, nothing to publish again.
	const uint64_t cookie = cookie_of(dup);
	for (const socket_ref &o : socks_)
		if (o.pid == pid && o.fd == fd && cookie && o.cookie == cookie &&
		    o.inherited == inherited && (!floor.snd || floor.snd == o.floor.snd) &&
		    (!floor.rcv || floor.rcv == o.floor.rcv))
			return 0;
	if (cookie == 0)
		return -EOPNOTSUPP; // no socket, or before 4.12: no identity to check at the write
	struct stat st;
	if (fstat(dup, &st) != 0)
		return -errno;
	int family = 0;
	socklen_t len = sizeof(family);
	if (getsockopt(dup, SOL_SOCKET, SO_DOMAIN, &family, &len) != 0)
		return -errno;
	socket_ref s;
	s.pid = pid;
	s.fd = fd;
	s.cookie = cookie;
	s.inode = uint32_t(st.st_ino);
	s.family = family;
	s.floor = floor;
	s.inherited = inherited;
	process *p = proc(pid);
	if (!p)
		return -errno;
	p->sockets++; // counted first: replacing its only socket keeps its table
	for (size_t i = 0; i < socks_.size(); i++) {
		socket_ref &o = socks_[i];
		if (o.pid != pid || o.fd != fd)
			continue;
		if (o.cookie == s.cookie) {
			if (!s.floor.snd)
				s.floor.snd = o.floor.snd;
			if (!s.floor.rcv)
				s.floor.rcv = o.floor.rcv;
		}
		drop(i, o.cookie == s.cookie ? keep : reused);
		break;
	}
	socks_.push_back(s);
	set_gen_++;
	for (registry::source w : {registry::by_shim, registry::by_guard}) {
		if (!(who_ & w))
			continue;
		// The program's own floor (by_shim) or its listener's.
		const registry::source as =
		    w == registry::by_shim && s.inherited ? registry::by_listener : w;
		p->table.publish(s.inode, s.floor.snd, s.floor.rcv, as);
	}
	return 0;
}

void guard::release()
{
	for (auto &[pid, p] : procs_)
		p->table.release();
	procs_.clear();
	socks_.clear();
	set_gen_++;
}

void guard::after_fork_child()
{
	diag_.after_fork();
	for (auto &[pid, p] : procs_)
		p->table.reopen();
}

// Entry i leaves (the last takes its place); its process's table and
// pidfd go with its last socket.
void guard::drop(size_t i, verdict why)
{
	const socket_ref s = socks_[i];
	socks_[i] = socks_.back();
	socks_.pop_back();
	set_gen_++;
	if (why == gone)
		totals_.gone++;
	else if (why == reused)
		totals_.reused++;
	auto it = procs_.find(s.pid);
	if (it == procs_.end())
		return;
	process &p = *it->second;
	p.table.withdraw(s.inode, registry::by_shim);
	p.table.withdraw(s.inode, registry::by_listener);
	p.table.withdraw(s.inode, registry::by_guard);
	if (--p.sockets == 0)
		procs_.erase(it);
}

// Does fd s.fd of s.pid still name the socket?  By its inode in /proc,
// without taking it.
guard::verdict guard::still_there(const socket_ref &s) const
{
	char path[64], link[64];
	fmt::format_to_n(path, sizeof(path) - 1, "/proc/{}/fd/{}", s.pid, s.fd).out[0] = '\0';
	const ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return gone; // closed, or the process is gone
	link[n] = '\0';
	unsigned long ino = 0;
	if (std::sscanf(link, "socket:[%lu]", &ino) != 1)
		return reused; // the number now names something else
	return ino == s.inode ? keep : reused;
}

void guard::restore(size_t i, int64_t snd, int64_t rcv, const restore_fn &restored)
{
	const socket_ref s = socks_[i];
	auto it = procs_.find(s.pid);
	if (it == procs_.end()) {
		drop(i, gone);
		return;
	}
	const process &p = *it->second;
	const int dup = take(p, s.fd);
	if (dup < 0) {
		if (errno == EBADF || errno == ESRCH)
			drop(i, gone);
		else if (errno != EAGAIN)
			totals_.errors++; // EPERM and the like: tried again next pass
		return;
	}
	// The identity rule: the cookie right before the write (a file that
	// is no socket has none: ENOTSOCK, the file itself untouched).
	if (cookie_of(dup) != s.cookie) {
		put(p, dup);
		drop(i, reused);
		return;
	}
	if (snd < 0 && rcv < 0) {
		// Named by a record, not read by a dump: read through the copy.
		int v = 0;
		socklen_t len = sizeof(v);
		if (s.floor.snd > 0 && getsockopt(dup, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0)
			snd = v;
		len = sizeof(v);
		if (s.floor.rcv > 0 && getsockopt(dup, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0)
			rcv = v;
		if ((s.floor.snd <= 0 || snd < 0 || snd >= s.want_snd()) &&
		    (s.floor.rcv <= 0 || rcv < 0 || rcv >= s.want_rcv())) {
			put(p, dup); // back already (or never below): nothing to write
			return;
		}
	}
	struct sockbuf_report rep;
	// Not written unless recorded: a kill from here on must find the
	// record at the next start.
	if (!note(&s, dup)) {
		put(p, dup);
		return;
	}
	if (test_fault("die_before_write"))
		raise(SIGKILL); // the test seam: recorded, nothing written
	if (test_fault("die_mid_restore")) {
		// The test seam: the state a kill between the size's write and
		// the lock's clear leaves (the write locks the direction).
		const int v = s.floor.rcv > 0 ? s.floor.rcv : s.floor.snd;
		setsockopt(dup, SOL_SOCKET, s.floor.rcv > 0 ? SO_RCVBUF : SO_SNDBUF, &v, sizeof(v));
		raise(SIGKILL);
	}
	int ret = sockbuf_restore_floor(dup, &s.floor, SOCKBUF_F_FALLBACK_DEFAULT, &rep);
	// FORCE only where the owner's own limit (net.core.[rw]mem_max) kept
	// a direction short, and only if the owner could use it itself.  Its
	// rights are asked then, at every such restore, never remembered (a
	// process that drops CAP_NET_ADMIN must not be raised past its own
	// limits afterwards), and not at the restores that need no FORCE
	// (a floor under the limit: most), where the /proc reads they take
	// were most of a restore's cost.
	if (ret == 0 && short_by_mem_max(s.floor, rep) && may_force_ && may_force_(s.pid)) {
		struct sockbuf_report forced;
		if (sockbuf_restore_floor(dup, &s.floor,
					  SOCKBUF_F_FALLBACK_DEFAULT | SOCKBUF_F_ALLOW_FORCE,
					  &forced) == 0)
			merge_forced(&rep, forced);
	}
	if (test_fault("die_after_restore"))
		raise(SIGKILL); // the test seam: written, the record not cleared
	note(nullptr, dup);
	put(p, dup);
	if (ret < 0) {
		totals_.errors++;
		return;
	}
	for (const struct sockbuf_dir_report *r : {&rep.snd, &rep.rcv})
		if (r->strategy != SOCKBUF_STRAT_HELD && r->strategy != SOCKBUF_STRAT_DEFAULT &&
		    r->strategy != SOCKBUF_STRAT_NONE)
			totals_.restored++;
	// Short of the floor by the owner's own limit (net.core.[rw]mem_max
	// without FORCE): that is the most this socket can be kept at until
	// forget_reach() (the net's pass) tries the floor again.  A shortfall
	// for any other reason (the kernel cut it again at once) is not kept.
	socket_ref &kept = socks_[i];
	const auto reach = [](int floor, const struct sockbuf_dir_report &r) {
		return floor && r.effective > 0 && r.effective < floor &&
			       (r.clamps & SOCKBUF_CLAMP_MEM_MAX)
			   ? r.effective
			   : 0;
	};
	kept.reach_snd = reach(s.floor.snd, rep.snd);
	kept.reach_rcv = reach(s.floor.rcv, rep.rcv);
	if (restored)
		restored(s, snd, rcv, rep);
}

int guard::take(const process &p, int fd)
{
	if (closer::get().backed_up(p.uid)) {
		totals_.closing++;
		errno = EAGAIN;
		return -1;
	}
	const int dup = take_socket(p.pidfd, p.pid, fd);
	// Said once: it holds for every take while the cgroups cannot be
	// joined (a read-only cgroup mount, as under ProtectControlGroups=).
	if (dup >= 0 && !class_said_) {
		if (const std::string lost = class_note(); !lost.empty()) {
			class_said_ = true;
			notes_.push_back(fmt::format(
			    "pid {} fd {}: its net_cls classid and net_prio index are now this "
			    "process's, not the owner's ({}); so for every socket taken while that "
			    "holds (said once)",
			    p.pid, fd, lost));
		}
	}
	return dup;
}

void guard::put(const process &p, int dup)
{
	closer::get().close_later(dup, p.uid);
}

void guard::forget_reach()
{
	for (socket_ref &s : socks_)
		s.reach_snd = s.reach_rcv = 0;
}

const socket_ref *guard::find_inode(uint32_t inode)
{
	if (by_inode_gen_ != set_gen_) {
		by_inode_.clear();
		for (size_t i = 0; i < socks_.size(); i++)
			by_inode_.emplace(socks_[i].inode, i); // the first of a shared socket's
		by_inode_gen_ = set_gen_;
	}
	auto it = by_inode_.find(inode);
	return it == by_inode_.end() ? nullptr : &socks_[it->second];
}

bool guard::restore_inode(uint32_t inode, const restore_fn &restored)
{
	// The index is made again after the set changed: records come in
	// bursts under pressure, the set's changes rarely.
	const socket_ref *s = find_inode(inode);
	if (!s)
		return false;
	restore(size_t(s - socks_.data()), -1, -1, restored);
	return true;
}

void guard::pass(const restore_fn &restored)
{
	totals_.passes++;
	const size_t n = socks_.size();
	if (n == 0)
		return;
	// Sizes by cookie, from one dump (only when restoring).
	struct sizes {
		int64_t snd = -1, rcv = -1;
		bool seen = false;
	};
	std::vector<sizes> now(n);
	std::vector<listening> listeners;
	const bool dump = restore_ || inherit_;
	if (dump && !diag_.is_open())
		dump_err_ = diag_.open();
	if (dump && diag_.is_open()) {
		std::unordered_map<uint64_t, size_t> by_cookie;
		for (size_t i = 0; i < n; i++)
			by_cookie.emplace(socks_[i].cookie, i);
		diag::filter f;
		// Publishing only: the listeners alone (the kernel then skips
		// the established table).
		f.states = restore_ ? full_socket_states() : 1u << TCP_LISTEN;
		f.tcp_info = false;
		dump_err_ = diag_.each(f, [&](const diag::socket_info &si) {
			auto it = by_cookie.find(si.cookie);
			if (it == by_cookie.end())
				return;
			now[it->second] = {si.sndbuf, si.rcvbuf, true};
			if (si.state == TCP_LISTEN)
				listeners.push_back({si.local.port, socks_[it->second]});
		});
	}
	// Which numbers still name their socket, through /proc: every socket
	// the dump did not show (closed, or not bound yet) and a rolling
	// ceil(n / 16) of the others, so that a socket that lives on in
	// another process (a forked child, a copy) leaves within 16 passes
	// of its number's reuse.  Backwards: a drop moves the last entry into
	// the place of one already looked at.
	const size_t step = (n + 15) / 16;
	if (sweep_ >= n)
		sweep_ = 0;
	const size_t lo = sweep_, hi = std::min(n, lo + step);
	sweep_ = hi;
	if (!no_precheck())
		for (size_t i = n; i-- > 0;) {
			if (now[i].seen && (i < lo || i >= hi))
				continue;
			const verdict v = still_there(socks_[i]);
			if (v == keep)
				continue;
			drop(i, v);
			now[i] = now.back();
			now.pop_back();
		}
	if (restore_)
		for (size_t i = socks_.size(); i-- > 0;) {
			const socket_ref &s = socks_[i];
			const sizes &z = now[i];
			const bool snd_below = s.floor.snd && z.snd >= 0 && z.snd < s.want_snd();
			const bool rcv_below = s.floor.rcv && z.rcv >= 0 && z.rcv < s.want_rcv();
			if (!snd_below && !rcv_below)
				continue;
			totals_.below += uint64_t(snd_below) + uint64_t(rcv_below);
			restore(i, z.snd, z.rcv, restored);
		}
	// Last: it adds entries the vectors above do not cover.  A socket
	// adopted now is looked at from the next pass on.
	const std::vector<uint64_t> closed = inherit_ && dump && diag_.is_open() && dump_err_ == 0
						 ? closed_listeners(&listeners)
						 : std::vector<uint64_t>{};
	if (inherit_ && !listeners.empty())
		adopt_accepted(listeners);
	for (uint64_t c : closed)
		noted_.erase(c);
}

int guard::sync_published(pid_t pid, const std::map<uint32_t, struct sockbuf_floor> &floors,
			  int pidfd)
{
	// Forget what is no longer published (backwards: a drop moves the
	// last entry into the place of one already looked at).
	std::map<uint32_t, bool> guarded;
	for (size_t i = socks_.size(); i-- > 0;) {
		const socket_ref &s = socks_[i];
		if (s.pid != pid)
			continue;
		auto f = floors.find(s.inode);
		if (f == floors.end())
			drop(i, keep);
		else if (f->second.snd == s.floor.snd && f->second.rcv == s.floor.rcv)
			guarded[s.inode] = true;
	}
	std::map<uint32_t, std::pair<pid_t, int>> where;
	for (const auto &[ino, floor] : floors)
		if (!guarded.count(ino))
			where.emplace(ino, std::pair<pid_t, int>{0, -1});
	if (where.empty())
		return 0;
	process *pr = proc(pid, pidfd);
	if (!pr)
		return -errno;
	find_inodes(pid, &where);
	int missing = 0;
	for (const auto &[ino, at] : where) {
		if (at.first == 0) {
			missing++;
			continue;
		}
		const int dup = take(*pr, at.second);
		if (dup < 0) {
			missing++;
			continue;
		}
		struct stat st;
		// Identity at the take: the number still names that inode (a
		// socket first: a file swapped in, FUSE or NFS, is not fstat()ed).
		const uint64_t cookie = cookie_of(dup);
		if (cookie != 0 && fstat(dup, &st) == 0 && uint32_t(st.st_ino) == ino) {
			add(pid, at.second, dup, floors.at(ino));
			if (!left_.empty())
				look_left(dup, cookie, pid);
		} else
			missing++;
		put(*pr, dup);
	}
	// A process none of whose sockets could be added holds no pidfd.
	auto it = procs_.find(pid);
	if (it != procs_.end() && it->second->sockets == 0)
		procs_.erase(it);
	return missing;
}

std::string restored_text(const socket_ref &s, int64_t snd, int64_t rcv,
			  const struct sockbuf_report &rep)
{
	std::string what;
	if (snd >= 0 && snd < s.floor.snd)
		what += fmt::format(" snd {} -> {}", snd, rep.snd.effective);
	if (rcv >= 0 && rcv < s.floor.rcv)
		what += fmt::format(" rcv {} -> {}", rcv, rep.rcv.effective);
	return what;
}

} // namespace sockbuf::cli::remote
