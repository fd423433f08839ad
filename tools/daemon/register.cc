// SPDX-License-Identifier: MIT
// Registration: the socket processes hand their tables over, its
// connections accepted (16 waiting per user) and answered, each offer
// vetted (the peer's pidfd, the table held at the number it names, the
// ptrace rule for a table published for another process), the process
// installed or forgotten when its pidfd says it exited; and the scan at
// start that finds tables published before the daemon ran.
#include "host.h"
#include "host_util.h"

#include "daemon_presence.h"
#include "fd_pass.h"
#include "floor_read.h"
#include "force_rights.h"
#include "proc_fds.h"
#include "read_file.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <string_view>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

namespace sockbuf::daemon
{

namespace
{

// The process's name and its systemd unit (the last component of its
// cgroup v2 path that ends in .service or .scope), for the metrics.
service service_of(pid_t pid)
{
	service s;
	const std::string proc = "/proc/" + std::to_string(pid);
	if (fileio::read_file((proc + "/comm").c_str(), &s.comm) == 0)
		while (!s.comm.empty() && s.comm.back() == '\n')
			s.comm.pop_back();
	std::string cg;
	if (fileio::read_file((proc + "/cgroup").c_str(), &cg) == 0) {
		const size_t at = cg.find("0::");
		if (at != std::string::npos) {
			std::string path = cg.substr(at + 3, cg.find('\n', at) - at - 3);
			while (!path.empty()) {
				const size_t slash = path.rfind('/');
				const std::string last = path.substr(slash + 1);
				if (last.size() > 8 &&
				    (last.ends_with(".service") || last.ends_with(".scope"))) {
					s.unit = last;
					break;
				}
				if (slash == std::string::npos)
					break;
				path.resize(slash);
			}
		}
	}
	// A process names itself: its name goes into labels and log lines
	// only made safe (no newline to forge a journal line, valid UTF-8).
	s.comm = clean(s.comm);
	s.unit = clean(s.unit);
	return s;
}

// What epoll's data says an event is about.
enum : uint64_t { tag_listen = 1, tag_conn = 2, tag_pidfd = 3 };
uint64_t tagged(uint64_t tag, uint32_t v)
{
	return tag << 32 | v;
}

// The fields of a "Name:\t..." line of /proc/PID/status.
std::vector<unsigned long long> status_fields(const std::string &text, const char *name, int base)
{
	std::vector<unsigned long long> out;
	const std::string key = std::string("\n") + name + ":";
	size_t at = text.find(key);
	if (at == std::string::npos)
		return out;
	const char *p = text.c_str() + at + key.size();
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\n' || !*p)
			break;
		char *end = nullptr;
		out.push_back(std::strtoull(p, &end, base));
		if (end == p)
			break;
		p = end;
	}
	return out;
}

// Whether process @peer could take process @target's sockets itself
// (pidfd_getfd: the ptrace rule with real credentials): CAP_SYS_PTRACE;
// or its real user and group are each of @target's, @target is
// dumpable, and @target's permitted capabilities are among @peer's.
bool may_act_for(pid_t peer, pid_t target)
{
	std::string ps, ts;
	if (fileio::read_file(("/proc/" + std::to_string(peer) + "/status").c_str(), &ps) != 0 ||
	    fileio::read_file(("/proc/" + std::to_string(target) + "/status").c_str(), &ts) != 0)
		return false;
	ps.insert(0, "\n");
	ts.insert(0, "\n");
	const auto peer_eff = status_fields(ps, "CapEff", 16);
	const auto peer_prm = status_fields(ps, "CapPrm", 16);
	const auto tgt_prm = status_fields(ts, "CapPrm", 16);
	if (peer_eff.size() != 1 || peer_prm.size() != 1 || tgt_prm.size() != 1)
		return false;
	constexpr unsigned long long sys_ptrace = 1ull << 19;
	if (peer_eff[0] & sys_ptrace)
		return true;
	const auto pu = status_fields(ps, "Uid", 10), tu = status_fields(ts, "Uid", 10);
	const auto pg = status_fields(ps, "Gid", 10), tg = status_fields(ts, "Gid", 10);
	if (pu.size() != 4 || tu.size() != 4 || pg.size() != 4 || tg.size() != 4)
		return false;
	for (int i = 0; i < 3; i++)
		if (tu[size_t(i)] != pu[0] || tg[size_t(i)] != pg[0])
			return false;
	struct stat st;
	if (stat(("/proc/" + std::to_string(target)).c_str(), &st) != 0 || st.st_uid != pu[0])
		return false; // not dumpable: /proc/PID is root's
	return (tgt_prm[0] & ~peer_prm[0]) == 0;
}

} // namespace

int host::listen_register()
{
	ep_ = epoll_create1(EPOLL_CLOEXEC);
	if (ep_ < 0)
		return -errno;
	const std::string d = presence::dir();
	if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
		return -errno;
	struct sockaddr_un a = {};
	a.sun_family = AF_UNIX;
	const std::string path = d + "/" + registry::register_socket;
	if (path.size() >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	std::memcpy(a.sun_path, path.c_str(), path.size());
	listen_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (listen_ < 0)
		return -errno;
	unlink(path.c_str()); // a socket left by a daemon killed before
	// Any user registers: the socket's mode says so, whatever the umask.
	if (bind(listen_, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) != 0 ||
	    chmod(path.c_str(), 0666) != 0 || listen(listen_, 256) != 0) {
		const int err = -errno;
		close(listen_);
		listen_ = -1;
		return err;
	}
	struct epoll_event ev = {};
	ev.events = EPOLLIN;
	ev.data.u64 = tagged(tag_listen, 0);
	if (epoll_ctl(ep_, EPOLL_CTL_ADD, listen_, &ev) != 0)
		return -errno;
	return 0;
}

void host::on_register()
{
	struct epoll_event evs[64];
	const int n = epoll_wait(ep_, evs, 64, 0);
	for (int i = 0; i < n; i++) {
		const uint64_t tag = evs[i].data.u64 >> 32;
		const uint32_t v = uint32_t(evs[i].data.u64);
		if (tag == tag_listen)
			accept_all();
		else if (tag == tag_conn)
			answer(int(v));
		else if (tag == tag_pidfd)
			forget(pid_t(v));
	}
}

void host::accept_all()
{
	const uint64_t now = cli::remote::monotonic_ms();
	// Bounded per wake: a flood of connections waits in the backlog.
	for (int i = 0; i < 64; i++) {
		const int c = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			return;
		struct ucred cr = {};
		socklen_t len = sizeof(cr);
		size_t of_user = 0;
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
			for (const auto &[fd, d] : pending_)
				of_user += d.second == cr.uid;
		if (len != sizeof(cr) || of_user >= max_pending_per_uid) {
			metrics_.table_refused("share");
			close(c);
			continue;
		}
		struct epoll_event ev = {};
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.u64 = tagged(tag_conn, uint32_t(c));
		if (epoll_ctl(ep_, EPOLL_CTL_ADD, c, &ev) != 0) {
			close(c);
			continue;
		}
		pending_[c] = {now + 1000, cr.uid};
		answer(c); // the message is usually there already
	}
}

// Reads the registration on @conn (if it came), admits or refuses it,
// answers, closes.
void host::answer(int conn)
{
	auto p = pending_.find(conn);
	if (p == pending_.end())
		return;
	const uint64_t t0 = now_us();
	pid_t served = 0;
	watched w;
	const int ret = admit(conn, &served, &w);
	if (ret == -EAGAIN)
		return; // not sent yet: at the next event, or dropped at its deadline
	spent_us_[p->second.second] += double(now_us() - t0);
	const int32_t reply = ret;
	(void)send(conn, &reply, sizeof(reply), MSG_DONTWAIT | MSG_NOSIGNAL);
	epoll_ctl(ep_, EPOLL_CTL_DEL, conn, nullptr);
	close(conn);
	pending_.erase(p);
	if (ret == 0)
		install(served, w);
}

// @w (vetted) serves process @served from now.
void host::install(pid_t served, watched &w)
{
	// Another table for the same process (an exec made a new one, or a
	// guard's check offered it again): the newest is kept.
	if (procs_.count(served)) {
		watched &old = procs_[served];
		if (old.table_dev == w.table_dev && old.table_ino == w.table_ino &&
		    old.holder == w.holder) {
			close(w.table);
			close(w.pidfd);
			return; // the same, offered again
		}
		forget(served);
	}
	struct epoll_event ev = {};
	ev.events = EPOLLIN;
	ev.data.u64 = tagged(tag_pidfd, uint32_t(served));
	if (epoll_ctl(ep_, EPOLL_CTL_ADD, w.pidfd, &ev) != 0) {
		close(w.table);
		close(w.pidfd);
		return;
	}
	w.svc = service_of(served);
	procs_[served] = w;
	counted_gen_ = ~uint64_t(0); // counted under its name at the next tick
}

// Processes that published before this daemon started (or while it was
// away) hold a table no one offered it: each process's descriptors are
// looked at once, in parts of @budget_us a tick (many processes with
// many descriptors slow the start, never a tick), and a table found
// there is vetted as an offered one.
void host::scan_step(uint64_t budget_us)
{
	if (!scan_listed_) {
		scan_listed_ = true;
		if (DIR *d = opendir("/proc")) {
			while (dirent *e = readdir(d)) {
				char *end = nullptr;
				const long pid = std::strtol(e->d_name, &end, 10);
				if (pid > 0 && *end == '\0' && pid != getpid())
					to_scan_.push_back(pid_t(pid));
			}
			closedir(d);
		}
	}
	const uint64_t t0 = now_us();
	const std::string_view own_prefix = registry::memfd_link;
	const std::string foreign =
	    std::string(registry::default_dir) + "/" + registry::file_prefix;
	while (!to_scan_.empty() && now_us() - t0 < budget_us) {
		const pid_t pid = to_scan_.back();
		to_scan_.pop_back();
		(void)cli::remote::for_each_fd_link(pid, [&](const cli::remote::fd_link &l) {
			const bool own = l.target.substr(0, own_prefix.size()) == own_prefix;
			if (!own && l.target.substr(0, foreign.size()) != foreign)
				return true;
			owned_fd peer(int(syscall(SYS_pidfd_open, pid, 0)));
			owned_fd table(open(l.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
			if (peer.fd < 0 || table.fd < 0)
				return true;
			// A foreign table names its process in its header.
			char bytes[sizeof(registry::file_header)];
			registry::file_header h;
			if (pread(table.fd, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes)))
				return true;
			std::memcpy(static_cast<void *>(&h), bytes, sizeof(h));
			watched w;
			pid_t served = 0;
			if (vet(table, peer, pid, l.fd,
				own ? registry::kind_own : registry::kind_foreign,
				own ? pid : pid_t(h.pid), &served, &w) == 0)
				install(served, w);
			return true;
		});
	}
}

// The registration on @conn checked: 0 and @served, @w filled (the
// table and the pidfd then @w's), or -errno (-EAGAIN: nothing sent yet).
int host::admit(int conn, pid_t *served, watched *w)
{
	registry::registration_message m = {};
	struct iovec iov = {&m, sizeof(m)};
	alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)] = {};
	struct msghdr mh = {};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl;
	mh.msg_controllen = sizeof(ctl);
	const ssize_t n = recvmsg(conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	// Every descriptor sent is ours to close, whatever else is wrong.
	owned_fd table(fd_pass::take_fds(&mh));
	if (n != ssize_t(sizeof(m)) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || table.fd < 0 ||
	    std::memcmp(m.magic, registry::register_magic, sizeof(m.magic)) != 0 ||
	    (m.kind != registry::kind_own && m.kind != registry::kind_foreign) || m.fd < 0)
		return -EINVAL;
	struct ucred cr = {};
	socklen_t len = sizeof(cr);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.pid <= 0)
		return -EINVAL;
	// The peer's pidfd: from the kernel where it can say (6.5), else
	// opened by number and proven below (the peer holds the table).
	owned_fd peer;
	len = sizeof(peer.fd);
	if (getsockopt(conn, SOL_SOCKET, SO_PEERPIDFD, &peer.fd, &len) != 0)
		peer.fd = int(syscall(SYS_pidfd_open, cr.pid, 0));
	if (peer.fd < 0)
		return -ESRCH;
	return vet(table, peer, cr.pid, m.fd, m.kind, m.target, served, w);
}

// The checks of a table @table that process @holder (whose pidfd is
// @peer) holds at descriptor @holder_fd: an own table (@kind) serves
// @holder, a foreign one @target.  0 (the descriptors then @w's) or
// -errno.
int host::vet(owned_fd &table, owned_fd &peer, pid_t holder, int holder_fd, int kind, pid_t for_pid,
	      pid_t *served, watched *w)
{
	struct ucred cr = {};
	cr.pid = holder;
	struct {
		int fd, kind, target;
	} m = {holder_fd, kind, int(for_pid)};
	struct stat st;
	if (fstat(table.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    size_t(st.st_size) != registry::file_size)
		return -EINVAL;
	// An own table is a sealed memfd: never shrunk under a mapping.
	const int seals = fcntl(table.fd, F_GET_SEALS);
	if (m.kind == registry::kind_own &&
	    (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)))
		return -EINVAL;
	// The peer holds this very table at the number it named...
	struct stat held;
	const std::string at = "/proc/" + std::to_string(cr.pid) + "/fd/" + std::to_string(m.fd);
	if (stat(at.c_str(), &held) != 0 || held.st_dev != st.st_dev || held.st_ino != st.st_ino)
		return -EBADF;
	// ...and was alive through that check: the number named the peer.
	struct pollfd pp = {peer.fd, POLLIN, 0};
	if (poll(&pp, 1, 0) != 0)
		return -ESRCH;
	const pid_t target = m.kind == registry::kind_own ? cr.pid : pid_t(m.target);
	if (target <= 0)
		return -EINVAL;
	owned_fd other;
	if (target != cr.pid) {
		other.fd = int(syscall(SYS_pidfd_open, target, 0));
		if (other.fd < 0)
			return -ESRCH;
		// The test seam: stopped between the open of the pidfd and
		// the checks of the process it names, so that a test can give
		// the number to another process there.
		if (cli::test_fault("stop_at_vet"))
			raise(SIGSTOP);
	}
	// The start time read after the pidfd is open: the header must name
	// the process the pidfd does.
	const uint64_t start = registry::process_start_time(target);
	char bytes[sizeof(registry::file_header)];
	registry::header_info hi;
	std::string why;
	if (start == 0 || pread(table.fd, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes)) ||
	    registry::parse_header(bytes, target, start, "table", &hi, &why) != 0)
		return -EINVAL;
	if (m.kind == registry::kind_own ? hi.publisher != 0
					 : (hi.publisher != cr.pid || !may_act_for(cr.pid, target)))
		return -EPERM;
	*served = target;
	const uint64_t ns = presence::netns_of("/proc/" + std::to_string(target));
	if (ns && own_netns_ && ns != own_netns_) {
		// Counted and said once per process, however often it asks.
		if (said_.size() > 4096)
			said_.clear();
		auto [it, fresh] = said_.try_emplace(for_pid, start);
		if (fresh || it->second != start) {
			it->second = start;
			metrics_.table_refused("netns");
			fmt::print(stderr,
				   "sockbufd: pid {} ({}): skipped: in another network namespace "
				   "(sockbufd serves its own: run one there)\n",
				   for_pid, service_of(for_pid).comm);
		}
		return -EXDEV;
	}
	struct stat proc;
	if (stat(("/proc/" + std::to_string(target)).c_str(), &proc) != 0)
		return -ESRCH;
	size_t of_user = 0;
	for (const auto &[pid, o] : procs_)
		of_user += o.uid == proc.st_uid && pid != target;
	if (of_user >= max_per_uid) {
		metrics_.table_refused("share");
		return -EUSERS;
	}
	w->start = start;
	w->holder = cr.pid;
	w->holder_fd = m.fd;
	w->table_dev = uint64_t(st.st_dev);
	w->table_ino = uint64_t(st.st_ino);
	w->uid = proc.st_uid;
	w->may_force = cli::run::program_may_force(target) == 1;
	w->table = table.release();
	w->pidfd = target == cr.pid ? peer.release() : other.release();
	*served = target;
	return 0;
}

void host::forget(pid_t pid)
{
	auto it = procs_.find(pid);
	if (it == procs_.end())
		return;
	watched &w = it->second;
	if (w.pidfd >= 0) {
		epoll_ctl(ep_, EPOLL_CTL_DEL, w.pidfd, nullptr);
		close(w.pidfd);
	}
	if (w.table >= 0)
		close(w.table);
	guard_.sync_published(pid, {}); // forgets its sockets
	set_changed_ = true;
	last_line_.erase(last_line_.lower_bound({pid, INT_MIN}),
			 last_line_.upper_bound({pid, INT_MAX}));
	procs_.erase(it);
	counted_gen_ = ~uint64_t(0);
}

} // namespace sockbuf::daemon
