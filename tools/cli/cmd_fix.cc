// SPDX-License-Identifier: MIT
// sockbuf fix PID [--policy initial] [--floor SIZE [--guard]] [--dry-run]: repair a
// running process whose TCP sockets are locked.  Each socket is taken
// with pidfd_getfd() (the rights of ptrace attach) and its locked
// direction is unlocked at its current size, listeners included, so that
// the connections they accept from now on start unlocked with a full
// window scale.  What the handshake fixed (an established connection's
// window scale) cannot change: the report says which connections keep a
// small one.  With --guard it stays, guarding the floors from outside
// (remote_guard.h) until the process ends or SIGINT/SIGTERM.
#include "commands.h"

#include "closer.h"
#include "remote_guard.h"
#include "show_collect.h"
#include "take.h"
#include "test_fault.h"

#include <sockbuf/format.hpp>
#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::cli
{

namespace
{

int fix_usage(std::FILE *to, int status)
{
	fmt::print(to,
		   "usage: sockbuf fix PID... [--policy initial] [--floor SIZE [--guard]] "
		   "[--dry-run]\n"
		   "\n"
		   "Unlocks the locked buffers of the TCP sockets of each PID at their current\n"
		   "size, so that autotuning grows them again; listeners too, so that the\n"
		   "connections they accept from now on start unlocked with a full window\n"
		   "scale.  --floor SIZE (K, M, G: powers of 1024; the unit getsockopt\n"
		   "returns) also raises every buffer below SIZE to SIZE, unlocked, once.\n"
		   "--guard (with --floor) then stays in the foreground and keeps those\n"
		   "sockets at SIZE: every 10 ms it reads their sizes (inet_diag) and\n"
		   "restores any found below, taking the socket with pidfd_getfd() only\n"
		   "for the restore and only after checking it is still the same socket\n"
		   "(SO_COOKIE); no copy of a socket is kept open.  One line per restore\n"
		   "(at most one a second per socket), a summary when PID exits or on\n"
		   "SIGINT/SIGTERM.  Sockets PID opens later are not guarded.  While it\n"
		   "runs, 'sockbuf show PID' sees the floors.\n"
		   "Each change says the size the kernel set, read back, and names the\n"
		   "clamp when it set less (net.core.[rw]mem_max: more needs SO_*BUFFORCE\n"
		   "and CAP_NET_ADMIN, which fix does not use); --guard keeps such a floor\n"
		   "at that reach.  --guard takes one PID.\n"
		   "--dry-run says what would change and changes nothing.  Needs the rights\n"
		   "of ptrace attach on PID (same user, or CAP_SYS_PTRACE).  An established\n"
		   "connection keeps the window scale of its handshake: those whose scale\n"
		   "caps the window below net.ipv4.tcp_rmem's maximum are named.\n"
		   "\n"
		   "Exit status: 0 done, 1 error (no such process, no rights), 2 usage,\n"
		   "3 some socket could not be changed (with --guard: or guarded, or a\n"
		   "restore failed).\n");
	return status;
}

int bad_arg(const std::string &why)
{
	fmt::print(stderr, "sockbuf fix: {} (sockbuf fix --help)\n", why);
	return 2;
}

// "256K" -> 262144; -1 when malformed or outside 1 .. SOCKBUF_SIZE_MAX;
// "1G" (one byte above it) is taken as SOCKBUF_SIZE_MAX.
long long parse_size(const char *s)
{
	char *end = nullptr;
	errno = 0;
	long long v = std::strtoll(s, &end, 10);
	if (end == s || errno || v <= 0)
		return -1;
	long long mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ll << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ll << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1ll << 30;
	if (mul > 1)
		end++;
	if (*end)
		return -1;
	if (v == 1 && mul == 1ll << 30)
		return SOCKBUF_SIZE_MAX;
	if (v > SOCKBUF_SIZE_MAX / mul)
		return -1;
	return v * mul;
}

std::string describe(const show::shown_socket &s)
{
	return fmt::format("fd {} {} {} -> {}", s.fd, diag::state_name(s.info.state),
			   s.info.local.str(), s.info.remote.str());
}

struct outcome {
	int changed = 0, unchanged = 0, failed = 0;
};

// The program's descriptor @s.fd, taken through @pidfd, if it still names
// the socket the listing found there (its inode): the number is the
// program's, and between the listing and this it can close it and
// another socket can take it.  -errno, or -ESTALE for another socket
// (said on standard output with @what it was for).
int take_listed(int pidfd, const show::shown_socket &s, const char *what)
{
	int dup = remote::take_socket(pidfd, s.pid, s.fd);
	if (dup < 0)
		return -errno;
	const std::string lost = remote::class_note();
	if (!lost.empty())
		fmt::print("{}: net_cls classid and net_prio index now this command's, not "
			   "the owner's ({})\n",
			   describe(s), lost);
	const int64_t ino = diag::socket_inode(dup);
	if (ino != int64_t(s.info.inode)) {
		remote::closer::get().close_later(dup, 0);
		fmt::print("{} {}: fd {} names another {} now (inode {}, listed {}); not written\n",
			   what, describe(s), s.fd, ino < 0 ? "file" : "socket", ino, s.info.inode);
		return -ESTALE;
	}
	return dup;
}

// What the kernel allows a process without CAP_NET_ADMIN to set in
// direction @snd (the stored unit: twice net.core.[rw]mem_max), -1 unknown.
int setbuf_max(const show::net_limits &l, bool snd)
{
	return snd ? l.sndbuf_max : l.rcvbuf_max;
}

// Why a direction ends below what was asked: the clamp named as
// sockbufd and `sockbuf demo` name it ([mem_max] ...), with the sysctl and
// what lifting it needs.  "" when it got what was asked.
std::string clamp_text(bool snd, long long asked, long long got, uint32_t clamps,
		       const show::net_limits &l)
{
	if (got >= asked)
		return {};
	const char *sysctl = snd ? "net.core.wmem_max" : "net.core.rmem_max";
	if (clamps & SOCKBUF_CLAMP_MEM_MAX)
		return fmt::format(" ({} asked: [{}] {} {} caps it at {}; more needs {} "
				   "with CAP_NET_ADMIN, which fix does not use)",
				   asked, detail::clamp_words(SOCKBUF_CLAMP_MEM_MAX), sysctl,
				   setbuf_max(l, snd) / 2, got,
				   snd ? "SO_SNDBUFFORCE" : "SO_RCVBUFFORCE");
	return fmt::format(" ({} asked{})", asked,
			   clamps ? fmt::format(": [{}]", detail::clamp_words(clamps)) : "");
}

// The size a request of @asked in direction @snd would get (dry run).
long long predicted(bool snd, long long asked, const show::net_limits &l, uint32_t *clamps)
{
	const int max = setbuf_max(l, snd);
	*clamps = 0;
	if (max > 0 && asked > max) {
		*clamps = SOCKBUF_CLAMP_MEM_MAX;
		return max;
	}
	return asked;
}

// One socket: unlock locked directions at their size, raise to the floor.
// Says what the kernel set (read back through the duplicate), not what
// was asked.
void fix_one(int pidfd, const show::shown_socket &s, long long floor, bool dry,
	     const show::net_limits &limits, outcome *out)
{
	// A direction already at the most the process can set (a floor above
	// net.core.[rw]mem_max) is not raised again.
	uint32_t ignored = 0;
	const long long reach_snd = floor ? predicted(true, floor, limits, &ignored) : 0;
	const long long reach_rcv = floor ? predicted(false, floor, limits, &ignored) : 0;
	const int want_snd = reach_snd > s.info.sndbuf ? int(floor) : 0;
	const int want_rcv = reach_rcv > s.info.rcvbuf ? int(floor) : 0;
	const bool snd = (s.lock & SOCKBUF_SND) || want_snd;
	const bool rcv = (s.lock & SOCKBUF_RCV) || want_rcv;
	if (!snd && !rcv) {
		out->unchanged++;
		return;
	}
	const int snd_size = want_snd ? want_snd : int(s.info.sndbuf);
	const int rcv_size = want_rcv ? want_rcv : int(s.info.rcvbuf);
	const auto dir_text = [&](bool is_snd, long long before, bool locked, long long asked,
				  long long got, uint32_t clamps, int lock_after) {
		return fmt::format(" {} {}{} -> {} {}{}", is_snd ? "snd" : "rcv", before,
				   locked ? " locked" : "", got,
				   lock_after < 0 ? "lock unknown"
				   : lock_after	  ? "locked"
						  : "unlocked",
				   clamp_text(is_snd, asked, got, clamps, limits));
	};
	if (dry) {
		std::string plan;
		uint32_t cl = 0;
		if (snd) {
			const long long got = predicted(true, snd_size, limits, &cl);
			plan += dir_text(true, s.info.sndbuf, s.lock & SOCKBUF_SND, snd_size, got,
					 cl, 0);
		}
		if (rcv) {
			const long long got = predicted(false, rcv_size, limits, &cl);
			plan += dir_text(false, s.info.rcvbuf, s.lock & SOCKBUF_RCV, rcv_size, got,
					 cl, 0);
		}
		fmt::print("would change {}:{}\n", describe(s), plan);
		out->changed++;
		return;
	}
	const int dup = take_listed(pidfd, s, "not changed");
	if (dup < 0) {
		if (dup != -ESTALE)
			fmt::print("could not change {}: pidfd_getfd: {}\n", describe(s),
				   std::strerror(-dup));
		out->failed++;
		return;
	}
	struct sockbuf_report rep;
	int ret = sockbuf_set_initial_bufsize(dup, snd ? snd_size : 0, rcv ? rcv_size : 0, 0, &rep);
	int lock = -1, got_snd = -1, got_rcv = -1;
	socklen_t len = sizeof(lock);
	if (getsockopt(dup, SOL_SOCKET, SO_BUF_LOCK, &lock, &len) != 0)
		lock = -1;
	len = sizeof(got_snd);
	if (getsockopt(dup, SOL_SOCKET, SO_SNDBUF, &got_snd, &len) != 0)
		got_snd = -1;
	len = sizeof(got_rcv);
	if (getsockopt(dup, SOL_SOCKET, SO_RCVBUF, &got_rcv, &len) != 0)
		got_rcv = -1;
	remote::closer::get().close_later(dup, 0);
	std::string done;
	if (snd)
		done +=
		    dir_text(true, s.info.sndbuf, s.lock & SOCKBUF_SND, snd_size, got_snd,
			     ret == 0 ? rep.snd.clamps : 0, lock < 0 ? -1 : (lock & SOCKBUF_SND));
	if (rcv)
		done +=
		    dir_text(false, s.info.rcvbuf, s.lock & SOCKBUF_RCV, rcv_size, got_rcv,
			     ret == 0 ? rep.rcv.clamps : 0, lock < 0 ? -1 : (lock & SOCKBUF_RCV));
	if (ret < 0 || lock < 0 || (snd && (lock & SOCKBUF_SND)) || (rcv && (lock & SOCKBUF_RCV))) {
		fmt::print("could not change {}:{}: {}\n", describe(s), done,
			   ret < 0 ? std::string(std::strerror(-ret))
				   : fmt::format("still locked ({})", lock));
		out->failed++;
		return;
	}
	fmt::print("changed {}:{}\n", describe(s), done);
	out->changed++;
}

constexpr int guard_interval_ms = 10;

// "1 socket", "2 sockets".
std::string count(uint64_t n, const char *one, const char *many)
{
	return fmt::format("{} {}", n, n == 1 ? one : many);
}

// Adds every socket taken to @g with @floor.
int guard_add_all(remote::guard *g, int pid, int pidfd, const show::collection &c,
		  const struct sockbuf_floor &floor)
{
	int failed = 0;
	for (const auto &s : c.sockets) {
		if (s.lock < 0)
			continue;
		const int dup = take_listed(pidfd, s, "not guarded");
		if (dup == -ESTALE) {
			failed++;
			continue;
		}
		int ret = dup < 0 ? dup : g->add(pid, s.fd, dup, floor);
		if (dup >= 0)
			remote::closer::get().close_later(dup, 0);
		if (ret < 0) {
			fmt::print("not guarded {}: {}\n", describe(s), std::strerror(-ret));
			failed++;
		}
	}
	return failed;
}

// --guard: passes until the process ends or SIGINT/SIGTERM.
int guard_loop(remote::guard *g, int pid, int pidfd)
{
	sigset_t stop, old;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, &old);
	const int sfd = signalfd(-1, &stop, SFD_CLOEXEC);
	fmt::print("guarding {} of {} every {} ms (SIGINT or SIGTERM ends)\n",
		   count(g->size(), "socket", "sockets"), pid, guard_interval_ms);
	std::fflush(stdout);
	std::map<int, uint64_t> last_line; // fd -> ms of its last restore line
	std::string why = "the process exited";
	uint64_t next = remote::monotonic_ms() + guard_interval_ms;
	for (;;) {
		struct pollfd p[2] = {{pidfd, POLLIN, 0}, {sfd, POLLIN, 0}};
		const uint64_t now = remote::monotonic_ms();
		const int wait = next > now ? int(next - now) : 0;
		const int n = poll(p, sfd >= 0 ? 2 : 1, wait);
		if (n < 0 && errno != EINTR) {
			why = fmt::format("poll: {}", std::strerror(errno));
			break;
		}
		if (n > 0 && (p[0].revents & POLLIN))
			break;
		if (n > 0 && sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == ssize_t(sizeof(si)))
				why = si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
			break;
		}
		if (remote::monotonic_ms() < next)
			continue;
		next = remote::monotonic_ms() + guard_interval_ms;
		g->pass([&last_line](const remote::socket_ref &s, int64_t snd, int64_t rcv,
				     const struct sockbuf_report &rep) {
			// A write that raised nothing is not a restore to tell of.
			const bool rose = (snd >= 0 && rep.snd.effective > snd) ||
					  (rcv >= 0 && rep.rcv.effective > rcv);
			if (!rose)
				return;
			const uint64_t t = remote::monotonic_ms();
			uint64_t &last = last_line[s.fd];
			if (last && t < last + 1000)
				return;
			last = t;
			const std::string what = remote::restored_text(s, snd, rcv, rep);
			fmt::print("restored fd {}:{} (floor snd {} rcv {})\n", s.fd, what,
				   s.floor.snd, s.floor.rcv);
			std::fflush(stdout);
		});
	}
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, nullptr);
	const remote::totals &t = g->stats();
	fmt::print("guard ended ({}): {}, {} below the floor, {} restored, {} closed, "
		   "{} reused (never written), {}\n",
		   why, count(t.passes, "pass", "passes"), t.below, t.restored, t.gone,
		   count(t.reused, "number", "numbers"), count(t.errors, "error", "errors"));
	return t.errors ? 3 : 0;
}

// The floor a guard can keep in each direction for a process that sets
// its own sizes without CAP_NET_ADMIN: @floor, or the most
// net.core.[rw]mem_max lets it set (said once here, not at every pass).
struct sockbuf_floor reachable_floor(int pid, long long floor, const show::net_limits &l)
{
	struct sockbuf_floor f = {int(floor), int(floor)};
	std::string said;
	for (bool snd : {true, false}) {
		const int max = setbuf_max(l, snd);
		int &dir = snd ? f.snd : f.rcv;
		if (max > 0 && dir > max) {
			said += fmt::format(
			    "{} {} at {} ({} {})", said.empty() ? "" : ",", snd ? "snd" : "rcv",
			    max, snd ? "net.core.wmem_max" : "net.core.rmem_max", max / 2);
			dir = max;
		}
	}
	if (!said.empty())
		fmt::print("floor {} is above what process {} can set without CAP_NET_ADMIN: "
			   "kept at its reach,{}\n",
			   floor, pid, said);
	return f;
}

// One process: 0, 1 (not there, no rights) or 3 (some socket not changed).
int fix_pid(int pid, long long floor, bool dry, bool guard)
{
	int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
	if (pidfd < 0) {
		int e = errno;
		fmt::print(stderr, "sockbuf fix: {}: {}\n", pid,
			   e == ESRCH ? std::string("no such process")
				      : fmt::format("pidfd_open: {}", std::strerror(e)));
		return 1;
	}
	show::collection c;
	std::string why;
	int ret = show::collect_pid(pid, &c, &why);
	if (ret < 0) {
		fmt::print(stderr, "sockbuf fix: {}{}\n", why,
			   (ret == -EACCES || ret == -EPERM) &&
				   why.find("ptrace") == std::string::npos
			       ? " (needs the rights of ptrace attach on the process: its user, "
				 "or CAP_SYS_PTRACE)"
			       : "");
		close(pidfd);
		return 1;
	}
	// A socket whose lock bits could not be read could not be taken.
	for (const auto &s : c.sockets)
		if (s.lock < 0 &&
		    s.lock_note.find("Operation not permitted") != std::string::npos) {
			fmt::print(stderr, "sockbuf fix: {}: {}; nothing changed\n", pid,
				   s.lock_note);
			close(pidfd);
			return 1;
		}
	// The test seam: SOCKBUF_RUN_FAULT=fix_hold_after_listing holds the
	// run between the listing and the writes (a line on standard input
	// lets it go), so that a test can re-point a listed number there.
	if (test_fault("fix_hold_after_listing")) {
		fmt::print(stderr, "listed\n");
		std::fflush(stderr);
		char line[8];
		if (!std::fgets(line, sizeof(line), stdin))
			line[0] = '\0';
	}
	outcome out;
	std::vector<std::string> small_scale;
	const int rmem_max = c.limits.tcp_rmem[2];
	for (const auto &s : c.sockets) {
		if (s.lock < 0) {
			fmt::print("could not change {}: {}\n", describe(s), s.lock_note);
			out.failed++;
			continue;
		}
		fix_one(pidfd, s, floor, dry, c.limits, &out);
		if (s.info.state != TCP_LISTEN && s.info.has_tcp_info && rmem_max > 0 &&
		    (65535ll << s.info.rcv_wscale) < rmem_max)
			small_scale.push_back(fmt::format(
			    "{}: receive window scale {} (fixed at the handshake) caps its window "
			    "at {} bytes, below tcp_rmem's {}",
			    describe(s), s.info.rcv_wscale, 65535ll << s.info.rcv_wscale,
			    rmem_max));
	}
	for (const auto &l : small_scale)
		fmt::print("keeps a small window: {}\n", l);
	fmt::print("{} {}, {} already unlocked, {} could not be changed\n",
		   count(uint64_t(out.changed), "socket", "sockets"),
		   dry ? "would change" : "changed", out.unchanged, out.failed);
	if (!guard) {
		close(pidfd);
		return out.failed ? 3 : 0;
	}
	remote::guard g(true, registry::by_guard);
	out.failed += guard_add_all(&g, pid, pidfd, c, reachable_floor(pid, floor, c.limits));
	const int gret = guard_loop(&g, pid, pidfd);
	close(pidfd);
	return out.failed || gret ? 3 : 0;
}

} // namespace

int cmd_fix(int argc, char **argv)
{
	std::vector<int> pids;
	long long floor = 0;
	bool dry = false, guard = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help"))
			return fix_usage(stdout, 0);
		if (!std::strcmp(a, "--dry-run")) {
			dry = true;
		} else if (!std::strcmp(a, "--guard")) {
			guard = true;
		} else if (!std::strcmp(a, "--policy") || !std::strcmp(a, "--floor")) {
			if (i + 1 >= argc)
				return bad_arg(fmt::format("option '{}' needs a value", a));
			const char *v = argv[++i];
			if (a[2] == 'p' && std::strcmp(v, "initial") != 0)
				return bad_arg(fmt::format("--policy '{}': only initial repairs "
							   "(unlocked, autotuning on)",
							   v));
			if (a[2] == 'f' && (floor = parse_size(v)) < 0)
				return bad_arg(fmt::format("--floor '{}': a size from 1 to {} "
							   "(suffix K, M or G; 1G is taken as {})",
							   v, SOCKBUF_SIZE_MAX, SOCKBUF_SIZE_MAX));
		} else if (a[0] == '-') {
			return bad_arg(fmt::format("unknown option '{}'", a));
		} else {
			char *end = nullptr;
			long v = std::strtol(a, &end, 10);
			if (!*a || *end || v <= 0 || v > INT_MAX)
				return bad_arg(fmt::format("'{}' is not a PID", a));
			pids.push_back(int(v));
		}
	}
	if (pids.empty())
		return bad_arg("no PID");
	if (guard && !floor)
		return bad_arg("--guard: needs --floor SIZE (the floor to guard)");
	if (guard && dry)
		return bad_arg("--guard: not with --dry-run");
	if (guard && pids.size() > 1)
		return bad_arg(fmt::format("--guard keeps one process's floors, not {} (one "
					   "'sockbuf fix PID --floor SIZE --guard' each)",
					   pids.size()));
	// Every process, each said; the worst status (1 before 3: a process
	// that could not be looked at at all).
	int status = 0;
	for (int pid : pids) {
		if (pids.size() > 1)
			fmt::print("pid {}:\n", pid);
		const int r = fix_pid(pid, floor, dry, guard);
		if (r == 1 || (r == 3 && status == 0))
			status = r;
	}
	return status;
}

} // namespace sockbuf::cli
