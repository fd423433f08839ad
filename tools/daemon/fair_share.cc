// SPDX-License-Identifier: MIT
// The fair share of the daemon's time: the tables due in a tick read
// within its budget, the user that used least lately first (each user's
// time halved every second); what is left waits for a later tick,
// counted, its process named once.
#include "host.h"
#include "host_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace sockbuf::daemon
{

// The tables due, read within this tick's budget: the user that used
// the least of the daemon's time lately first, within a user the process
// read longest ago.  The rest wait for a later tick, counted, each
// process named once.
void host::share_out(uint64_t now_ms)
{
	// What each user used, halved every second.
	if (spent_at_ms_ && now_ms > spent_at_ms_) {
		const double keep = std::exp2(-double(now_ms - spent_at_ms_) / 1000.0);
		for (auto it = spent_us_.begin(); it != spent_us_.end();) {
			it->second *= keep;
			it = it->second < 1 ? spent_us_.erase(it) : std::next(it);
		}
	}
	spent_at_ms_ = now_ms;
	std::vector<std::pair<pid_t, watched *>> todo;
	for (auto &[pid, w] : procs_)
		if (due(pid, w, now_ms))
			todo.emplace_back(pid, &w);
	std::sort(todo.begin(), todo.end(), [this](const auto &a, const auto &b) {
		const double sa = spent_us_.count(a.second->uid) ? spent_us_[a.second->uid] : 0;
		const double sb = spent_us_.count(b.second->uid) ? spent_us_[b.second->uid] : 0;
		if (sa != sb)
			return sa < sb;
		return a.second->last_read_ms < b.second->last_read_ms;
	});
	// A quarter of the interval for reading tables, at least 5 ms: the
	// pass that restores runs after it, every tick.
	const uint64_t budget_us = std::max<uint64_t>(5000, uint64_t(opt_.interval_ms) * 250);
	const uint64_t t0 = now_us();
	// The users this tick's time went to: a table left over is held back
	// by the fair share only when time went to another user before it.
	// A user alone (one process or many) has the whole budget; what it
	// leaves over waits for the budget, so that the pass still runs
	// every tick (a lone user's flood must not hold back the restores of
	// sockets whose tables are not due).
	std::set<uid_t> served;
	for (auto &[pid, w] : todo) {
		const uint64_t used = now_us() - t0;
		if (used >= budget_us && w->read) {
			const bool share = served.size() > served.count(w->uid);
			w->deferred++;
			metrics_.table_refused(share ? "share" : "budget");
			bool &said = share ? w->over_share : w->over_budget;
			if (!said) {
				said = true;
				if (share)
					fmt::print(
					    stderr,
					    "sockbufd: pid {} ({}) of uid {}: its table is read "
					    "later: its user is over its share of the daemon's "
					    "time\n",
					    pid, w->svc.comm, w->uid);
				else
					fmt::print(
					    stderr,
					    "sockbufd: pid {} ({}) of uid {}: its table is read "
					    "later: this tick's {} ms for reading tables is spent "
					    "(no other user's table was read)\n",
					    pid, w->svc.comm, w->uid, double(budget_us) / 1000);
			}
			continue;
		}
		const uid_t uid = w->uid;
		served.insert(uid);
		const uint64_t t1 = now_us();
		refresh(pid, *w, now_ms); // may forget it: w is not used after
		spent_us_[uid] += double(now_us() - t1);
	}
}

} // namespace sockbuf::daemon
