// SPDX-License-Identifier: MIT
// A floor guard for another process's sockets: `sockbuf run --via seccomp
// --floor-guard MS` (the supervisor) and `sockbuf fix --floor SIZE --guard`.
//
// It keeps no duplicate of any socket open (a held duplicate would keep a
// connection alive after the program closed it): per socket it remembers
// the process, the fd number, the socket's cookie and inode, and the
// floors.  A pass reads every guarded socket's sizes from one inet_diag
// dump of this network namespace (by cookie), and checks that an fd
// number still names its socket through /proc/PID/fd (the inode; no
// duplicate) for each socket the dump did not show and for a rolling
// sixteenth of the others.  Only a socket below its floor is taken, with pidfd_getfd():
// its SO_COOKIE must be the one remembered right before the write (the
// guard's identity rule: a number that now names another socket is never
// written; a file that is no socket is never touched, not even fstat()),
// sockbuf_restore_floor() raises it, and the duplicate is handed to the
// closer threads (closer.h): its close() may be the socket's last and
// sleep for its linger time.  A user whose closes back up gets no take
// until they are done (counted in totals.closing).  A socket that is not in the dump (not yet bound
// or connected) is left unread: the kernel cuts established sockets.
//
// The floors are published for the process (registry::foreign_table), so
// that `sockbuf show PID` sees them.  One thread.
#pragma once

#include "diag.h"
#include "floor_registry.h"

#include <sockbuf/sockbuf.h>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <time.h>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sockbuf::cli::remote
{

struct journal_record; // remote_guard_internal.h

struct socket_ref {
	pid_t pid = 0;
	int fd = -1;
	uint64_t cookie = 0;
	uint32_t inode = 0;
	int family = 0;
	struct sockbuf_floor floor = {0, 0};
	bool inherited = false; // the floor is its listener's (published by_listener)
	// The most the owner could set at the last restore, where its own
	// limits kept that short of the floor (SOCKBUF_CLAMP_MEM_MAX without
	// CAP_NET_ADMIN); 0 otherwise.  A socket at it is kept, not restored
	// again at every pass, until forget_reach().
	int reach_snd = 0, reach_rcv = 0;
	int want_snd() const { return reach_snd ? reach_snd : floor.snd; }
	int want_rcv() const { return reach_rcv ? reach_rcv : floor.rcv; }
};

struct totals {
	uint64_t passes = 0;
	uint64_t below = 0;	// directions found below their floor
	uint64_t restored = 0;	// directions raised back
	uint64_t gone = 0;	// sockets closed (or their process gone)
	uint64_t reused = 0;	// fd numbers that came to name another socket
	uint64_t inherited = 0; // accepted sockets given their listener's floor
	uint64_t errors = 0;
	// Takes refused because the owner's user had copies whose close()
	// was slow or backed up (closer.h): its sockets wait for them.
	uint64_t closing = 0;
};

class guard
{
public:
	// @restore: false only publishes the floors and forgets closed
	// sockets; true also restores.  @who: the registry::source bits the
	// floors are published as (by_shim for what the supervisor sets as
	// the shim would, by_guard while guarding).
	guard(bool restore, uint32_t who);

	// Accepted sockets take their listener's floor: each pass, a guarded
	// socket found listening has its accepted connections (same local
	// port, from a dump filtered by it) looked up by inode in the fd
	// tables of its process and that process's descendants (forked
	// workers accept too), taken with pidfd_getfd() only to read the
	// cookie the dump gave (identity), and added with the listener's
	// floors, published as registry::by_listener.  Off by default (`fix`
	// names its sockets); the supervisor turns it on.  The copies of the
	// listener that forked processes hold get its floor published for
	// them.
	void inherit_accepted(bool on) { inherit_ = on; }
	// A socket about to listen or listening, whose copy @dup the caller
	// holds (the supervisor traps listen()): if it is guarded (its
	// cookie), its local port and the connections already accepted on
	// that port are remembered.  The connections accepted later on that
	// port then take its floor as above, but none that was there before
	// it listened, and also when the program closes it before a pass saw
	// it listening: the first pass after its close looks for them once
	// (an accepted connection is in its process's table before the
	// listener can be closed), provided the pass before it saw it
	// listening or it listened since (the window is one pass).  No copy
	// of it is kept (a held copy would keep it listening).  True when
	// remembered.
	bool note_listen(int dup);
	~guard();
	guard(const guard &) = delete;
	guard &operator=(const guard &) = delete;

	// The floors of fd @fd of process @pid, whose duplicate @dup the
	// caller holds now (its cookie and inode are read from it).  A
	// direction left 0 in @floor keeps the floor it had for the same
	// socket.  0 or -errno.
	int add(pid_t pid, int fd, int dup, const struct sockbuf_floor &floor,
		bool inherited = false);

	size_t size() const { return socks_.size(); }
	// Moves whenever a socket is added or dropped: what is computed from
	// the set need not be computed again while it stays.
	uint64_t generation() const { return set_gen_; }
	// Guarded sockets per process.
	std::map<pid_t, size_t> sockets_by_process() const
	{
		std::map<pid_t, size_t> n;
		for (const socket_ref &s : socks_)
			n[s.pid]++;
		return n;
	}

	// The floors process @pid publishes (inode -> floors, its floor
	// table) made the guard's for @pid: a socket new to the guard is
	// found by inode in @pid's descriptor table, taken with pidfd_getfd()
	// only to check that it is that inode and to read its cookie, and
	// added; a socket guarded for @pid whose inode is no longer published
	// is forgotten.  Returns how many published inodes were not found in
	// @pid's table (still being installed, or held elsewhere: looked for
	// again at the next call), or -errno when @pid cannot be reached.
	// @pidfd: the process as its caller knows it (a copy is kept: every
	// take goes through it, whoever holds the number later); -1: opened
	// here from the number.
	int sync_published(pid_t pid, const std::map<uint32_t, struct sockbuf_floor> &floors,
			   int pidfd = -1);

	// Whether a restore for process @pid may use SO_*BUFFORCE (the
	// process's rights: force_rights.h).  Asked at every restore that
	// came short of a floor by the owner's net.core.[rw]mem_max, never
	// remembered, and then the restore is made again with FORCE; not
	// asked where no FORCE is needed.  Unset: never.
	void force_for(std::function<bool(pid_t)> may) { may_force_ = std::move(may); }

	// One pass.  @restored sees each socket raised, with the sizes read
	// before and the report of the restore.
	using restore_fn = std::function<void(const socket_ref &, int64_t snd_before,
					      int64_t rcv_before, const struct sockbuf_report &)>;
	void pass(const restore_fn &restored);
	// The socket of @inode (a record of an event source named it):
	// taken, its identity checked, its sizes read through the copy, and
	// restored if below its floor, as a pass would.  false: no socket of
	// that inode is guarded.
	bool restore_inode(uint32_t inode, const restore_fn &restored);
	// The socket of @inode (the first, if processes share it), or null;
	// valid until the set changes.
	const socket_ref *find_inode(uint32_t inode);
	// Every socket's floor is tried again at the next restore (the owner
	// may have gained rights, or an admin raised net.core.[rw]mem_max).
	void forget_reach();
	// Every guarded socket (for an event source's map of watched inodes).
	const std::vector<socket_ref> &sockets() const { return socks_; }

	// A copy of this process made with fork() takes the guard over: the
	// parent calls release() (it forgets its sockets, and leaves the
	// published tables in place), the child after_fork_child() (maps the
	// tables again: they are not inherited, and names itself their
	// publisher).
	void release();
	void after_fork_child();
	// Forgets every socket and removes the published tables (as the
	// destructor does, for a process about to _exit()).
	void end();

	// Restores leave a record at @path while they write (the socket, its
	// lock bits before, the directions written), and none writes unless
	// it is recorded: a guard killed between the size's write (which
	// locks the direction) and the lock's clear leaves it there, and
	// recover_journal() at the next start puts the bits back.  The
	// records whose socket that start did not find (recover_journal()
	// keeps them) are looked at when sync_published() first finds a
	// socket of that cookie.  0 or -errno (the guard then restores
	// without one).
	int journal(const std::string &path);
	// What those looks did, and the first take that left a socket with
	// this process's net_cls classid and net_prio index (take.h), for the
	// log (taken: the list is emptied).
	std::vector<std::string> take_notes() { return std::exchange(notes_, {}); }

	const totals &stats() const { return totals_; }
	// The reason of the last dump that failed (empty when none).
	int dump_error() const { return dump_err_; }

private:
	struct process {
		int pidfd = -1;
		pid_t pid = 0;
		uid_t uid = uid_t(-1); // its real uid: whose closes it waits for
		registry::foreign_table table;
		size_t sockets = 0;
		process() = default;
		~process();
		process(const process &) = delete;
		process &operator=(const process &) = delete;
	};
	enum verdict { keep, gone, reused };

	process *proc(pid_t pid, int pidfd = -1);
	// pidfd_getfd() of fd @fd of @p, or -1 with errno (EAGAIN: refused
	// while the user's closes back up, counted in totals.closing).
	int take(const process &p, int fd);
	// The copy @dup of a socket of @p closed off this thread.
	static void put(const process &p, int dup);
	void drop(size_t i, verdict why);
	verdict still_there(const socket_ref &s) const;
	void restore(size_t i, int64_t snd, int64_t rcv, const restore_fn &restored);
	// The accepted connections of the listeners found in this pass.
	struct listening {
		uint16_t port;
		socket_ref listener; // a copy: the pass may drop entries
	};
	void adopt_accepted(const std::vector<listening> &listeners);
	// What note_listen() remembers, by the listener's cookie.
	struct noted {
		socket_ref listener;
		uint16_t port = 0;
		std::vector<uint64_t> before; // connections on the port when it listened
		uint64_t seen_ms = 0;	      // when last known listening
	};
	// The noted listeners closed since the last pass, added to
	// @listeners; their cookies (forgotten after adopt_accepted()).
	std::vector<uint64_t> closed_listeners(std::vector<listening> *listeners);
	// Whether connection @cookie was on its port before listener
	// @listener listened (it cannot be its).
	bool preceded(uint64_t listener, uint64_t cookie) const;
	bool adopt(pid_t pid, int fd, uint64_t cookie, const struct sockbuf_floor &floor,
		   bool inherited);

	const bool restore_;
	const uint32_t who_;
	std::vector<socket_ref> socks_;
	uint64_t set_gen_ = 0;				// moves whenever socks_ does
	std::unordered_map<uint32_t, size_t> by_inode_; // restore_inode()'s, as of by_inode_gen_
	uint64_t by_inode_gen_ = ~uint64_t(0);
	std::map<pid_t, std::unique_ptr<process>> procs_;
	diag::session diag_;
	int dump_err_ = 0;
	size_t sweep_ = 0; // the next /proc check of the rolling sweep
	bool inherit_ = false;
	std::function<bool(pid_t)> may_force_;
	int journal_fd_ = -1;
	// The record (null: cleared); false when it could not be written.
	bool note(const socket_ref *s, int dup);
	std::vector<journal_record> left_; // restores cut short, socket not found yet
	std::vector<std::string> notes_;
	bool class_said_ = false; // a take left a socket with this process's classid
	void look_left(int dup, uint64_t cookie, pid_t pid);
	// Accepted sockets not found in any fd table yet, by cookie: looked
	// for again for a few passes (the dump can show one between its
	// accept and the fd's install), then left alone.
	std::map<uint64_t, int> unmapped_;
	// Per listener (cookie), the processes below its own already looked
	// at for a copy of it (forked workers hold it too: their copies are
	// published with its floor, as the shim's fork seed does).
	std::map<uint64_t, std::vector<pid_t>> tree_seen_;
	std::map<uint64_t, noted> noted_;
	uint64_t last_pass_ms_ = 0; // of the last pass with a dump
	totals totals_;
};

// What a restore raised, for the lines the callers print: " snd A -> B"
// and/or " rcv A -> B" for each direction that read below its floor.
// CLOCK_MONOTONIC in milliseconds: the clock its callers time passes by.
inline uint64_t monotonic_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

// What a guard killed mid-restore left in the journal at @path: the lock
// bits of that socket (if the process recorded still holds it, by
// cookie) that the restore may have set and that were clear before it,
// cleared; a bit set before, or of a direction the restore does not
// write, is the program's and kept.  A record whose socket is not there
// (the process exited: a copy may live on in another) is kept for
// guard::journal() to look for.  The lines for the log (none when there
// was nothing to do).
std::vector<std::string> recover_journal(const std::string &path);

std::string restored_text(const socket_ref &s, int64_t snd, int64_t rcv,
			  const struct sockbuf_report &rep);

} // namespace sockbuf::cli::remote
