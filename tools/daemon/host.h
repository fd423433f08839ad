// SPDX-License-Identifier: MIT
// What sockbufd watches: every floor table under /dev/shm whose process
// is alive, read whole when its header's change count moved (at most
// every --reread ms) and at least every --net-interval ms, and the
// sockets those tables name kept at their floors through the remote guard
// (tools/cli/remote_guard.h: pidfd_getfd(), the cookie checked right
// before the write, no copy held).
//
// Nothing in a table is trusted: the file must be the process's (its
// name, pid and start time; owned by its user, mode 0600, not a link),
// every field is checked (tools/cli/floor_read.h, fuzzed), a bad file is
// skipped, counted and said once, and the daemon goes on.  A process
// names only sockets in its own descriptor table (found there by inode),
// and a restore uses SO_*BUFFORCE only when the process could itself
// (CAP_NET_ADMIN in the initial user namespace, force_rights.h).
//
// Sockets are read from this network namespace's inet_diag dump: a
// process in another network namespace is skipped and counted
// (reason "netns").
//
// With events (--events on, where the programs load: CAP_BPF and
// CAP_PERFMON, BTF, fexit) one set of the guard's event programs serves
// the host: every guarded socket's inode and floors are in its map, a cut
// posts a record, and the daemon restores the socket named (the same
// restore, identity check included) and observes how long it was below.
// Passes then run only for sockets new to the set (at most every
// --interval ms), after lost records, and every --net-interval ms (the
// safety net for cuts the programs do not see: setsockopt, kTLS).
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
#include <utility>
#include <vector>

namespace sockbuf::daemon
{

class host
{
public:
	host(const options &o, metrics &m);

	// Reads the directory again (at the next tick): something was
	// created or removed there.
	void dir_changed() { dir_dirty_ = true; }
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
		bool read = false;	   // read whole at least once
		uint32_t changes = 0;	   // the header's count at the last whole read
		uint64_t last_read_ms = 0; // when
		std::string refused;	   // the last reason it was skipped, said once
		uint64_t file = 0;	   // the table's inode: another one after an exec
		service svc;
	};

	void scan_dir();
	void refresh(pid_t pid, watched &w, uint64_t now_ms);
	void refuse(pid_t pid, watched &w, const char *reason, const std::string &why);
	void restored(const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
		      const struct sockbuf_report &rep);
	void full_pass();
	void sync_watch(); // the event map follows the guard's set

	const options &opt_;
	metrics &metrics_;
	cli::remote::guard guard_;
	std::map<pid_t, watched> procs_;
	uint64_t own_netns_ = 0;
	bool dir_dirty_ = true;
	bool force_all_ = false;
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
