// SPDX-License-Identifier: MIT
#include "supervise.h"

#include "closer.h"
#include "force_rights.h"
#include "remote_guard.h"
#include "stored.h"
#include "take.h"
#include "test_fault.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <map>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <set>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace sockbuf::cli::run
{

namespace
{

#if defined(__x86_64__)
constexpr uint32_t native_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t native_arch = AUDIT_ARCH_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr uint32_t native_arch = AUDIT_ARCH_RISCV64;
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr uint32_t native_arch = AUDIT_ARCH_PPC64LE;
#elif defined(__s390x__)
constexpr uint32_t native_arch = AUDIT_ARCH_S390X;
#else
#define SOCKBUF_NO_SECCOMP_ARCH 1
constexpr uint32_t native_arch = 0;
#endif

// The low 32 bits of system call argument @i (level and optname are ints).
constexpr uint32_t arg_lo(int i)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return uint32_t(offsetof(struct seccomp_data, args) + size_t(i) * 8);
#else
	return uint32_t(offsetof(struct seccomp_data, args) + size_t(i) * 8 + 4);
#endif
}

#ifdef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
constexpr unsigned int filter_flag_wait_killable = SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
#else
constexpr unsigned int filter_flag_wait_killable = 1u << 5; // linux/seccomp.h, 5.19
#endif

// pidfd_open() of a thread rather than its thread group (linux/pidfd.h,
// 6.9; O_EXCL's value); older kernels answer EINVAL.
constexpr unsigned int pidfd_thread = O_EXCL;

int sys_seccomp(unsigned int op, unsigned int flags, void *args)
{
	return int(syscall(SYS_seccomp, op, flags, args));
}

int pidfd_open(pid_t pid)
{
	return int(syscall(SYS_pidfd_open, pid, 0));
}

int pidfd_getfd(int pidfd, int fd)
{
	return int(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

// Installs the filter in the calling process; the listener fd or -errno.
int install_filter()
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native_arch, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    // listen(): the supervisor notes the port of a sized listener
	    // (see decide_listen()); to the last instruction.
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_listen, 11, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg_lo(1)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg_lo(2)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_SNDBUF, 4, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_RCVBUF, 3, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_SNDBUFFORCE, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_RCVBUFFORCE, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
	// Once the supervisor has received a call, the caller waits for the
	// answer killably (5.19): a signal cannot make it return EINTR, which
	// setsockopt() never returns, after its size was applied.  Kernels
	// without the flag say EINVAL; the filter then goes without it.
	auto install = [&prog] {
		int fd = sys_seccomp(SECCOMP_SET_MODE_FILTER,
				     SECCOMP_FILTER_FLAG_NEW_LISTENER | filter_flag_wait_killable,
				     &prog);
		if (fd < 0 && errno == EINVAL)
			fd = sys_seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
					 &prog);
		return fd;
	};
	int fd = install();
	if (fd < 0 && errno == EACCES) {
		// Without CAP_SYS_ADMIN a filter needs no_new_privs (set-user-ID
		// programs then run without their privileges: see cmd_run.cc).
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			return -errno;
		fd = install();
	}
	return fd < 0 ? -errno : fd;
}

int send_fd(int sock, int fd)
{
	char dummy = 'L';
	struct iovec iov = {&dummy, 1};
	alignas(struct cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
	struct msghdr msg = {};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = buf;
	msg.msg_controllen = sizeof(buf);
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

// The fd sent with send_fd(), or -errno (-EPIPE: the child sent none).
int recv_fd(int sock)
{
	char dummy;
	struct iovec iov = {&dummy, 1};
	alignas(struct cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
	struct msghdr msg = {};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = buf;
	msg.msg_controllen = sizeof(buf);
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (n != 1 || !c || c->cmsg_type != SCM_RIGHTS)
		return -EPIPE;
	int fd;
	std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

// Where the configuration's log: item sends lines (no rate limit here).
class logger
{
public:
	explicit logger(const shim::config &cfg)
	{
		switch (cfg.log) {
		case shim::log_target::to_stderr:
			fd_ = dup(STDERR_FILENO);
			break;
		case shim::log_target::to_fd:
			fd_ = dup(cfg.log_fd);
			break;
		case shim::log_target::to_file:
			fd_ = open(cfg.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
			break;
		case shim::log_target::none:
			break;
		}
	}
	~logger()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	logger(const logger &) = delete;
	logger &operator=(const logger &) = delete;
	bool on() const { return fd_ >= 0; }
	void line(const std::string &s) const
	{
		if (fd_ < 0)
			return;
		std::string l = fmt::format("sockbuf-run[{}]: {}\n", getpid(), s);
		ssize_t n = write(fd_, l.data(), l.size());
		(void)n;
	}

private:
	int fd_ = -1;
};

// The thread group of thread @tid (pidfd_open wants a leader).
pid_t tgid_of(pid_t tid)
{
	std::FILE *f = std::fopen(fmt::format("/proc/{}/status", tid).c_str(), "re");
	if (!f)
		return -1;
	char line[256];
	int tgid = -1;
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	std::fclose(f);
	return tgid;
}

// 1 when descriptor @fd of thread @tid (its own table) is the file @mine
// refers to, 0 when it is another or none, -errno when neither kcmp(2) nor
// /proc could tell.
int same_file(pid_t tid, int fd, int mine)
{
	long r = syscall(SYS_kcmp, tid, getpid(), KCMP_FILE, fd, mine);
	if (r >= 0)
		return r == 0;
	if (errno == EBADF)
		return 0;
	// No CONFIG_KCMP: the inode behind the thread's own /proc entry.
	struct stat theirs, ours;
	if (stat(fmt::format("/proc/{}/fd/{}", tid, fd).c_str(), &theirs) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(mine, &ours) != 0)
		return -errno;
	return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

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

class supervisor
{
public:
	supervisor(int listener, const shim::config &cfg)
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

	// One notification: false when the listener is gone.
	bool handle_one()
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

	// How long poll() may wait before the next guard pass is due (-1:
	// no socket has a floor).
	int timeout_ms() const
	{
		if (guard_.size() == 0)
			return -1;
		const uint64_t now = remote::monotonic_ms();
		return next_pass_ <= now ? 0 : int(next_pass_ - now);
	}

	// The guard's pass when it is due: with --floor-guard it restores,
	// without it only closed sockets leave the published table.
	void tick()
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
			log_.line(
			    fmt::format("pid {} fd {} below its floor, restored:{} (floor snd {} "
					"rcv {})",
					s.pid, s.fd, what, s.floor.snd, s.floor.rcv));
		});
	}

	// Around the fork of the background copy (see supervise()).
	void hand_over() { guard_.release(); }
	void take_over() { guard_.after_fork_child(); }
	void end() { guard_.end(); }

	// The guard's totals, in one log line (at the end of the run).
	void summary() const
	{
		if (!cfg_.guard_ms || !log_.on())
			return;
		const remote::totals &t = guard_.stats();
		log_.line(fmt::format(
		    "floor guard: {} passes, {} below, {} restored, {} closed, "
		    "{} numbers reused (never written), {} accepted sockets given "
		    "their listener's floor, {} errors",
		    t.passes, t.below, t.restored, t.gone, t.reused, t.inherited, t.errors));
	}

private:
	static constexpr int continue_call = 1; // the kernel runs the call itself
	static constexpr int gone = 2;		// the call was interrupted or died

	// A pidfd of thread-group leader @pid, opened once and kept (a
	// pidfd never names a process that reused the number: a kept one
	// of an ended process fails ESRCH and is replaced).  -1 when @pid is
	// not a leader (or is gone).  At most 64 are kept: past that, those
	// of ended processes go, then all.
	int leader_pidfd(pid_t pid)
	{
		auto it = pidfds_.find(pid);
		if (it != pidfds_.end())
			return it->second;
		const int fd = pidfd_open(pid);
		if (fd < 0)
			return -1;
		if (pidfds_.size() >= 64) {
			for (auto i = pidfds_.begin(); i != pidfds_.end();) {
				struct pollfd p = {i->second, POLLIN, 0};
				if (poll(&p, 1, 0) == 1) { // readable: the process ended
					close(i->second);
					i = pidfds_.erase(i);
				} else {
					++i;
				}
			}
			if (pidfds_.size() >= 64)
				forget_all_pidfds();
		}
		pidfds_.emplace(pid, fd);
		return fd;
	}

	void forget_pidfd(pid_t pid)
	{
		auto it = pidfds_.find(pid);
		if (it == pidfds_.end())
			return;
		close(it->second);
		pidfds_.erase(it);
	}

	void forget_all_pidfds()
	{
		for (const auto &[pid, fd] : pidfds_)
			close(fd);
		pidfds_.clear();
	}

	bool still_valid(uint64_t id) const
	{
		uint64_t v = id;
		return ioctl(listener_, SECCOMP_IOCTL_NOTIF_ID_VALID, &v) == 0;
	}

	int decide(const struct seccomp_notif &req)
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

	// listen(): always run by the kernel.  A socket the supervisor sized
	// (guarded) has its local port and the connections already on it
	// remembered first (remote::guard::note_listen()), so that the
	// connections it accepts get its floor even when the program closes
	// it before a pass sees it listening (iperf3's server does).  Any
	// other socket costs one readlink() of its /proc entry, and nothing
	// when no socket is guarded.
	int decide_listen(const struct seccomp_notif &req)
	{
		if (guard_.size() == 0)
			return continue_call;
		const int fd = int(req.data.args[0]);
		const pid_t tid = pid_t(req.pid);
		// The inode behind the number in the calling thread's own
		// table, without taking it.
		char path[64], link[64];
		fmt::format_to_n(path, sizeof(path) - 1, "/proc/{}/fd/{}", tid, fd).out[0] = '\0';
		const ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			return continue_call;
		link[n] = '\0';
		unsigned long ino = 0;
		if (std::sscanf(link, "socket:[%lu]", &ino) != 1 ||
		    !guard_.find_inode(uint32_t(ino)))
			return continue_call;
		pid_t tgid = 0;
		const int sock = take(req, fd, "listen", &tgid);
		if (sock < 0)
			return -sock;
		guard_.note_listen(sock); // by its cookie: the identity rule
		// Closed here: a socket about to listen has no data to send,
		// so even a last close never lingers (no closer thread needed).
		close(sock);
		return continue_call;
	}

	// Descriptor @fd of the thread that made call @req, from that
	// thread's own descriptor table, and its thread group in @tgid: a
	// copy the caller closes, or -continue_call (the kernel runs the
	// call, named @call in the log) or -gone.
	int take(const struct seccomp_notif &req, int fd, const char *call, pid_t *tgid_out)
	{
		const pid_t tid = pid_t(req.pid);
		// The socket from the calling thread's own descriptor table: a
		// leader's pidfd reaches it; for another thread, a pidfd of the
		// thread itself (PIDFD_THREAD, 6.9), else the leader's, whose
		// table may not be the thread's (unshare(CLONE_FILES), checked
		// below) or may be gone (a leader that exited before its threads).
		pid_t tgid = tid;
		bool own_table = true;
		bool cached = true; // a leader's pidfd, kept from call to call
		int pidfd = leader_pidfd(tid);
		if (pidfd < 0) {
			cached = false;
			tgid = tgid_of(tid);
			// Test seam: SOCKBUF_RUN_FAULT=no_pidfd_thread, a kernel before 6.9.
			pidfd = test_fault("no_pidfd_thread")
				    ? -1
				    : int(syscall(SYS_pidfd_open, tid, pidfd_thread));
			if (pidfd < 0) {
				own_table = false;
				pidfd = tgid > 0 ? pidfd_open(tgid) : -1;
			}
		}
		// After reading memory and opening the pidfd, before acting: the
		// thread that asked is still waiting (not killed, its pid not
		// reused for another process).
		if (!still_valid(req.id)) {
			if (pidfd >= 0 && !cached)
				close(pidfd);
			return -gone;
		}
		if (pidfd < 0) {
			if (log_.on())
				log_.line(fmt::format("pid {} thread {}: pidfd_open: {}; its {} "
						      "goes to the kernel unchanged",
						      tgid, tid, std::strerror(errno), call));
			return -continue_call;
		}
		int sock = remote::take_socket(pidfd, tgid, fd);
		int getfd_err = errno;
		if (sock < 0 && getfd_err == ESRCH && cached) {
			// A kept pidfd of a process that has ended: the caller is a
			// new process with the same number.  A fresh pidfd, checked
			// as above.
			forget_pidfd(tid);
			pidfd = leader_pidfd(tid);
			if (!still_valid(req.id))
				return -gone;
			sock = pidfd < 0 ? -1 : remote::take_socket(pidfd, tgid, fd);
			getfd_err = errno;
		}
		if (!cached)
			close(pidfd);
		if (sock < 0) {
			if (getfd_err == EPERM || getfd_err == EACCES)
				no_access(tgid, "pidfd_getfd", getfd_err);
			else if ((getfd_err == EBADF || getfd_err == ESRCH) && !own_table &&
				 log_.on())
				log_.line(fmt::format(
				    "pid {} thread {} fd {}: not in the leader's descriptor table "
				    "(the leader exited, or the thread has a table of its own; "
				    "PIDFD_THREAD, Linux 6.9, would reach it); its {} "
				    "goes to the kernel unchanged",
				    tgid, tid, fd, call));
			return -continue_call; // EBADF and the like: the kernel says it
		}
		// A number taken from the leader's table for another thread: a
		// thread that called unshare(CLONE_FILES) has a table of its own,
		// where the number may name another socket: that one is written
		// only if it is the same file, else the kernel runs the call on
		// the thread's own descriptor.
		if (!own_table && same_file(tid, fd, sock) != 1) {
			if (log_.on())
				log_.line(fmt::format("pid {} thread {} fd {}: the thread has a "
						      "descriptor table of its own; its {} "
						      "goes to the kernel unchanged",
						      tgid, tid, fd, call));
			remote::closer::get().close_later(sock, 0);
			return -continue_call;
		}
		*tgid_out = tgid;
		return sock;
	}

	// The program's memory or descriptors are out of this process's reach
	// (ptrace-attach rights: a non-dumpable program, another user):
	// said once on standard error, and in the log for each process.
	void no_access(pid_t pid, const char *call, int err)
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

	int apply(int sock, pid_t pid, int fd, shim::dir d, int name, bool force, int asked)
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
			unsigned int flags =
			    SOCKBUF_F_FALLBACK_LOCK | (force ? SOCKBUF_F_ALLOW_FORCE : 0);
			sret =
			    sockbuf_set_initial_bufsize(sock, d == shim::dir_snd ? size : 0,
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
			const struct sockbuf_dir_report &dr =
			    d == shim::dir_snd ? rep.snd : rep.rcv;
			if (sret < 0)
				log_.line(fmt::format("pid {} fd {} setsockopt {} {}: sockbuf "
						      "error {}, left as the kernel set it",
						      pid, fd, dn, asked, sret));
			else
				log_.line(fmt::format(
				    "pid {} fd {} setsockopt {} {} -> {} {}{} floor {}", pid, fd,
				    dn, asked, sockbuf_strategy_name(dr.strategy), dr.effective,
				    dr.locked == 0 ? " unlocked"
						   : (dr.locked == 1 ? " locked" : ""),
				    dr.floor));
		}
		return 0; // what the program's setsockopt returned
	}

	int listener_;
	const shim::config &cfg_;
	logger log_;
	std::vector<unsigned char> req_, resp_;
	bool warned_eperm_ = false;
	std::map<pid_t, int> pidfds_; // leader_pidfd()'s
	std::set<pid_t> no_access_logged_;
	remote::guard guard_;
	const unsigned interval_ms_;
	uint64_t next_pass_ = 0;
	std::map<std::pair<pid_t, int>, uint64_t> last_line_; // restore lines: 1/s per socket
};

// Asks the kernel to wake the program and this process on the CPU that
// hands over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 6.6): a trapped call is
// a strict ping-pong between the two, and a wakeup on another CPU costs
// more than the work.  Older kernels refuse it (EINVAL): nothing changes.
void sync_wakeups(int listener)
{
	constexpr unsigned long notif_set_flags = _IOW('!', 4, uint64_t);
	constexpr uint64_t fd_sync_wake_up = 1;
	ioctl(listener, notif_set_flags, fd_sync_wake_up);
}

// How long the keeper holds the listener after the supervisor died while
// the program lives on.
constexpr int keeper_grace_ms = 1000;

// Moves @fd to a number of 3 or more (close-on-exec), closing the old one.
int above_stdio(int fd)
{
	if (fd > STDERR_FILENO)
		return fd;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
	close(fd);
	return moved;
}

// The keeper: a second holder of the notification listener.  A
// supervisor killed outright (SIGKILL) has its files closed before its
// children are signalled, and a listener closed with calls waiting
// answers them ENOSYS: the program would see ENOSYS in the moment before
// PR_SET_PDEATHSIG ends it.  The keeper keeps the listener open until the
// program is gone (its pidfd readable) and at most @grace_ms after the
// supervisor (a program that kept running, e.g. a set-user-ID one whose
// exec cleared its death signal, then gets ENOSYS rather than a call
// that never returns).  It holds nothing else (no standard stream stays
// open through it), and every signal but SIGKILL stays blocked, as the
// supervisor blocked them: ^C to the process group leaves it alone.
// Returns its pid, or -errno (the supervisor works without one).
pid_t start_keeper(int listener, pid_t program, int grace_ms)
{
	int prog = pidfd_open(program); // unreaped: the number is still the program's
	int sup = pidfd_open(getpid());
	if (prog < 0 || sup < 0) {
		int e = errno;
		if (prog >= 0)
			close(prog);
		if (sup >= 0)
			close(sup);
		return -e;
	}
	pid_t k = fork();
	if (k == 0) {
		prog = above_stdio(prog);
		sup = above_stdio(sup);
		int keep[3] = {above_stdio(dup(listener)), prog, sup};
		int null = open("/dev/null", O_RDWR);
		for (int fd = STDIN_FILENO; null >= 0 && fd <= STDERR_FILENO; fd++)
			dup2(null, fd);
		std::sort(std::begin(keep), std::end(keep));
		unsigned int from = STDERR_FILENO + 1;
		for (int fd : keep) {
			if (fd < 0)
				_exit(1);
			if (unsigned(fd) > from)
				syscall(SYS_close_range, from, unsigned(fd) - 1, 0);
			from = unsigned(fd) + 1;
		}
		syscall(SYS_close_range, from, ~0u, 0);
		prctl(PR_SET_NAME, "sockbuf-keeper");
		struct pollfd p[2] = {{prog, POLLIN, 0}, {sup, POLLIN, 0}};
		for (;;) {
			int n = poll(p, 2, -1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || p[0].revents)
				_exit(0);
			if (p[1].revents)
				break;
		}
		struct pollfd last = {prog, POLLIN, 0};
		while (poll(&last, 1, grace_ms) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(prog);
	close(sup);
	return k < 0 ? -errno : k;
}

// Signals passed on to the program (with SIGCHLD, which is this
// process's own, and the real-time signals): each one whose default
// action would end the supervisor.  The stop signals are left alone: a
// supervisor that did not stop on ^Z would keep the shell from taking
// the terminal back.
constexpr int forwarded_signals[] = {
    SIGTERM,   SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
    SIGPROF,   SIGIO,  SIGPWR, SIGXCPU, SIGXFSZ, SIGSYS,  SIGTRAP, SIGCHLD,
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
};

int exit_status(const siginfo_t &si)
{
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

// Serves notifications until every process under the filter is gone.
void serve_rest(supervisor &sup, int listener)
{
	for (;;) {
		struct pollfd p = {listener, POLLIN, 0};
		int n = poll(&p, 1, sup.timeout_ms());
		sup.tick();
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
			return;
		if ((p.revents & POLLIN) && !sup.handle_one())
			return;
	}
}

} // namespace

int supervisor_available(std::string *why)
{
#ifdef SOCKBUF_NO_SECCOMP_ARCH
	*why = "this architecture's seccomp audit value is not known to sockbuf";
	return -ENOSYS;
#else
	uint32_t action = SECCOMP_RET_USER_NOTIF;
	if (test_fault("notif") || sys_seccomp(SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
		int e = test_fault("notif") ? ENOSYS : errno;
		*why = fmt::format("seccomp user notification unavailable ({}; Linux 5.5 and "
				   "CONFIG_SECCOMP_FILTER)",
				   std::strerror(e));
		return -e;
	}
	int e = 0;
	if (test_fault("pidfd_getfd"))
		e = ENOSYS;
	else if (pidfd_getfd(-1, 0) < 0 && errno != EBADF)
		e = errno;
	if (e) {
		*why = fmt::format("pidfd_getfd() unavailable ({}; Linux 5.6)", std::strerror(e));
		return -e;
	}
	return 0;
#endif
}

std::string supervisor_unsupported(const shim::config &cfg)
{
	std::string out;
	auto add = [&out](const char *what) {
		if (!out.empty())
			out += ", ";
		out += what;
	};
	bool sizes = false;
	for (const auto &r : cfg.size)
		sizes |= r[0] != 0 || r[1] != 0;
	if (sizes)
		add("default sizes (default_*, ROLE.snd/rcv)");
	if (cfg.by_role[shim::role_connecting] != shim::policy::unset ||
	    cfg.by_role[shim::role_accepted] != shim::policy::unset)
		add("connecting/accepted role rules");
	if (cfg.reserve)
		add("reserve:on");
	if (cfg.exec_drop)
		add("exec:drop");
	return out;
}

int supervise(char **argv, const shim::config &cfg)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		fmt::print(stderr, "sockbuf run: socketpair: {}\n", std::strerror(errno));
		return 125;
	}
	// Signals to pass on, read through a signalfd; blocked before the fork
	// so none is lost, unblocked in the child before exec.  Every signal
	// whose default would end or stop this process and that can be
	// caught: a supervisor ended by a stray signal would leave its
	// program's buffer calls failing with ENOSYS (the filter without its
	// listener).  SIGPIPE is ignored instead (a --log pipe whose reader
	// went away: the line is lost, the program is served).
	sigset_t fwd, old;
	sigemptyset(&fwd);
	for (int s : forwarded_signals)
		sigaddset(&fwd, s);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		sigaddset(&fwd, s);
	sigprocmask(SIG_BLOCK, &fwd, &old);
	const pid_t supervisor_pid = getpid();
	pid_t child = fork();
	if (child < 0) {
		fmt::print(stderr, "sockbuf run: fork: {}\n", std::strerror(errno));
		return 125;
	}
	if (child == 0) {
		// Ends with its supervisor: without it the filter answers its
		// buffer calls with ENOSYS.  Checked after setting it, as the
		// supervisor may have died before (the child then has a new
		// parent, and no notification would ever be answered).
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor_pid)
			_exit(125);
		sigprocmask(SIG_SETMASK, &old, nullptr);
		close(sv[0]);
		int lfd = install_filter();
		if (lfd < 0) {
			fmt::print(stderr, "sockbuf run: seccomp filter: {}\n",
				   std::strerror(-lfd));
			_exit(125);
		}
		if (send_fd(sv[1], lfd) != 0)
			_exit(125);
		close(lfd);
		close(sv[1]);
		execvp(argv[0], argv);
		int e = errno;
		fmt::print(stderr, "sockbuf run: {}: {}\n", argv[0], std::strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	signal(SIGPIPE, SIG_IGN);
	close(sv[1]);
	int listener = recv_fd(sv[0]);
	close(sv[0]);
	const pid_t keeper = listener >= 0 ? start_keeper(listener, child, keeper_grace_ms) : -1;
	if (listener >= 0)
		sync_wakeups(listener);
	int sfd = signalfd(-1, &fwd, SFD_CLOEXEC);
	supervisor sup(listener >= 0 ? listener : -1, cfg);
	int status = -1;
	bool child_done = false;
	// Until the listener hangs up (no process uses the filter any more:
	// the program has exited, its SIGCHLD is on the way); polled after
	// that it would wake this loop at once, again and again.
	bool serving = listener >= 0;
	while (!child_done) {
		struct pollfd p[2] = {{sfd, POLLIN, 0}, {listener, POLLIN, 0}};
		int n = poll(p, serving ? 2 : 1, sup.timeout_ms());
		sup.tick();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (serving && (p[1].revents & POLLIN))
			sup.handle_one();
		if (serving && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)))
			serving = false;
		if (!(p[0].revents & POLLIN))
			continue;
		struct signalfd_siginfo si;
		if (read(sfd, &si, sizeof(si)) != ssize_t(sizeof(si)))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			// kill(2) and sigqueue(3) are passed on; the terminal's
			// signals reach the program's process group by themselves.
			if (si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE)
				kill(child, int(si.ssi_signo));
			continue;
		}
		siginfo_t w = {};
		if (waitid(P_PID, id_t(child), &w, WEXITED | WNOHANG) == 0 && w.si_pid == child) {
			status = exit_status(w);
			child_done = true;
		}
	}
	close(sfd);
	if (keeper > 0)
		waitpid(keeper, nullptr, WNOHANG); // else init reaps it
	sigprocmask(SIG_SETMASK, &old, nullptr);
	if (listener < 0)
		return status >= 0 ? status : 125;
	// Processes the program started may still run under the filter: serve
	// them from the background (the listener reports POLLHUP once the
	// last is gone).
	struct pollfd p = {listener, POLLIN, 0};
	if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP)) {
		pid_t bg = fork();
		if (bg > 0)
			sup.hand_over(); // the copy publishes and guards from now on
		if (bg == 0) {
			sup.take_over();
			// Whoever waits for the program's output to end must
			// not wait for this copy too; standard error stays for
			// its messages and log:stderr.
			int null = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (null >= 0) {
				dup2(null, STDIN_FILENO);
				dup2(null, STDOUT_FILENO);
				close(null);
			}
			serve_rest(sup, listener);
			sup.summary();
			sup.end();
			_exit(0);
		}
	}
	close(listener);
	sup.summary();
	return status >= 0 ? status : 125;
}

} // namespace sockbuf::cli::run
