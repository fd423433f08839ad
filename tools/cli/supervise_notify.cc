// SPDX-License-Identifier: MIT
// The notification loop: a trapped setsockopt() read from the program's
// memory, its socket taken, the shim's policy applied and the program
// answered with what its own call would have returned.
#include "supervise_parts.h"

#include "force_rights.h"
#include "stored.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

namespace sockbuf::cli::run::supervision
{

namespace
{

bool is_tcp(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) == 0 && v == IPPROTO_TCP;
}

int tcp_state(int fd)
{
	unsigned char st = 0;
	socklen_t len = sizeof(st);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &st, &len) != 0 || len < 1)
		return -1;
	return st;
}

uint16_t local_port(int fd)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&ss), &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(reinterpret_cast<const struct sockaddr_in &>(ss).sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(reinterpret_cast<const struct sockaddr_in6 &>(ss).sin6_port);
	return 0;
}

} // namespace

supervisor::supervisor(int listener, const shim::config &cfg)
    : listener_(listener), cfg_(cfg), log_(cfg),
      guard_(cfg.guard_ms != 0,
	     registry::by_shim | (cfg.guard_ms ? uint32_t(registry::by_guard) : 0u)),
      interval_ms_(cfg.guard_ms ? unsigned(cfg.guard_ms) : 1000)
{
	guard_.inherit_accepted(true);
	struct seccomp_notif_sizes sizes = {};
	if (sys_seccomp(SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
		req_.resize(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
		resp_.resize(
		    std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
	}
}

bool supervisor::handle_one()
{
	std::fill(req_.begin(), req_.end(), 0);
	auto *req = reinterpret_cast<struct seccomp_notif *>(req_.data());
	if (ioctl(listener_, SECCOMP_IOCTL_NOTIF_RECV, req) != 0)
		return errno == EINTR || errno == ENOENT; // ENOENT: the caller died
	std::fill(resp_.begin(), resp_.end(), 0);
	auto *resp = reinterpret_cast<struct seccomp_notif_resp *>(resp_.data());
	resp->id = req->id;
	int err = req->data.nr == SYS_listen ? decide_listen(*req) : decide(*req);
	if (err == continue_call) {
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	} else if (err == gone) {
		return true; // no answer: the call is no longer waiting
	} else {
		resp->error = err; // 0 or -errno: setsockopt's result
	}
	if (ioctl(listener_, SECCOMP_IOCTL_NOTIF_SEND, resp) != 0 && errno != ENOENT)
		log_.line(fmt::format("notification answer: {}", std::strerror(errno)));
	return true;
}

int supervisor::timeout_ms() const
{
	if (guard_.size() == 0)
		return -1;
	const uint64_t now = remote::monotonic_ms();
	return next_pass_ <= now ? 0 : int(next_pass_ - now);
}

void supervisor::tick()
{
	const uint64_t now = remote::monotonic_ms();
	if (guard_.size() == 0 || now < next_pass_)
		return;
	next_pass_ = now + interval_ms_;
	guard_.pass([this, now](const remote::socket_ref &s, int64_t snd, int64_t rcv,
				const struct sockbuf_report &rep) {
		uint64_t &last = last_line_[{s.pid, s.fd}];
		if (!log_.on() || (last && now < last + 1000))
			return;
		last = now;
		const std::string what = remote::restored_text(s, snd, rcv, rep);
		log_.line(fmt::format("pid {} fd {} below its floor, restored:{} (floor snd {} "
				      "rcv {})",
				      s.pid, s.fd, what, s.floor.snd, s.floor.rcv));
	});
}

void supervisor::summary() const
{
	if (!cfg_.guard_ms || !log_.on())
		return;
	const remote::totals &t = guard_.stats();
	log_.line(fmt::format("floor guard: {} passes, {} below, {} restored, {} closed, "
			      "{} numbers reused (never written), {} accepted sockets given "
			      "their listener's floor, {} errors",
			      t.passes, t.below, t.restored, t.gone, t.reused, t.inherited,
			      t.errors));
}

bool supervisor::still_valid(uint64_t id) const
{
	uint64_t v = id;
	return ioctl(listener_, SECCOMP_IOCTL_NOTIF_ID_VALID, &v) == 0;
}

int supervisor::decide(const struct seccomp_notif &req)
{
	const int fd = int(req.data.args[0]);
	const int name = int(req.data.args[2]);
	const uint64_t optval = req.data.args[3];
	// The kernel's int optlen, compared signed as the kernel does: a
	// negative length (-1, 0x80000004) is its -EINVAL, never a size
	// applied (read unsigned, it passed the check below).
	const int optlen = int(uint32_t(req.data.args[4]));
	const bool force = name == SO_SNDBUFFORCE || name == SO_RCVBUFFORCE;
	const shim::dir d =
	    name == SO_SNDBUF || name == SO_SNDBUFFORCE ? shim::dir_snd : shim::dir_rcv;
	if (optlen < int(sizeof(int)))
		return continue_call; // the kernel's -EINVAL
	int asked = 0;
	struct iovec local = {&asked, sizeof(asked)};
	// An address in the program, not in this process: copied, never
	// dereferenced here.
	void *addr = nullptr;
	static_assert(sizeof(addr) <= sizeof(optval));
	std::memcpy(&addr, &optval, sizeof(addr));
	struct iovec remote = {addr, sizeof(asked)};
	const pid_t tid = pid_t(req.pid);
	if (process_vm_readv(tid, &local, 1, &remote, 1, 0) != ssize_t(sizeof(int))) {
		if (errno == EPERM || errno == EACCES)
			no_access(tid, "process_vm_readv", errno);
		return continue_call; // the kernel's -EFAULT, or no access
	}
	pid_t tgid = 0;
	const int sock = take(req, fd, "setsockopt", &tgid);
	if (sock < 0)
		return -sock;
	int ret = apply(sock, tgid, fd, d, name, force, asked);
	// Closed here, not on a closer thread: the program is stopped in
	// this very call, so only a thread of its own closing the socket
	// meanwhile (with a linger and unsent data) could make this the
	// last close, stalling its own supervisor alone; and a trapped
	// call costs no thread wake-up (tests/shim/syscall_budget.py).
	close(sock);
	return ret;
}

void supervisor::no_access(pid_t pid, const char *call, int err)
{
	if (!warned_eperm_) {
		warned_eperm_ = true;
		fmt::print(stderr,
			   "sockbuf run: pid {}: {}: {} (needs the rights of ptrace "
			   "attach: a non-dumpable program, or one of another user); its "
			   "size requests go to the kernel unchanged\n",
			   pid, call, std::strerror(err));
	}
	if (log_.on() && no_access_logged_.insert(pid).second)
		log_.line(fmt::format("pid {}: {}: {}; its size requests go to the kernel "
				      "unchanged",
				      pid, call, std::strerror(err)));
}

int supervisor::apply(int sock, pid_t pid, int fd, shim::dir d, int name, bool force, int asked)
{
	// TCP: its protocol, and TCP_INFO answers (a raw socket of
	// protocol 6 does not), as the library itself tells.
	const int st = asked > 0 && is_tcp(sock) ? tcp_state(sock) : -1;
	if (st < 0)
		return continue_call;
	const shim::role r = st == TCP_LISTEN ? shim::role_listener : shim::role_any;
	// The local port only where a port rule could match it.
	const shim::policy p = shim::resolve(cfg_, r, cfg_.nports ? local_port(sock) : 0);
	const char *dn = d == shim::dir_snd ? "snd" : "rcv";
	if (p != shim::policy::initial) {
		if (log_.on())
			log_.line(fmt::format("pid {} fd {} setsockopt {} {} left as the "
					      "kernel sets it ({})",
					      pid, fd, dn, asked, shim::policy_name(p)));
		return continue_call;
	}
	if (force && !(cfg_.allow_force && program_may_force(pid) == 1)) {
		if (log_.on())
			log_.line(fmt::format("pid {} fd {} setsockopt {} {} FORCE left "
					      "to the kernel (force:allow not set, or "
					      "the program has no CAP_NET_ADMIN in "
					      "the initial user namespace)",
					      pid, fd, dn, asked));
		return continue_call; // checked with the program's credentials
	}
	// The program's own call first, as the shim does: its errors,
	// clamp and doubling are the kernel's.
	if (setsockopt(sock, SOL_SOCKET, name, &asked, sizeof(asked)) != 0)
		return -errno;
	const long long doubled = 2ll * asked;
	const int size = doubled > SOCKBUF_SIZE_MAX ? SOCKBUF_SIZE_MAX : int(doubled);
	struct sockbuf_report rep;
	// Stored already: only the lock bit to clear, unless this
	// kernel needs the whole call.
	int sret = stored::keep_unlocked(sock, {int(d), size, force, 0}, &rep);
	if (sret == -EOPNOTSUPP) {
		unsigned int flags = SOCKBUF_F_FALLBACK_LOCK | (force ? SOCKBUF_F_ALLOW_FORCE : 0);
		sret = sockbuf_set_initial_bufsize(sock, d == shim::dir_snd ? size : 0,
						   d == shim::dir_rcv ? size : 0, flags, &rep);
	}
	struct sockbuf_floor fl = {0, 0};
	if (sret >= 0 && sockbuf_report_floor(&rep, &fl) == 0 && (fl.snd || fl.rcv)) {
		if (guard_.size() == 0)
			next_pass_ = remote::monotonic_ms() + interval_ms_;
		int gret = guard_.add(pid, fd, sock, fl);
		if (gret == 0 && st == TCP_LISTEN)
			guard_.note_listen(sock); // sized after its listen()
		if (gret < 0 && log_.on())
			log_.line(fmt::format("pid {} fd {}: floor not published or "
					      "guarded: {}",
					      pid, fd, std::strerror(-gret)));
	}
	if (log_.on()) {
		const struct sockbuf_dir_report &dr = d == shim::dir_snd ? rep.snd : rep.rcv;
		if (sret < 0)
			log_.line(fmt::format("pid {} fd {} setsockopt {} {}: sockbuf "
					      "error {}, left as the kernel set it",
					      pid, fd, dn, asked, sret));
		else
			log_.line(fmt::format(
			    "pid {} fd {} setsockopt {} {} -> {} {}{} floor {}", pid, fd, dn, asked,
			    sockbuf_strategy_name(dr.strategy), dr.effective,
			    dr.locked == 0 ? " unlocked" : (dr.locked == 1 ? " locked" : ""),
			    dr.floor));
	}
	return 0; // what the program's setsockopt returned
}

} // namespace sockbuf::cli::run::supervision
