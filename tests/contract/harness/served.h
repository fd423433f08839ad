// SPDX-License-Identifier: MIT
// The daemon mode (guard_driver::daemon): the floors of a scenario's
// daemon-mode sockets are kept by a sockbufd that the scenario starts in
// its own namespaces, taken over from the library's guard by the
// guard's hand-over (SOCKBUF_GUARD_NO_DAEMON in sockbuf.h), as a served
// process gets it:
//
// - the scenario's process enters a mount namespace of its own with a
//   private tmpfs on /dev/shm, where the daemon's run directory
//   (SOCKBUF_DAEMON_DIR, root's, 0755) and its metrics file live: no
//   other test's daemon or table, nor the host's, sees or is seen;
// - sockbufd starts there as its unit runs it (Nice=-10), with
//   --events off (polling, every daemon_interval_ms: tighter than the
//   guard's interval, so that the guard stands down for it) and
//   --metrics-file;
// - a process of its own (the served process) is forked with the
//   daemon-mode sockets (the same sockets: the scenario's traffic,
//   sampler, judge and cutter use them as any other), makes a guard
//   there with the library's thread (sockbuf_guard_start() at the mode's
//   interval) and, SOCKBUF_DAEMON_DIR set, hands over to the daemon
//   before the traffic starts;
// - at the guards' stop the served process stops its guard and says what
//   it did (sockbuf_guard_stats(), sockbuf_guard_daemon_stats()), and
//   the daemon ends (SIGTERM: its last metrics): its
//   sockbuf_restores_total{source="daemon"} says the daemon restored.
//
// The other guards of the scenario run in the scenario's process, which
// has no SOCKBUF_DAEMON_DIR: they never find this daemon, and this daemon
// never has their table.
#pragma once

#include "model.h"

#include <sys/types.h>

#include <string>
#include <vector>

namespace sockbuf::contract
{

struct pass_cost; // clauses.h

struct daemon_spec {
	uint32_t guard_interval_us = 100000; // the served process's guard
	uint32_t daemon_interval_ms = 10;    // sockbufd --interval
};

class served_guard
{
public:
	served_guard() = default;
	~served_guard();
	served_guard(const served_guard &) = delete;
	served_guard &operator=(const served_guard &) = delete;

	// Whether the mode can run here, before any socket is assigned to
	// it: sockbufd found, root, the mount namespace and its /dev/shm
	// made.  "" or the reason it is skipped.  Call while the process
	// is single-threaded (unshare(CLONE_NEWNS) moves the calling thread
	// only).
	std::string prepare(const daemon_spec &spec);
	// Starts the daemon and the served process with the daemon-mode
	// sockets of @sockets; waits (at most 3 s) for the guard to hand
	// over.  "" or why not: without a daemon the served process's guard
	// keeps its sockets itself (no hand-over, said in the figures), and
	// without a served process they have no guard and C3 sees their
	// dips last.
	std::string start(const std::vector<socket_record> &sockets);
	// The guards' stop: the served process's guard stops, then the
	// daemon.
	void stop();
	// The mode's figures, the daemon's included (after stop()), its
	// bound from a pass costing @cost.
	guard_stats stats(const pass_cost &cost) const;
	int sockets() const { return sockets_; }
	const std::string &daemon_log() const { return log_text_; }

private:
	void end_children();
	std::string start_daemon();
	daemon_spec spec_;
	std::string sockbufd_, dir_, run_dir_, metrics_, log_;
	pid_t daemon_ = -1, served_ = -1;
	int ctl_fd_ = -1, res_fd_ = -1;
	int sockets_ = 0;
	bool stopped_ = false;
	guard_stats st_;
	std::string log_text_;
};

// "daemon mode: sockbufd (pid 12, --interval 10 ms, --events off) served
// the guard of 2 sockets (interval 50 ms) for 3.9 s: 1 hand-over, 0
// resumes; restores: 12 by the daemon, 0 by the guard": the note.
std::string served_text(const guard_stats &g, const daemon_spec &spec);

// Where sockbufd is: $SOCKBUF_CONTRACT_SOCKBUFD, else beside this program
// (a build tree's bin/, or the installed sbin/ next to bin/), else
// /usr/sbin/sockbufd.  "" when none is executable.
std::string find_sockbufd();

} // namespace sockbuf::contract
