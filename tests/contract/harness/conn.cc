// SPDX-License-Identifier: MIT
#include "conn.h"

#include "diag.h"
#include "netns.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif

namespace sockbuf::contract
{

namespace
{

int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, level, name, &v, &len) < 0)
		return -1;
	return v;
}

int set_int(int fd, int level, int name, int v)
{
	return setsockopt(fd, level, name, &v, sizeof(v)) < 0 ? -errno : 0;
}

// setsockopt doubles: ask for half of the kernel-unit size.
int raw_set(int fd, bool snd, int size, bool force)
{
	int name =
	    snd ? (force ? SO_SNDBUFFORCE : SO_SNDBUF) : (force ? SO_RCVBUFFORCE : SO_RCVBUF);
	int ret = set_int(fd, SOL_SOCKET, name, size / 2);
	if (ret == -EPERM && force)
		ret = set_int(fd, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, size / 2);
	return ret;
}

void from_report(dir_setup *d, const sockbuf_dir_report &r)
{
	d->reported = r.effective;
	d->floor = r.floor;
	d->clamps = r.clamps;
	d->report_locked = r.locked;
	d->strategy = r.strategy;
}

void from_reserve(socket_record *rec, const sockbuf_report &rep)
{
	rec->reserved = (rep.flags & SOCKBUF_R_RESERVED) != 0;
	rec->reserve_err = rep.reserve_err;
}

// An accepted socket does not inherit its listener's reservation (and the
// library makes none on a listener): the transport reserves on each one
// it accepts, with the listener's floors, as sockbuf_set_initial_bufsize(3)
// says.  The call keeps the inherited sizes (a connected socket is never
// lowered) and only adds the reservation.
void reserve_accepted(socket_record *srv, const socket_record &lis)
{
	sockbuf_report rep = {};
	int ret =
	    sockbuf_set_initial_bufsize(srv->fd, lis.snd.floor, lis.rcv.floor,
					SOCKBUF_F_FALLBACK_DEFAULT | SOCKBUF_F_RESERVE_MEM, &rep);
	if (ret < 0) {
		srv->reserve_err = ret;
		return;
	}
	from_reserve(srv, rep);
}

// Two descriptors per connection, one per listener, and room for what
// the suite and the library hold besides: the sampler, inet_diag, four
// guards (BPF programs, maps, links, rings, timers: about 20 each with
// events), the kernel clock's programs (about 20) and the guards' pins.
// Hundreds of connections pass the usual soft limit of 1024, so the soft
// limit is raised as far as needed (never past the hard limit, which only
// privilege could raise).
int ensure_fd_room(size_t connections, std::string *what)
{
	const rlim_t need = rlim_t(connections) * 2 + arm_count + 256;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		*what = fmt::format("{} connections need {} descriptors; RLIMIT_NOFILE allows {}",
				    connections, need, rl.rlim_max);
		return -EMFILE;
	}
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		*what = "setrlimit(RLIMIT_NOFILE)";
		return -errno;
	}
	return 0;
}

int make_socket()
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

sockaddr_in addr_of(const char *ip, uint16_t port)
{
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

void fill_inode(socket_record *rec)
{
	int64_t ino = diag::socket_inode(rec->fd);
	rec->inode = ino > 0 ? uint32_t(ino) : 0;
}

} // namespace

connection_set::~connection_set()
{
	close_all();
}

void connection_set::close_all()
{
	for (auto &s : sockets)
		if (s.fd >= 0) {
			close(s.fd);
			s.fd = -1;
		}
}

int apply_arm(arm a, int fd, const arm_sizes &sz, socket_record *rec, const setup_hooks &hooks)
{
	rec->a = a;
	if (a != arm::untouched) {
		rec->snd.requested = sz.snd;
		rec->rcv.requested = sz.rcv;
	}
	int ret = 0;
	unsigned flags = sz.force ? SOCKBUF_F_ALLOW_FORCE : 0;
	sockbuf_report rep = {};
	switch (a) {
	case arm::untouched:
		break;
	case arm::raw_unlock:
		ret = raw_set(fd, true, sz.snd, sz.force);
		if (ret == 0)
			ret = raw_set(fd, false, sz.rcv, sz.force);
		if (ret == 0)
			ret = set_int(fd, SOL_SOCKET, SO_BUF_LOCK, 0);
		// Before 5.15 the kernel has no way to unlock: the raw recipe
		// leaves the socket locked, which C1 raw reports, and the run
		// goes on so that every other clause is judged.
		if (ret == -ENOPROTOOPT)
			ret = 0;
		break;
	case arm::raw_locked:
		ret = raw_set(fd, true, sz.snd, sz.force);
		if (ret == 0)
			ret = raw_set(fd, false, sz.rcv, sz.force);
		break;
	case arm::lib_initial:
		// FALLBACK_DEFAULT: where the kernel offers no unlocked way (send
		// before 5.15) keep its size rather than lock; C1 then shows it.
		ret = sockbuf_set_initial_bufsize(fd, sz.snd, sz.rcv,
						  flags | SOCKBUF_F_FALLBACK_DEFAULT, &rep);
		if (ret == 0) {
			from_report(&rec->snd, rep.snd);
			from_report(&rec->rcv, rep.rcv);
		}
		break;
	case arm::lib_reserve:
		ret = sockbuf_set_initial_bufsize(
		    fd, sz.snd, sz.rcv, flags | SOCKBUF_F_FALLBACK_DEFAULT | SOCKBUF_F_RESERVE_MEM,
		    &rep);
		if (ret == 0) {
			from_report(&rec->snd, rep.snd);
			from_report(&rec->rcv, rep.rcv);
			from_reserve(rec, rep);
		}
		break;
	case arm::lib_locked:
		ret = sockbuf_lock_bufsize(fd, sz.snd, sz.rcv, flags & SOCKBUF_F_ALLOW_FORCE, &rep);
		if (ret == 0) {
			from_report(&rec->snd, rep.snd);
			from_report(&rec->rcv, rep.rcv);
		}
		break;
	}
	rec->setup_err = ret;
	if (hooks.after_call)
		hooks.after_call(*rec);
	rec->snd.after_call = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	rec->rcv.after_call = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	rec->lock_after_call = get_int(fd, SOL_SOCKET, SO_BUF_LOCK);
	// The floor an application would hold this socket to.
	switch (a) {
	case arm::untouched:
		rec->snd.floor = rec->rcv.floor = 0;
		break;
	case arm::raw_unlock:
		rec->snd.floor = std::min(sz.snd, rec->snd.after_call);
		rec->rcv.floor = std::min(sz.rcv, rec->rcv.after_call);
		break;
	case arm::lib_initial:
	case arm::lib_reserve:
		break; // from the report
	case arm::raw_locked:
	case arm::lib_locked:
		// Locked: the size itself must hold, in both directions.
		rec->snd.floor = rec->snd.after_call;
		rec->rcv.floor = rec->rcv.after_call;
		break;
	}
	return ret;
}

void read_wscale(socket_record *rec)
{
	struct tcp_info ti = {};
	socklen_t len = sizeof(ti);
	if (getsockopt(rec->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return;
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		rec->snd_wscale = ti.tcpi_snd_wscale;
		rec->rcv_wscale = ti.tcpi_rcv_wscale;
	} else {
		rec->snd_wscale = rec->rcv_wscale = 0;
	}
}

int open_connections(const std::string &scenario, const std::vector<arm> &arms, const arm_sizes &sz,
		     connection_set *out, std::string *what, const setup_hooks &hooks)
{
	int room = ensure_fd_room(arms.size(), what);
	if (room < 0)
		return room;
	size_t listener_of[arm_count];
	uint16_t port_of[arm_count] = {};
	std::fill(std::begin(listener_of), std::end(listener_of), SIZE_MAX);
	for (arm a : arms) {
		int ai = int(a);
		if (listener_of[ai] != SIZE_MAX)
			continue;
		int fd = make_socket();
		if (fd < 0) {
			*what = "listener socket";
			return fd;
		}
		socket_record rec;
		rec.fd = fd;
		rec.r = role::listener;
		rec.name = fmt::format("{}/{}/listener", scenario, arm_name(a));
		int ret = apply_arm(a, fd, sz, &rec, hooks);
		listener_of[ai] = out->sockets.size();
		out->sockets.push_back(rec);
		if (ret < 0) {
			*what = fmt::format("{} listener setup", arm_name(a));
			return ret;
		}
		if (hooks.before_handshake)
			hooks.before_handshake(rec);
		sockaddr_in sa = addr_of(server_addr, 0);
		if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0 ||
		    listen(fd, 4096) < 0) {
			*what = "bind/listen";
			return -errno;
		}
		socklen_t alen = sizeof(sa);
		getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &alen);
		port_of[ai] = ntohs(sa.sin_port);
		fill_inode(&out->sockets.back());
	}
	for (size_t i = 0; i < arms.size(); i++) {
		arm a = arms[i];
		const socket_record lis =
		    out->sockets[listener_of[int(a)]]; // copy: the vector grows
		socket_record cli;
		cli.fd = make_socket();
		if (cli.fd < 0) {
			*what = "client socket";
			return cli.fd;
		}
		cli.r = role::client;
		cli.conn = int(i);
		cli.name = fmt::format("{}/{}/c{}/client", scenario, arm_name(a), i);
		int ret = apply_arm(a, cli.fd, sz, &cli, hooks);
		size_t ci = out->sockets.size();
		out->sockets.push_back(cli);
		if (ret < 0) {
			*what = fmt::format("{} client setup", arm_name(a));
			return ret;
		}
		if (hooks.before_handshake)
			hooks.before_handshake(cli);
		sockaddr_in from = addr_of(client_addr, 0);
		sockaddr_in to = addr_of(server_addr, port_of[int(a)]);
		if (bind(cli.fd, reinterpret_cast<sockaddr *>(&from), sizeof(from)) < 0 ||
		    connect(cli.fd, reinterpret_cast<sockaddr *>(&to), sizeof(to)) < 0) {
			*what = "connect";
			return -errno;
		}
		int sfd = accept4(lis.fd, nullptr, nullptr, SOCK_CLOEXEC);
		if (sfd < 0) {
			*what = "accept";
			return -errno;
		}
		socket_record srv;
		srv.fd = sfd;
		srv.a = a;
		srv.r = role::server;
		srv.conn = int(i);
		srv.name = fmt::format("{}/{}/c{}/server", scenario, arm_name(a), i);
		// Accepted: its setup is the listener's.
		srv.snd = lis.snd;
		srv.rcv = lis.rcv;
		srv.lock_after_call = lis.lock_after_call;
		srv.accept_sndbuf = get_int(sfd, SOL_SOCKET, SO_SNDBUF);
		srv.accept_rcvbuf = get_int(sfd, SOL_SOCKET, SO_RCVBUF);
		srv.accept_lock = get_int(sfd, SOL_SOCKET, SO_BUF_LOCK);
		srv.listener_sndbuf = get_int(lis.fd, SOL_SOCKET, SO_SNDBUF);
		srv.listener_rcvbuf = get_int(lis.fd, SOL_SOCKET, SO_RCVBUF);
		srv.listener_lock = get_int(lis.fd, SOL_SOCKET, SO_BUF_LOCK);
		if (a == arm::lib_reserve)
			reserve_accepted(&srv, lis);
		out->sockets.push_back(srv);
		out->conns.push_back({a, ci, out->sockets.size() - 1});
		fill_inode(&out->sockets[ci]);
		fill_inode(&out->sockets.back());
		read_wscale(&out->sockets[ci]);
		read_wscale(&out->sockets.back());
	}
	return 0;
}

void take_snapshots(connection_set *set, bool after)
{
	std::vector<diag::socket_info> dump;
	diag::filter f;
	f.family = AF_INET;
	f.tcp_info = false;
	diag::dump(&dump, f);
	for (auto &s : set->sockets) {
		if (s.fd < 0)
			continue;
		auto &snap = after ? s.after : s.before;
		snap.gs_snd = get_int(s.fd, SOL_SOCKET, SO_SNDBUF);
		snap.gs_rcv = get_int(s.fd, SOL_SOCKET, SO_RCVBUF);
		snap.gs_lock = get_int(s.fd, SOL_SOCKET, SO_BUF_LOCK);
		for (const auto &d : dump)
			if (d.inode == s.inode) {
				snap.diag_snd = d.sndbuf;
				snap.diag_rcv = d.rcvbuf;
			}
		sockbuf_state st = {};
		if (sockbuf_get_state(s.fd, &st) == 0) {
			snap.lib_snd = st.sndbuf;
			snap.lib_rcv = st.rcvbuf;
			snap.lib_lock = st.lock;
		}
		snap.taken = true;
	}
}

} // namespace sockbuf::contract
