// SPDX-License-Identifier: MIT
// A served process's table: whether it is due (its header's change
// count, --reread, the net's interval), read whole through the
// descriptor held (still held by its process, in this network
// namespace, every field checked) and its floors handed to the guard;
// a table refused is counted and said once.
#include "host.h"
#include "host_util.h"

#include "daemon_presence.h"
#include "floor_read.h"
#include "test_fault.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sockbuf::daemon
{

// Whether the table's holder still has it where it said (an exec closes
// it: close-on-exec).
bool host::holds_table(const watched &w) const
{
	struct stat st;
	const std::string at =
	    "/proc/" + std::to_string(w.holder) + "/fd/" + std::to_string(w.holder_fd);
	return stat(at.c_str(), &st) == 0 && uint64_t(st.st_dev) == w.table_dev &&
	       uint64_t(st.st_ino) == w.table_ino;
}

void host::refuse(pid_t pid, watched &w, const char *reason, const std::string &why)
{
	guard_.sync_published(pid, {});
	set_changed_ = true;
	if (w.refused == why)
		return; // counted and said when it first failed so
	w.refused = why;
	metrics_.table_refused(reason);
	if (skipped_lines_.allow(cli::remote::monotonic_ms()))
		fmt::print(stderr, "sockbufd: pid {} ({}): skipped: {}\n", pid, w.svc.comm,
			   clean(why));
}

// Whether @w's table is to be read whole now: its header's count moved
// (and it was not read within --reread ms), or the net is due.
bool host::due(pid_t pid, watched &w, uint64_t now_ms)
{
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	if (!w.read || net_due)
		return true;
	// The header alone, from the descriptor held: no open, no name.
	char bytes[sizeof(registry::file_header)];
	registry::header_info hi;
	std::string why;
	if (pread(w.table, bytes, sizeof(bytes), 0) != ssize_t(sizeof(bytes)) ||
	    registry::parse_header(bytes, pid, w.start, "table", &hi, &why) != 0)
		return true; // read whole: refused there, with the reason
	if (hi.changes == w.changes && hi.changes != 0)
		return false; // unchanged (0: a writer that never counts)
	return now_ms >= w.last_read_ms + opt_.reread_ms;
}

void host::refresh(pid_t pid, watched &w, uint64_t now_ms)
{
	const std::string proc = "/proc/" + std::to_string(pid);
	// The test seam: stopped before a process's first read, so that a
	// test can end it and give its number to another process there.
	if (!w.read && cli::test_fault("stop_before_read"))
		raise(SIGSTOP);
	w.read = true;
	w.last_read_ms = now_ms;
	// Its table still held where it was (an exec closed it: a new image
	// registers its own), checked by number while the pidfd shows the
	// process alive: the number was the process's.  Its sockets are
	// found by number too, and taken through that pidfd alone.
	struct pollfd alive = {w.pidfd, POLLIN, 0};
	if (!holds_table(w) || poll(&alive, 1, 0) != 0) {
		forget(pid);
		return;
	}
	const uint64_t ns = presence::netns_of(proc);
	if (ns && own_netns_ && ns != own_netns_) {
		refuse(pid, w, "netns",
		       "in another network namespace (sockbufd serves its own: run one there)");
		return;
	}
	// Per-service cost: what reading this process's table and finding
	// its sockets took (a process that rewrites its table all the time
	// shows here, and is read at most every --reread ms).
	const uint64_t t0 = now_us();
	struct cost_guard {
		host *h;
		const watched *w;
		uint64_t t0;
		~cost_guard() { h->metrics_.table_cost(w->svc, double(now_us() - t0) / 1e6); }
	} cost{this, &w, t0};
	registry::table t;
	std::string why;
	const int ret = registry::read_fd(w.table, pid, w.start,
					  "the table of pid " + std::to_string(pid), &t, &why);
	if (ret < 0) {
		refuse(pid, w, ret == -ESTALE ? "stale" : "contents", why);
		return;
	}
	// The test seam: a read that takes longer than a tick's budget for
	// reading tables (fair_share.cc), as in a slow guest.
	if (cli::test_fault("slow_table_read")) {
		const uint64_t us =
		    std::max<uint64_t>(5000, uint64_t(opt_.interval_ms) * 250) + 1000;
		const struct timespec ts = {time_t(us / 1000000), long(us % 1000000) * 1000};
		nanosleep(&ts, nullptr);
	}
	metrics_.table_read();
	w.changes = t.changes;
	w.refused.clear();
	std::map<uint32_t, struct sockbuf_floor> floors;
	for (const registry::entry &e : t.entries)
		if (e.inode <= UINT32_MAX && (e.snd > 0 || e.rcv > 0))
			floors[uint32_t(e.inode)] = {e.snd, e.rcv};
	guard_.sync_published(pid, floors, w.pidfd);
	set_changed_ = true;
}

} // namespace sockbuf::daemon
