// SPDX-License-Identifier: MIT
#include "host.h"

#include "daemon_presence.h"
#include "floor_read.h"
#include "force_rights.h"
#include "read_file.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
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

uint64_t now_us()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
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

host::host(const options &o, metrics &m)
    : opt_(o), metrics_(m), guard_(true, 0), own_netns_(presence::netns_of("/proc/self"))
{
	// FORCE only where the process could when it registered and can now
	// (an exec into a program with more rights keeps its pid).
	guard_.force_for([this](pid_t pid) {
		auto it = procs_.find(pid);
		return it != procs_.end() && it->second.may_force &&
		       cli::run::program_may_force(pid) == 1;
	});
	if (o.events)
		ev_err_ = ev_.open();
	metrics_.events_up(ev_err_ == 0);
	reg_err_ = listen_register();
}

host::~host()
{
	for (auto &[pid, w] : procs_) {
		if (w.table >= 0)
			close(w.table);
		if (w.pidfd >= 0)
			close(w.pidfd);
	}
	for (auto &[fd, d] : pending_)
		close(fd);
	if (listen_ >= 0) {
		const std::string path = presence::dir() + "/" + registry::register_socket;
		close(listen_);
		unlink(path.c_str());
	}
	if (ep_ >= 0)
		close(ep_);
}

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
	const size_t own_len = std::strlen(registry::memfd_link);
	const std::string foreign =
	    std::string(registry::default_dir) + "/" + registry::file_prefix;
	while (!to_scan_.empty() && now_us() - t0 < budget_us) {
		const pid_t pid = to_scan_.back();
		to_scan_.pop_back();
		const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
		DIR *d = opendir(fds.c_str());
		if (!d)
			continue;
		while (dirent *e = readdir(d)) {
			if (e->d_name[0] == '.')
				continue;
			const std::string link = fds + "/" + e->d_name;
			char target[160];
			const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			const bool own = size_t(n) >= own_len &&
					 std::memcmp(target, registry::memfd_link, own_len) == 0;
			if (!own && std::strncmp(target, foreign.c_str(), foreign.size()) != 0)
				continue;
			owned_fd peer(int(syscall(SYS_pidfd_open, pid, 0)));
			owned_fd table(open(link.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
			if (peer.fd < 0 || table.fd < 0)
				continue;
			// A foreign table names its process in its header.
			char bytes[sizeof(registry::file_header)];
			registry::file_header h;
			if (pread(table.fd, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes)))
				continue;
			std::memcpy(static_cast<void *>(&h), bytes, sizeof(h));
			watched w;
			pid_t served = 0;
			const int fdn = std::atoi(e->d_name);
			if (vet(table, peer, pid, fdn,
				own ? registry::kind_own : registry::kind_foreign,
				own ? pid : pid_t(h.pid), &served, &w) == 0)
				install(served, w);
		}
		closedir(d);
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
	owned_fd table;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (table.fd < 0)
				table.fd = fd;
			else
				close(fd);
		}
	}
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

// Whether the table's holder still has it where it said (an exec closes
// it: close-on-exec).
bool host::holds_table(const watched &w) const
{
	struct stat st;
	const std::string at =
	    "/proc/" + std::to_string(w.holder) + "/fd/" + std::to_string(w.holder_fd);
	return stat(at.c_str(), &st) == 0 && uint64_t(st.st_dev) == w.table_dev &&
	       uint64_t(st.st_ino) == w.table_ino;
}

void host::refuse(pid_t pid, watched &w, const char *reason, const std::string &why)
{
	guard_.sync_published(pid, {});
	set_changed_ = true;
	if (w.refused == why)
		return; // counted and said when it first failed so
	w.refused = why;
	metrics_.table_refused(reason);
	if (skipped_lines_.allow(cli::remote::monotonic_ms()))
		fmt::print(stderr, "sockbufd: pid {} ({}): skipped: {}\n", pid, w.svc.comm,
			   clean(why));
}

// Whether @w's table is to be read whole now: its header's count moved
// (and it was not read within --reread ms), or the net is due.
bool host::due(pid_t pid, watched &w, uint64_t now_ms)
{
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	if (!w.read || net_due)
		return true;
	// The header alone, from the descriptor held: no open, no name.
	char bytes[sizeof(registry::file_header)];
	registry::header_info hi;
	std::string why;
	if (pread(w.table, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes)) ||
	    registry::parse_header(bytes, pid, w.start, "table", &hi, &why) != 0)
		return true; // read whole: refused there, with the reason
	if (hi.changes == w.changes && hi.changes != 0)
		return false; // unchanged (0: a writer that never counts)
	return now_ms >= w.last_read_ms + opt_.reread_ms;
}

void host::refresh(pid_t pid, watched &w, uint64_t now_ms)
{
	const std::string proc = "/proc/" + std::to_string(pid);
	// The test seam: stopped before a process's first read, so that a
	// test can end it and give its number to another process there.
	if (!w.read && cli::test_fault("stop_before_read"))
		raise(SIGSTOP);
	w.read = true;
	w.last_read_ms = now_ms;
	// Its table still held where it was (an exec closed it: a new image
	// registers its own), checked by number while the pidfd shows the
	// process alive: the number was the process's.  Its sockets are
	// found by number too, and taken through that pidfd alone.
	struct pollfd alive = {w.pidfd, POLLIN, 0};
	if (!holds_table(w) || poll(&alive, 1, 0) != 0) {
		forget(pid);
		return;
	}
	const uint64_t ns = presence::netns_of(proc);
	if (ns && own_netns_ && ns != own_netns_) {
		refuse(pid, w, "netns",
		       "in another network namespace (sockbufd serves its own: run one there)");
		return;
	}
	// Per-service cost: what reading this process's table and finding
	// its sockets took (a process that rewrites its table all the time
	// shows here, and is read at most every --reread ms).
	const uint64_t t0 = now_us();
	struct cost_guard {
		host *h;
		const watched *w;
		uint64_t t0;
		~cost_guard() { h->metrics_.table_cost(w->svc, double(now_us() - t0) / 1e6); }
	} cost{this, &w, t0};
	registry::table t;
	std::string why;
	const int ret = registry::read_fd(w.table, pid, w.start,
					  "the table of pid " + std::to_string(pid), &t, &why);
	if (ret < 0) {
		refuse(pid, w, ret == -ESTALE ? "stale" : "contents", why);
		return;
	}
	metrics_.table_read();
	w.changes = t.changes;
	w.refused.clear();
	std::map<uint32_t, struct sockbuf_floor> floors;
	for (const registry::entry &e : t.entries)
		if (e.inode <= UINT32_MAX && (e.snd > 0 || e.rcv > 0))
			floors[uint32_t(e.inode)] = {e.snd, e.rcv};
	guard_.sync_published(pid, floors, w.pidfd);
	set_changed_ = true;
}

// The tables due, read within this tick's budget: the user that used
// the least of the daemon's time lately first, within a user the process
// read longest ago.  The rest wait for a later tick, counted, each
// process named once.
void host::share_out(uint64_t now_ms)
{
	// What each user used, halved every second.
	if (spent_at_ms_ && now_ms > spent_at_ms_) {
		const double keep = std::exp2(-double(now_ms - spent_at_ms_) / 1000.0);
		for (auto it = spent_us_.begin(); it != spent_us_.end();) {
			it->second *= keep;
			it = it->second < 1 ? spent_us_.erase(it) : std::next(it);
		}
	}
	spent_at_ms_ = now_ms;
	std::vector<std::pair<pid_t, watched *>> todo;
	for (auto &[pid, w] : procs_)
		if (due(pid, w, now_ms))
			todo.emplace_back(pid, &w);
	std::sort(todo.begin(), todo.end(), [this](const auto &a, const auto &b) {
		const double sa = spent_us_.count(a.second->uid) ? spent_us_[a.second->uid] : 0;
		const double sb = spent_us_.count(b.second->uid) ? spent_us_[b.second->uid] : 0;
		if (sa != sb)
			return sa < sb;
		return a.second->last_read_ms < b.second->last_read_ms;
	});
	// A quarter of the interval for reading tables, at least 5 ms: the
	// pass that restores runs after it, every tick.
	const uint64_t budget_us = std::max<uint64_t>(5000, uint64_t(opt_.interval_ms) * 250);
	const uint64_t t0 = now_us();
	std::vector<pid_t> gone;
	for (auto &[pid, w] : todo) {
		const uint64_t used = now_us() - t0;
		if (used >= budget_us && w->read) {
			w->deferred++;
			metrics_.table_refused("share");
			if (!w->over_share) {
				w->over_share = true;
				fmt::print(
				    stderr,
				    "sockbufd: pid {} ({}) of uid {}: its table is read later: "
				    "its user is over its share of the daemon's time\n",
				    pid, w->svc.comm, w->uid);
			}
			continue;
		}
		const uid_t uid = w->uid;
		const uint64_t t1 = now_us();
		refresh(pid, *w, now_ms); // may forget it: w is not used after
		spent_us_[uid] += double(now_us() - t1);
	}
}

void host::restored(const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
		    const struct sockbuf_report &rep)
{
	auto it = procs_.find(s.pid);
	const service svc = it == procs_.end() ? service{} : it->second.svc;
	const int64_t before[2] = {snd, rcv};
	const int floor[2] = {s.floor.snd, s.floor.rcv};
	const struct sockbuf_dir_report *r[2] = {&rep.snd, &rep.rcv};
	double dips = 0, raised = 0, short_of = 0;
	for (int i = 0; i < 2; i++) {
		if (!floor[i] || before[i] < 0 || before[i] >= floor[i])
			continue;
		dips++;
		// Short of the floor is a refusal (the process's own limit), not
		// a restore as well.
		if (r[i]->effective < floor[i])
			short_of++;
		else if (r[i]->strategy != SOCKBUF_STRAT_HELD &&
			 r[i]->strategy != SOCKBUF_STRAT_DEFAULT &&
			 r[i]->strategy != SOCKBUF_STRAT_NONE)
			raised++;
	}
	metrics_.dips(svc, dips);
	if (raised)
		metrics_.restores(svc, "daemon", posted_now_ ? "event" : "pass", raised);
	if (raised && posted_now_) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		const int64_t now = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
		metrics_.below_floor(svc, double(std::max<int64_t>(0, now - int64_t(posted_now_))) /
					      1e9);
	}
	if (short_of)
		metrics_.refusals(svc, "limit", short_of);
	const uint64_t now = cli::remote::monotonic_ms();
	uint64_t &last = last_line_[{s.pid, s.fd}];
	if (now < last + 1000)
		return;
	last = now;
	lines_window(now);
	if (lines_now_ >= max_lines_per_s) {
		lines_held_++;
		return;
	}
	lines_now_++;
	fmt::print(stderr, "sockbufd: pid {} ({}) fd {}: restored{}{}\n", s.pid, svc.comm, s.fd,
		   cli::remote::restored_text(s, snd, rcv, rep),
		   short_of ? " (short of the floor: the process's own limit)" : "");
}

void host::lines_window(uint64_t now_ms)
{
	if (now_ms < lines_from_ + 1000)
		return;
	if (lines_held_)
		fmt::print(stderr,
			   "sockbufd: {} more restores in the last second not logged (at most "
			   "{} lines a second; the metrics count every one)\n",
			   lines_held_, max_lines_per_s);
	lines_from_ = now_ms;
	lines_now_ = 0;
	lines_held_ = 0;
}

void host::tick(uint64_t now_ms)
{
	lines_window(now_ms);
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	// Registrations that never sent their message go at their deadline.
	for (auto it = pending_.begin(); it != pending_.end();) {
		if (now_ms < it->second.first) {
			++it;
			continue;
		}
		epoll_ctl(ep_, EPOLL_CTL_DEL, it->first, nullptr);
		close(it->first);
		it = pending_.erase(it);
	}
	if (!scan_listed_ || !to_scan_.empty())
		scan_step(std::max<uint64_t>(5000, uint64_t(opt_.interval_ms) * 250));
	share_out(now_ms);
	for (const std::string &said : guard_.take_notes())
		fmt::print(stderr, "sockbufd: {}\n",
			   said); // pids, numbers and the cgroup mount's paths
	if (net_due) {
		next_net_ms_ = now_ms + opt_.net_ms;
		force_all_ = false;
		guard_.forget_reach(); // the floors tried again, once a net interval
		set_changed_ = true;   // and the event map's floors with them
	}
	if (ev_err_ != 0) {
		full_pass(); // polling
	} else {
		// Events: a pass for sockets new to the set (cut before they
		// were watched), at most every --interval, and the net's.
		if (net_due || (set_changed_ && now_ms >= next_pass_ms_)) {
			sync_watch();
			full_pass();
			next_pass_ms_ = now_ms + opt_.interval_ms;
		}
		// Marks that could not be cleared post nothing: looked at here.
		std::vector<uint32_t> again;
		again.swap(unclear_);
		for (const uint32_t ino : again) {
			auto w = watched_.find(ino);
			if (w != watched_.end() &&
			    ev_.clear(ino, w->second.first, w->second.second) < 0)
				unclear_.push_back(ino);
			guard_.restore_inode(ino,
					     [this](const cli::remote::socket_ref &s, int64_t snd,
						    int64_t rcv, const struct sockbuf_report &rep) {
						     restored(s, snd, rcv, rep);
					     });
		}
	}
	// Counted again only when the set moved: a walk over every guarded
	// socket at each tick was most of an idle daemon's CPU with events.
	if (guard_.generation() != counted_gen_ || procs_.size() != counted_procs_) {
		counted_gen_ = guard_.generation();
		counted_procs_ = procs_.size();
		std::map<std::pair<std::string, std::string>, double> by_service;
		for (const auto &[pid, n] : guard_.sockets_by_process()) {
			auto it = procs_.find(pid);
			if (it != procs_.end())
				by_service[{it->second.svc.comm, it->second.svc.unit}] += double(n);
		}
		metrics_.guarded(by_service);
		metrics_.processes(double(procs_.size()));
	}
}

void host::full_pass()
{
	const uint64_t t0 = cli::remote::monotonic_ms();
	const auto errors_before = guard_.stats().errors;
	guard_.pass([this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			   const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); });
	if (guard_.stats().errors > errors_before)
		metrics_.refusals({}, "error", double(guard_.stats().errors - errors_before));
	metrics_.pass(double(cli::remote::monotonic_ms() - t0) / 1000.0);
	if (ev_err_ == 0)
		sync_watch(); // the pass may have dropped closed sockets
}

void host::sync_watch()
{
	set_changed_ = false;
	std::map<uint32_t, std::pair<int, int>> now;
	// What a restore would raise to (the owner's reach where its limits
	// keep it short): a map floor above it would post a record at every
	// send and ACK that no restore can answer.
	for (const cli::remote::socket_ref &s : guard_.sockets()) {
		auto &f = now[s.inode];
		f.first = std::max(f.first, s.floor.snd ? s.want_snd() : 0);
		f.second = std::max(f.second, s.floor.rcv ? s.want_rcv() : 0);
	}
	for (auto it = watched_.begin(); it != watched_.end();) {
		if (now.count(it->first)) {
			++it;
			continue;
		}
		ev_.unwatch(it->first);
		it = watched_.erase(it);
	}
	for (const auto &[ino, f] : now) {
		auto it = watched_.find(ino);
		if (it != watched_.end() && it->second == f)
			continue;
		// Not in the map (full: -E2BIG, or no memory): the passes still
		// keep it, at the net's interval.
		if (ev_.watch(ino, f.first, f.second) == 0)
			watched_[ino] = f;
	}
}

void host::on_records()
{
	inos_.clear();
	posted_ns_.clear();
	if (ev_.drain(&inos_, &posted_ns_) < 0 && inos_.empty())
		return;
	const uint64_t lost = ev_.lost();
	const uint64_t lost_now = lost - lost_seen_;
	lost_seen_ = lost;
	metrics_.records(double(inos_.size()), double(lost_now));
	metrics_.event_wait_max(double(ev_.max_wait_ns()) / 1e9);
	const auto cb = [this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			       const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); };
	for (size_t i = 0; i < inos_.size(); i++) {
		const uint32_t ino = inos_[i];
		auto w = watched_.find(ino);
		if (w == watched_.end()) {
			ev_.unwatch(ino); // no longer the daemon's
			continue;
		}
		// The mark first, then the restore: a cut between the two posts
		// again (a harmless second look), where the other order would
		// leave a socket cut after the restore with no record at all.
		if (ev_.clear(ino, w->second.first, w->second.second) < 0)
			unclear_.push_back(ino);
		posted_now_ = i < posted_ns_.size() ? posted_ns_[i] : 0;
		const uint64_t errors = guard_.stats().errors;
		const bool guarded = guard_.restore_inode(ino, cb);
		posted_now_ = 0;
		const cli::remote::socket_ref *s = guarded ? guard_.find_inode(ino) : nullptr;
		if (!s || guard_.stats().errors != errors) {
			// Gone, or its restore failed (EPERM from pidfd_getfd and
			// the like): out of the map, so that it cannot post at every
			// send; passes look at it, and the next change of the set
			// puts it back.
			ev_.unwatch(ino);
			watched_.erase(w);
			continue;
		}
		// Restored short of its floor (the owner's limits): the map holds
		// what it can reach, not the floor it cannot.
		const std::pair<int, int> want = {s->floor.snd ? s->want_snd() : 0,
						  s->floor.rcv ? s->want_rcv() : 0};
		if (want != w->second && ev_.watch(ino, want.first, want.second) == 0)
			w->second = want;
	}
	if (lost_now)
		full_pass(); // a record had no room: look at everything
}

} // namespace sockbuf::daemon
