// SPDX-License-Identifier: MIT
// What a restore is counted and said as: dips, restores and refusals
// per service, the time below the floor when a record named it, and
// the restore's log line (one a second per socket, at most
// max_lines_per_s in all, the rest counted in one line a second).
#include "host.h"
#include "host_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace sockbuf::daemon
{

void host::restored(const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
		    const struct sockbuf_report &rep)
{
	auto it = procs_.find(s.pid);
	const service svc = it == procs_.end() ? service{} : it->second.svc;
	const int64_t before[2] = {snd, rcv};
	const int floor[2] = {s.floor.snd, s.floor.rcv};
	const struct sockbuf_dir_report *r[2] = {&rep.snd, &rep.rcv};
	double dips = 0, raised = 0, short_of = 0;
	for (int i = 0; i < 2; i++) {
		if (!floor[i] || before[i] < 0 || before[i] >= floor[i])
			continue;
		dips++;
		// Short of the floor is a refusal (the process's own limit), not
		// a restore as well.
		if (r[i]->effective < floor[i])
			short_of++;
		else if (r[i]->strategy != SOCKBUF_STRAT_HELD &&
			 r[i]->strategy != SOCKBUF_STRAT_DEFAULT &&
			 r[i]->strategy != SOCKBUF_STRAT_NONE)
			raised++;
	}
	metrics_.dips(svc, dips);
	if (raised)
		metrics_.restores(svc, "daemon", posted_now_ ? "event" : "pass", raised);
	if (raised && posted_now_) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		const int64_t now = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
		metrics_.below_floor(svc, double(std::max<int64_t>(0, now - int64_t(posted_now_))) /
					      1e9);
	}
	if (short_of)
		metrics_.refusals(svc, "limit", short_of);
	const uint64_t now = cli::remote::monotonic_ms();
	uint64_t &last = last_line_[{s.pid, s.fd}];
	if (now < last + 1000)
		return;
	last = now;
	lines_window(now);
	if (lines_now_ >= max_lines_per_s) {
		lines_held_++;
		return;
	}
	lines_now_++;
	fmt::print(stderr, "sockbufd: pid {} ({}) fd {}: restored{}{}\n", s.pid, svc.comm, s.fd,
		   cli::remote::restored_text(s, snd, rcv, rep),
		   short_of ? " (short of the floor: the process's own limit)" : "");
}

void host::lines_window(uint64_t now_ms)
{
	if (now_ms < lines_from_ + 1000)
		return;
	if (lines_held_)
		fmt::print(stderr,
			   "sockbufd: {} more restores in the last second not logged (at most "
			   "{} lines a second; the metrics count every one)\n",
			   lines_held_, max_lines_per_s);
	lines_from_ = now_ms;
	lines_now_ = 0;
	lines_held_ = 0;
}

} // namespace sockbuf::daemon
