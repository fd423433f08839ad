// SPDX-License-Identifier: MIT
// The parts of `sockbuf run --via seccomp` (supervise.h), one file a job:
//   supervise_filter.cc       the seccomp filter: installed in the child, its
//                             listener passed to the parent; what the kernel offers
//   supervise_notify.cc       the notification loop: one trapped setsockopt()
//                             read, decided, applied and answered
//   supervise_descendants.cc  the socket of any process or thread under the
//                             filter, reached from its own table; serving the
//                             processes left when the program exits
//   supervise_listen.cc       listen(): a sized listener noted, so that the
//                             connections it accepts adopt its floor
//   supervise_keeper.cc       the keeper, a second holder of the listener
//   supervise_log.h           the configuration's log: item
//   supervise.cc              the run itself: fork, exec, signals, exit status
#pragma once

#include "remote_guard.h"
#include "shim/config.h"
#include "supervise_log.h"

#include <linux/seccomp.h>
#include <map>
#include <set>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace sockbuf::cli::run::supervision
{

// seccomp(2) and pidfd_open(2), through syscall(): -1 and errno on
// failure.
int sys_seccomp(unsigned int op, unsigned int flags, void *args);

int pidfd_open(pid_t pid);

// Installs the filter in the calling process; the listener fd or -errno.
int install_filter();

// Asks the kernel to wake the program and this process on the CPU that
// hands over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 6.6): a trapped call is
// a strict ping-pong between the two, and a wakeup on another CPU costs
// more than the work.  Older kernels refuse it (EINVAL): nothing changes.
void sync_wakeups(int listener);

// How long the keeper holds the listener after the supervisor died while
// the program lives on.
constexpr int keeper_grace_ms = 1000;

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
pid_t start_keeper(int listener, pid_t program, int grace_ms);

class supervisor
{
public:
	supervisor(int listener, const shim::config &cfg);

	// One notification: false when the listener is gone.
	bool handle_one();

	// How long poll() may wait before the next guard pass is due (-1:
	// no socket has a floor).
	int timeout_ms() const;

	// The guard's pass when it is due: with --floor-guard it restores,
	// without it only closed sockets leave the published table.
	void tick();

	// Around the fork of the background copy (see supervise()).
	void hand_over() { guard_.release(); }
	void take_over() { guard_.after_fork_child(); }
	void end() { guard_.end(); }

	// The guard's totals, in one log line (at the end of the run).
	void summary() const;

private:
	static constexpr int continue_call = 1; // the kernel runs the call itself
	static constexpr int gone = 2;		// the call was interrupted or died

	// A pidfd of thread-group leader @pid, opened once and kept (a
	// pidfd never names a process that reused the number: a kept one
	// of an ended process fails ESRCH and is replaced).  -1 when @pid is
	// not a leader (or is gone).  At most 64 are kept: past that, those
	// of ended processes go, then all.
	int leader_pidfd(pid_t pid);

	// Closes the kept pidfd of @pid, or all of them.
	void forget_pidfd(pid_t pid);
	void forget_all_pidfds();

	// Whether notification @id still waits for its answer.
	bool still_valid(uint64_t id) const;

	// A trapped setsockopt(SOL_SOCKET, SO_*BUF*): 0 or -errno, the
	// answer the program gets, or continue_call or gone.
	int decide(const struct seccomp_notif &req);

	// listen(): always run by the kernel.  A socket the supervisor sized
	// (guarded) has its local port and the connections already on it
	// remembered first (remote::guard::note_listen()), so that the
	// connections it accepts get its floor even when the program closes
	// it before a pass sees it listening (iperf3's server does).  Any
	// other socket costs one readlink() of its /proc entry, and nothing
	// when no socket is guarded.
	int decide_listen(const struct seccomp_notif &req);

	// Descriptor @fd of the thread that made call @req, from that
	// thread's own descriptor table, and its thread group in @tgid: a
	// copy the caller closes, or -continue_call (the kernel runs the
	// call, named @call in the log) or -gone.
	int take(const struct seccomp_notif &req, int fd, const char *call, pid_t *tgid_out);

	// The program's memory or descriptors are out of this process's reach
	// (ptrace-attach rights: a non-dumpable program, another user):
	// said once on standard error, and in the log for each process.
	void no_access(pid_t pid, const char *call, int err);

	// The shim's policy on socket @sock (a copy of the program's fd
	// @fd of process @pid), asked for @asked in direction @d through
	// option @name: 0 or -errno, the program's answer, or continue_call.
	int apply(int sock, pid_t pid, int fd, shim::dir d, int name, bool force, int asked);

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

// Serves notifications until every process under the filter is gone.
void serve_rest(supervisor &sup, int listener);

} // namespace sockbuf::cli::run::supervision
