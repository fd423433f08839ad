// SPDX-License-Identifier: MIT
#include "engine.h"

#include "fdtable.h"
#include "floor_registry.h"
#include "log.h"
#include "real.h"
#include "stored.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace sockbuf::shim
{

namespace
{

engine_state g_state;
std::atomic<bool> g_active{false};

// The socket inode each fd's floors were last published under, so that a
// closed socket's floors leave the registry when its fd number is reused.
std::atomic<uint64_t> g_published[fd_table_size];

// Publishes @e's floors for `sockbuf show` (impl/internal/floor_registry.h); both
// 0 withdraws them.
void publish_floors(int fd, fd_state *e)
{
	struct stat st;
	if (fd < 0 || fd >= fd_table_size || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
		return;
	const uint64_t inode = uint64_t(st.st_ino);
	const uint64_t old = g_published[fd].exchange(inode, std::memory_order_relaxed);
	if (old && old != inode) {
		registry::withdraw(old, registry::by_shim);
		registry::withdraw(old, registry::by_listener);
	}
	const bool inherited = e->flags.load(std::memory_order_relaxed) & flag_inherited;
	registry::withdraw(inode, inherited ? registry::by_shim : registry::by_listener);
	const int err = registry::publish(inode, e->floor[dir_snd].load(std::memory_order_relaxed),
					  e->floor[dir_rcv].load(std::memory_order_relaxed),
					  inherited ? registry::by_listener : registry::by_shim);
	e->flags.fetch_or(flag_published, std::memory_order_relaxed);
	// Said once: the floors hold (the shim's guard keeps them), only
	// `sockbuf show` and sockbufd cannot see them.
	static std::atomic<bool> said{false};
	if (err < 0 && err != -ECANCELED && log::enabled() && !said.exchange(true)) {
		log::line l;
		l.s("floor table: not published (errno ")
		    .i(-err)
		    .s("): floors kept, not seen by sockbuf show or sockbufd");
		l.emit();
	}
}

// Keeps the program's errno across the shim's own calls.
class errno_keeper
{
public:
	errno_keeper() : saved_(errno) {}
	~errno_keeper() { errno = saved_; }

private:
	int saved_;
};

int option_for(dir d, bool force)
{
	if (d == dir_snd)
		return force ? SO_SNDBUFFORCE : SO_SNDBUF;
	return force ? SO_RCVBUFFORCE : SO_RCVBUF;
}

// setsockopt's unit to the kernel's: doubled, kept within the library's range.
int stored_unit(int value)
{
	long long doubled = 2ll * value;
	return doubled > SOCKBUF_SIZE_MAX ? SOCKBUF_SIZE_MAX : int(doubled);
}

const char *dir_name(dir d)
{
	return d == dir_snd ? "snd" : "rcv";
}

// TCP state from the first byte of tcp_info, or -1 for anything not TCP.
int tcp_state(int fd)
{
	unsigned char st = 0;
	socklen_t len = sizeof(st);
	if (real::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &st, &len) != 0 || len < 1)
		return -1;
	return st;
}

// TCP: its protocol, and TCP_INFO answers (a raw socket of protocol 6 does
// not).  Asked once per socket: the entry keeps the answer (flag_tcp).
bool is_tcp(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return real::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) == 0 && v == IPPROTO_TCP &&
	       tcp_state(fd) >= 0;
}

uint16_t port_of(const struct sockaddr_storage &ss)
{
	if (ss.ss_family == AF_INET)
		return ntohs(reinterpret_cast<const struct sockaddr_in &>(ss).sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(reinterpret_cast<const struct sockaddr_in6 &>(ss).sin6_port);
	return 0;
}

uint16_t local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	std::memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&ss), &len) != 0)
		return 0;
	return port_of(ss);
}

// The port in a connect() address.  The pointer comes from the program and
// has not been checked by the kernel yet: copy it with process_vm_readv,
// which fails cleanly on a bad address instead of faulting in the shim.
uint16_t remote_port(const struct sockaddr *addr, socklen_t len)
{
	if (!addr || len < sizeof(struct sockaddr_in))
		return 0;
	struct sockaddr_storage ss;
	std::memset(&ss, 0, sizeof(ss));
	size_t n = len < sizeof(ss) ? len : sizeof(ss);
	struct iovec local = {&ss, n};
	struct iovec remote = {const_cast<struct sockaddr *>(addr), n};
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(n))
		return 0;
	return port_of(ss);
}

unsigned int initial_flags(bool force)
{
	// Never worse than libc: where the kernel cannot keep a buffer
	// unlocked, lock it at the size the program asked for.
	unsigned int f = SOCKBUF_F_FALLBACK_LOCK;
	if (force && g_state.force_ok)
		f |= SOCKBUF_F_ALLOW_FORCE;
	return f;
}

void log_result(int fd, const char *what, dir d, int asked, const struct sockbuf_report *rep,
		int ret)
{
	if (!log::enabled())
		return;
	const struct sockbuf_dir_report &r = d == dir_snd ? rep->snd : rep->rcv;
	log::line l;
	l.s("fd ").i(fd).s(" ").s(what).s(" ").s(dir_name(d)).s(" ").i(asked);
	if (ret < 0)
		l.s(": sockbuf error ").i(ret).s(", left as the kernel set it");
	else
		l.s(" -> ")
		    .s(sockbuf_strategy_name(r.strategy))
		    .s(" ")
		    .i(r.effective)
		    .s(r.locked == 0 ? " unlocked" : (r.locked == 1 ? " locked" : ""))
		    .s(" floor ")
		    .i(r.floor);
	l.emit();
}

// Sets an unlocked initial size in one direction and remembers the floor.
int apply_initial(int fd, fd_state *e, dir d, int size, bool force, const char *what, int asked)
{
	struct sockbuf_report rep;
	int ret = sockbuf_set_initial_bufsize(fd, d == dir_snd ? size : 0, d == dir_rcv ? size : 0,
					      initial_flags(force), &rep);
	if (ret == -EPROTOTYPE)
		return ret; // not TCP: the kernel's behaviour stands, silently
	log_result(fd, what, d, asked, &rep, ret);
	if (ret == 0 && e) {
		const struct sockbuf_dir_report &r = d == dir_snd ? rep.snd : rep.rcv;
		e->floor[d].store(r.floor, std::memory_order_relaxed);
		e->flags.fetch_and(uint8_t(~flag_inherited), std::memory_order_relaxed);
		publish_floors(fd, e);
		if (r.locked == 0)
			e->flags.fetch_or(flag_initial(d), std::memory_order_relaxed);
	}
	return ret;
}

void apply_lock(int fd, fd_state *e, dir d, int size, bool force, const char *what)
{
	struct sockbuf_report rep;
	unsigned int flags = force && g_state.force_ok ? SOCKBUF_F_ALLOW_FORCE : 0;
	int ret =
	    sockbuf_lock_bufsize(fd, d == dir_snd ? size : 0, d == dir_rcv ? size : 0, flags, &rep);
	log_result(fd, what, d, size, &rep, ret);
	if (e) {
		e->floor[d].store(0, std::memory_order_relaxed);
		e->flags.fetch_and(uint8_t(~flag_inherited), std::memory_order_relaxed);
		publish_floors(fd, e);
		e->flags.fetch_and(uint8_t(~flag_initial(d)), std::memory_order_relaxed);
	}
}

// An accepted socket starts with its listener's sizes and lock bits (the
// kernel copies them): each direction the program did not size on it
// (none was configured for accepted sockets) takes the listener's floor
// too, so that the floor guard keeps it and `sockbuf show` lists it, "from
// its listener".
void inherit_floors(int fd, fd_state *e, int lfd, const fd_state *le)
{
	int got[2] = {0, 0};
	bool own = false; // a direction sized for accepted sockets by the configuration
	for (int i = 0; i < 2; i++) {
		const int lf = le->floor[i].load(std::memory_order_relaxed);
		if (e->floor[i].load(std::memory_order_relaxed) > 0) {
			own = true;
			continue;
		}
		if (lf <= 0)
			continue;
		e->floor[i].store(lf, std::memory_order_relaxed);
		const uint8_t lflags = le->flags.load(std::memory_order_relaxed);
		e->flags.fetch_or(uint8_t(lflags & flag_initial(dir(i))),
				  std::memory_order_relaxed);
		got[i] = lf;
	}
	if (!got[dir_snd] && !got[dir_rcv])
		return;
	// Said "from its listener" only when no direction is the shim's own.
	if (!own)
		e->flags.fetch_or(flag_inherited, std::memory_order_relaxed);
	publish_floors(fd, e);
	if (!log::enabled())
		return;
	log::line l;
	l.s("accepted fd ")
	    .i(fd)
	    .s(": floor snd ")
	    .i(got[dir_snd])
	    .s(" rcv ")
	    .i(got[dir_rcv])
	    .s(" from its listener fd ")
	    .i(lfd);
	l.emit();
}

// reserve:on: SO_RESERVE_MEM for the socket's floor (2 x send + receive +
// 64 KiB, the library's amount),
// through sockbuf_restore_floor(), which also raises a buffer found below
// it.  Connecting and accepted sockets only: a listener's reservation would
// not pass to the sockets it accepts, so each accepted one gets its own.
void reserve_floor(int fd, const char *what, int snd, int rcv)
{
	if (!g_state.cfg.reserve || snd + rcv <= 0)
		return;
	const struct sockbuf_floor f = {snd, rcv};
	struct sockbuf_report rep;
	int ret = sockbuf_restore_floor(fd, &f, initial_flags(false) | SOCKBUF_F_RESERVE_MEM, &rep);
	if (!log::enabled())
		return;
	log::line l;
	l.s("fd ").i(fd).s(" ").s(what).s(" reserve for floor ").i(snd).s("/").i(rcv);
	if (ret < 0)
		l.s(": sockbuf error ").i(ret);
	else if (rep.flags & SOCKBUF_R_RESERVED)
		l.s(" -> reserved");
	else
		l.s(" -> not reserved: error ")
		    .i(rep.reserve_err)
		    .s(" (")
		    .s(sockbuf_reserve_state_name(g_state.reserve_state))
		    .s(")");
	l.emit();
}

// A request (or none) meets the policy that holds once the socket's role
// and port are known, before the handshake fixes the window scale.
void reconcile(int fd, fd_state *e, role r, uint16_t port)
{
	const policy p = resolve(g_state.cfg, r, port);
	for (int i = 0; i < 2; i++) {
		const dir d = dir(i);
		const int asked = e->requested[d].load(std::memory_order_relaxed);
		const uint8_t flags = e->flags.load(std::memory_order_relaxed);
		const bool force = flags & flag_force(d);
		const bool is_initial = flags & flag_initial(d);
		if (asked > 0) {
			if (p == policy::initial && !is_initial && (!force || g_state.force_ok)) {
				apply_initial(fd, e, d, stored_unit(asked), force, role_name(r),
					      asked);
			} else if (p != policy::initial && is_initial) {
				// Back to what libc would have left: the
				// program's own call, which locks.
				real::setsockopt(fd, SOL_SOCKET, option_for(d, force), &asked,
						 sizeof(asked));
				e->floor[d].store(0, std::memory_order_relaxed);
				publish_floors(fd, e);
				e->flags.fetch_and(uint8_t(~flag_initial(d)),
						   std::memory_order_relaxed);
				if (log::enabled())
					log::line()
					    .s("fd ")
					    .i(fd)
					    .s(" ")
					    .s(role_name(r))
					    .s(" ")
					    .s(dir_name(d))
					    .s(" ")
					    .i(asked)
					    .s(" -> ")
					    .s(policy_name(p))
					    .s(": the program's own request, locked")
					    .emit();
			}
			continue;
		}
		const int size = default_size(g_state.cfg, r, d);
		if (size == 0 || asked != 0)
			continue;
		if (p == policy::initial)
			apply_initial(fd, e, d, size, true, "default", size);
		else if (p == policy::lock)
			apply_lock(fd, e, d, size, true, "default");
	}
}

// listen() and connect(): the last moment before a handshake.
void before_handshake(int fd, role r, uint16_t port)
{
	fd_state *e = fd_slot(fd);
	if (!e || tcp_state(fd) != TCP_CLOSE)
		return; // not TCP, or listening/connected already
	uint64_t cookie = fd_cookie(fd);
	if (!cookie)
		return;
	fd_claim(e, cookie);
	e->role.store(r, std::memory_order_relaxed);
	e->port.store(port, std::memory_order_relaxed);
	reconcile(fd, e, r, port);
	if (r == role_connecting)
		reserve_floor(fd, role_name(r), e->floor[dir_snd].load(std::memory_order_relaxed),
			      e->floor[dir_rcv].load(std::memory_order_relaxed));
}

bool buffer_option(int level, int name, dir *d, bool *force)
{
	if (level != SOL_SOCKET)
		return false;
	switch (name) {
	case SO_SNDBUF:
	case SO_SNDBUFFORCE:
		*d = dir_snd;
		break;
	case SO_RCVBUF:
	case SO_RCVBUFFORCE:
		*d = dir_rcv;
		break;
	default:
		return false;
	}
	*force = name == SO_SNDBUFFORCE || name == SO_RCVBUFFORCE;
	return true;
}

} // namespace

void engine_install(const engine_state &s)
{
	g_state = s;
	g_active.store(s.active, std::memory_order_release);
}

void republish_floors()
{
	if (!g_active.load(std::memory_order_acquire))
		return;
	const int high = fd_high_water();
	for (int fd = 0; fd < high; fd++) {
		fd_state *e = fd_slot(fd);
		if (!e || (e->floor[dir_snd].load(std::memory_order_relaxed) <= 0 &&
			   e->floor[dir_rcv].load(std::memory_order_relaxed) <= 0))
			continue;
		if (fd_owned(e, fd_cookie(fd)))
			publish_floors(fd, e);
	}
}

int on_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	dir d;
	bool force;
	// The program's own call first: every error, clamp and doubling is
	// exactly libc's, and the value is known to be readable afterwards.
	int ret = real::setsockopt(fd, level, name, val, len);
	if (ret != 0 || !buffer_option(level, name, &d, &force) ||
	    !g_active.load(std::memory_order_acquire))
		return ret;
	errno_keeper keep;
	int asked;
	std::memcpy(&asked, val, sizeof(asked)); // the kernel read >= sizeof(int)

	// The entry speaks for this socket only while its cookie matches:
	// read where a role, a cached fact or a floor to keep needs it.
	fd_state *e = fd_slot(fd);
	uint64_t cookie = e && g_state.socket_events ? fd_cookie(fd) : 0;
	role r = role_any;
	uint16_t port = 0;
	if (e && fd_owned(e, cookie)) {
		r = role(e->role.load(std::memory_order_relaxed));
		port = e->port.load(std::memory_order_relaxed);
	}
	const policy p = resolve(g_state.cfg, r, port);
	const bool convert = p == policy::initial && asked > 0 && (!force || g_state.force_ok);
	if (e && convert && !cookie)
		cookie = fd_cookie(fd);
	const bool owned = e != nullptr && fd_owned(e, cookie);
	const uint8_t was = owned ? e->flags.load(std::memory_order_relaxed) : 0;

	bool converted = false;
	int floor = 0;
	if (convert) {
		if (!(was & flag_tcp) && !is_tcp(fd))
			return ret; // UDP, UNIX...: nothing to keep unlocked
		const int size = stored_unit(asked);
		// The same request on the same socket has the same floor: not
		// read back again unless a log line reports the size.
		int known = 0;
		if (owned && !force && (was & flag_initial(d)) && !log::enabled() &&
		    e->requested[d].load(std::memory_order_relaxed) == asked)
			known = e->floor[d].load(std::memory_order_relaxed);
		struct sockbuf_report rep;
		int sret = stored::keep_unlocked(fd, {int(d), size, force, known}, &rep);
		if (sret == -EOPNOTSUPP) // this kernel needs the whole call
			sret = sockbuf_set_initial_bufsize(fd, d == dir_snd ? size : 0,
							   d == dir_rcv ? size : 0,
							   initial_flags(force), &rep);
		if (sret == -EPROTOTYPE)
			return ret;
		log_result(
		    fd, name == SO_SNDBUF || name == SO_RCVBUF ? "setsockopt" : "setsockopt FORCE",
		    d, asked, &rep, sret);
		if (sret == 0) {
			const struct sockbuf_dir_report &dr = d == dir_snd ? rep.snd : rep.rcv;
			converted = dr.locked == 0;
			floor = dr.floor;
		}
	} else if (log::enabled()) {
		log::line()
		    .s("fd ")
		    .i(fd)
		    .s(" setsockopt ")
		    .s(dir_name(d))
		    .s(" ")
		    .i(asked)
		    .s(force && p == policy::initial
			   ? " FORCE left locked (force:allow not set or no "
			     "CAP_NET_ADMIN)"
			   : " left as the kernel set it (")
		    .s(force && p == policy::initial ? "" : policy_name(p))
		    .s(force && p == policy::initial ? "" : ")")
		    .emit();
	}
	if (!e || !cookie || !(converted || g_state.socket_events))
		return ret;
	fd_claim(e, cookie);
	// The program sized the socket itself: its floors are no longer all
	// its listener's.
	const uint8_t keep_bits = uint8_t(~(flag_force(d) | flag_initial(d) | flag_inherited));
	const uint8_t now = uint8_t((was & keep_bits) | (force ? flag_force(d) : 0) |
				    (converted ? flag_initial(d) | flag_tcp : 0));
	const int old_floor = e->floor[d].load(std::memory_order_relaxed);
	e->requested[d].store(asked, std::memory_order_relaxed);
	e->floor[d].store(converted ? floor : 0, std::memory_order_relaxed);
	e->flags.store(now, std::memory_order_relaxed);
	// The registry already holds this socket's floors when nothing
	// changed (the common repeat): no fstat, no write.
	const bool unchanged = owned && (was & flag_published) && !((was ^ now) & flag_inherited) &&
			       old_floor == (converted ? floor : 0);
	if (!unchanged)
		publish_floors(fd, e);
	return ret;
}

int on_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int ret = real::getsockopt(fd, level, name, val, len);
	dir d;
	bool force;
	if (ret != 0 || name == SO_SNDBUFFORCE || name == SO_RCVBUFFORCE ||
	    !buffer_option(level, name, &d, &force) || !g_active.load(std::memory_order_acquire))
		return ret;
	fd_state *e = fd_slot(fd);
	if (!e || *len < sizeof(int))
		return ret;
	const int floor = e->floor[d].load(std::memory_order_relaxed);
	int now;
	std::memcpy(&now, val, sizeof(now));
	if (floor <= 0 || now >= floor)
		return ret; // the common case: no extra system call
	errno_keeper keep;
	if (!fd_owned(e, fd_cookie(fd)))
		return ret; // a different socket under a reused fd number
	// The kernel shrank a buffer below the size the program was promised
	// (send-side moderation under memory pressure): raise it back,
	// unlocked, and report the size as it now is.
	struct sockbuf_floor f = {d == dir_snd ? floor : 0, d == dir_rcv ? floor : 0};
	struct sockbuf_report rep;
	int rret = sockbuf_restore_floor(fd, &f, initial_flags(false), &rep);
	if (log::enabled())
		log::line()
		    .s("fd ")
		    .i(fd)
		    .s(" ")
		    .s(dir_name(d))
		    .s(" fell to ")
		    .i(now)
		    .s(" below floor ")
		    .i(floor)
		    .s(rret == 0 ? ": restored" : ": restore failed")
		    .emit();
	if (rret == 0)
		ret = real::getsockopt(fd, level, name, val, len);
	return ret;
}

int on_listen(int fd, int backlog)
{
	if (g_active.load(std::memory_order_acquire) && g_state.socket_events) {
		errno_keeper keep;
		before_handshake(fd, role_listener, local_port(fd));
	}
	return real::listen(fd, backlog);
}

int on_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (g_active.load(std::memory_order_acquire) && g_state.socket_events) {
		errno_keeper keep;
		uint16_t port = g_state.cfg.nports > 0 ? remote_port(addr, len) : 0;
		before_handshake(fd, role_connecting, port);
	}
	return real::connect(fd, addr, len);
}

int on_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags, bool four)
{
	int nfd = four ? real::accept4(fd, addr, len, flags) : real::accept(fd, addr, len);
	if (nfd < 0 || !g_active.load(std::memory_order_acquire))
		return nfd;
	// A listener with a floor passes it on: two atomic loads decide,
	// so that a server without floors pays nothing here.
	fd_state *le = fd_slot(fd);
	const bool listener_floor = le && (le->floor[dir_snd].load(std::memory_order_relaxed) > 0 ||
					   le->floor[dir_rcv].load(std::memory_order_relaxed) > 0);
	if (!g_state.socket_events && !listener_floor)
		return nfd;
	fd_state *e = fd_slot(nfd);
	if (!e)
		return nfd;
	errno_keeper keep;
	uint64_t cookie = fd_cookie(nfd);
	if (!cookie)
		return nfd;
	// The accepted socket inherited its listener's sizes and lock bits;
	// only sizes configured for accepted sockets change it, after the
	// handshake (the window scale is already fixed).
	const uint16_t port = local_port(nfd);
	fd_claim(e, cookie);
	e->role.store(role_accepted, std::memory_order_relaxed);
	e->port.store(port, std::memory_order_relaxed);
	const policy p = resolve(g_state.cfg, role_accepted, port);
	for (int i = 0; i < 2; i++) {
		const int size = g_state.cfg.size[role_accepted][i];
		if (size == 0)
			continue;
		if (p == policy::initial)
			apply_initial(nfd, e, dir(i), size, true, "accepted", size);
		else if (p == policy::lock)
			apply_lock(nfd, e, dir(i), size, true, "accepted");
	}
	const bool listener_known = listener_floor && fd_owned(le, fd_cookie(fd));
	if (listener_known)
		inherit_floors(nfd, e, fd, le);
	if (g_state.cfg.reserve) {
		// Per direction: the floor set on this socket (just now, or
		// inherited from its listener).
		int floor[2] = {0, 0};
		for (int i = 0; i < 2; i++)
			floor[i] = e->floor[i].load(std::memory_order_relaxed);
		reserve_floor(nfd, "accepted", floor[dir_snd], floor[dir_rcv]);
	}
	return nfd;
}

} // namespace sockbuf::shim
