// SPDX-License-Identifier: MIT
#include "supervise.h"

#include "fd_pass.h"
#include "supervise_parts.h"

#include <fmt/core.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sockbuf::cli::run
{

using namespace supervision;

namespace
{

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

} // namespace

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
		if (fd_pass::send_fd(sv[1], "L", 1, lfd) != 0)
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
	char byte;
	// -EPIPE: the child sent none.
	int listener = fd_pass::recv_fd(sv[0], &byte, 1);
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
