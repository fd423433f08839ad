// SPDX-License-Identifier: MIT
// What sockbufd watches: the floor tables processes hand it over its
// registration socket ("register" in its run directory, a unix stream
// socket anyone may connect to; impl/internal/floor_registry.h), read
// whole when a table's header's change count moved (at most every
// --reread ms) and at least every --net-interval ms, and the sockets
// those tables name kept at their floors through the remote guard
// (tools/remote/remote_guard.h: pidfd_getfd(), the cookie checked right
// before the write, no copy held).
//
// Whom a table serves is what the kernel says, never what a file says:
// the peer of the connection (SO_PEERCRED; its pidfd from SO_PEERPIDFD,
// or pidfd_open() of its pid before 6.5) must hold the table it sends at
// the descriptor number it names (/proc/PID/fd/N is the same file),
// checked while its pidfd shows it alive; every later read of the table
// is checked so too, and its sockets are taken through that pidfd alone,
// never by the number.  Its own table (a sealed memfd)
// serves the peer; a table it publishes for another process (the
// supervisor's, `sockbuf fix --guard`'s) serves that process only when
// the peer could take its sockets itself (the ptrace rule: same user,
// at least its capabilities; or CAP_SYS_PTRACE).  The daemon never opens
// a table by name and scans no directory.  A process is forgotten when
// its pidfd says it exited, or when it no longer holds its table (an
// exec closes it).  A restore uses SO_*BUFFORCE only when the process
// could itself (CAP_NET_ADMIN in the initial user namespace,
// force_rights.h) both when it registered and now.
//
// Nothing in a table is trusted: every field is checked
// (tools/remote/floor_read.h, fuzzed), a bad table is skipped, counted and
// said once, and the daemon goes on.  A process names only sockets in its
// own descriptor table (found there by inode).
//
// Fair share: what reading tables costs (the reads, the walks of
// /proc/PID/fd) is accounted per user and per process; each tick rereads
// tables within a budget, the least-served user first, so that one
// user's processes (many, large, always changing) cannot hold back
// another user's.  A process left for a later tick is counted (tables
// refused, reason "share" when another user's tables were read first,
// "budget" when none was) and named once in the log for each.  At most
// max_per_uid processes per user are served.
//
// Sockets are read from this network namespace's inet_diag dump: a
// process in another network namespace is refused and counted (reason
// "netns").
//
// With events (--events on, where the programs load: CAP_BPF and
// CAP_PERFMON, BTF, fexit) one set of the guard's event programs serves
// the host: every guarded socket's inode and floors are in its map, a cut
// posts a record, and the daemon restores the socket named (the same
// restore, identity check included) and observes how long it was below.
// Passes then run only for sockets new to the set (at most every
// --interval ms), after lost records, and every --net-interval ms (the
// safety net for cuts the programs do not see: kTLS, MPTCP, and
// setsockopt() on a kernel where no program could be attached to it).
#pragma once

#include "guard_events.h"
#include "metrics.h"
#include "options.h"
#include "remote_guard.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace sockbuf::daemon
{

// A descriptor closed with its scope unless released.
struct owned_fd {
	int fd = -1;
	owned_fd() = default;
	explicit owned_fd(int f) : fd(f) {}
	owned_fd(const owned_fd &) = delete;
	owned_fd &operator=(const owned_fd &) = delete;
	~owned_fd()
	{
		if (fd >= 0)
			::close(fd);
	}
	int release()
	{
		const int f = fd;
		fd = -1;
		return f;
	}
};

class host
{
public:
	host(const options &o, metrics &m);
	~host();
	host(const host &) = delete;
	host &operator=(const host &) = delete;

	// The registration socket's descriptor set (an epoll fd: the
	// listening socket, connections not yet read, the pidfds of served
	// processes), readable when one of them is; -1 when the socket could
	// not be made (register_err()).
	int register_fd() const { return ep_; }
	int register_err() const { return reg_err_; }
	// Accepts and answers registrations, forgets processes that exited.
	void on_register();
	// Every table read whole at the next tick (SIGHUP).
	void reread_all() { force_all_ = true; }

	// Discovery and, when due, a pass.  @now_ms: CLOCK_MONOTONIC.
	void tick(uint64_t now_ms);

	// The event source: 0 when its programs drive restores, else why not
	// (-errno of bpf::event_source::open(), -ECANCELED with --events off).
	int events_err() const { return ev_err_; }
	unsigned int events_attached() const { return ev_.attached(); }
	// Readable while records wait; -1 without events.
	int events_fd() const { return ev_err_ == 0 ? ev_.fd() : -1; }
	// Restores the sockets the records name.
	void on_records();

	size_t sockets() const { return guard_.size(); }
	const cli::remote::totals &guard_totals() const { return guard_.stats(); }
	// Restores recorded at @path while they write (remote_guard.h).
	int journal(const std::string &path) { return guard_.journal(path); }
	size_t processes() const { return procs_.size(); }

private:
	struct watched {
		uint64_t start = 0;
		int table = -1;	    // the table (read-only), from the registration
		int pidfd = -1;	    // the served process's
		pid_t holder = 0;   // who holds the table: the process, or its publisher
		int holder_fd = -1; // at this number
		uint64_t table_dev = 0, table_ino = 0;
		uid_t uid = 0;		  // the served process's user, for the fair share
		bool may_force = false;	  // at registration
		bool over_share = false;  // said once
		bool over_budget = false; // said once
		uint64_t deferred = 0;
		bool read = false;	   // read whole at least once
		uint32_t changes = 0;	   // the header's count at the last whole read
		uint64_t last_read_ms = 0; // when
		std::string refused;	   // the last reason it was skipped, said once
		uint64_t file = 0;	   // the table's inode: another one after an exec
		service svc;
	};

	int listen_register();
	void accept_all();
	void answer(int conn);
	int admit(int conn, pid_t *served, watched *w);
	int vet(owned_fd &table, owned_fd &peer, pid_t holder, int holder_fd, int kind,
		pid_t target, pid_t *served, watched *w);
	void install(pid_t served, watched &w);
	void scan_step(uint64_t budget_us);
	void forget(pid_t pid);
	bool holds_table(const watched &w) const;
	bool due(pid_t pid, watched &w, uint64_t now_ms);
	void refresh(pid_t pid, watched &w, uint64_t now_ms);
	void share_out(uint64_t now_ms);
	void refuse(pid_t pid, watched &w, const char *reason, const std::string &why);
	void restored(const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
		      const struct sockbuf_report &rep);
	void full_pass();
	uint64_t take_lost();
	void sync_watch(); // the event map follows the guard's set

	const options &opt_;
	metrics &metrics_;
	cli::remote::guard guard_;
	std::map<pid_t, watched> procs_;
	uint64_t own_netns_ = 0;
	bool force_all_ = false;

	int ep_ = -1, listen_ = -1, reg_err_ = 0;
	// The processes that published before this daemon started: each
	// looked at once (their descriptor tables, for a table), a part a
	// tick.
	std::vector<pid_t> to_scan_;
	bool scan_listed_ = false;
	std::map<int, std::pair<uint64_t, uid_t>> pending_; // connection -> deadline, user
	std::map<pid_t, uint64_t> said_;   // refused offers said (pid -> start time)
	std::map<uid_t, double> spent_us_; // table work per user, decayed
	uint64_t spent_at_ms_ = 0;
	static constexpr size_t max_per_uid = 1024;
	static constexpr size_t max_pending_per_uid = 16;
	uint64_t next_net_ms_ = 0;
	std::map<std::pair<pid_t, int>, uint64_t> last_line_; // restore lines: 1/s per socket
	// And at most max_lines_per_s in all: under pressure thousands of
	// sockets are restored a second, and a line each would cost the
	// daemon (and the journal) more than the restores.  The rest are
	// counted in one line a second.
	static constexpr unsigned int max_lines_per_s = 10;
	void lines_window(uint64_t now_ms);
	uint64_t lines_from_ = 0;
	unsigned int lines_now_ = 0;
	uint64_t lines_held_ = 0;
	line_limiter skipped_lines_{10, "skipped"}; // refused tables: 10 lines a second

	bpf::event_source ev_;
	int ev_err_ = -ECANCELED;
	std::map<uint32_t, std::pair<int, int>> watched_; // inode -> floors in the event map
	std::vector<uint32_t> inos_;			  // drained records
	std::vector<uint64_t> posted_ns_;		  // and when each was posted
	std::vector<uint32_t> unclear_; // marks a clear() failed on: looked at again each tick
	uint64_t lost_seen_ = 0;
	uint64_t posted_now_ = 0;	      // the record being restored (0: a pass)
	bool set_changed_ = false;	      // the guard's set moved since the last pass
	uint64_t next_pass_ms_ = 0;	      // with events: the earliest pass for new sockets
	uint64_t counted_gen_ = ~uint64_t(0); // the guard's set as last counted per service
	size_t counted_procs_ = 0;
};

} // namespace sockbuf::daemon
