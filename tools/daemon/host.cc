// SPDX-License-Identifier: MIT
// sockbufd's host (host.h): made and unmade, and its tick: stale
// registrations dropped, the start-up scan's next part, the tables due
// read (fair_share.cc), the net's interval kept, the pass (passes.cc)
// and the counts per service.  The class's other jobs are in files of
// their own: register.cc, tables.cc, fair_share.cc, passes.cc,
// restore_log.cc.
#include "host.h"
#include "host_util.h"

#include "daemon_presence.h"
#include "floor_read.h"
#include "force_rights.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sys/epoll.h>
#include <unistd.h>

namespace sockbuf::daemon
{

uint64_t now_us()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
}

host::host(const options &o, metrics &m)
    : opt_(o), metrics_(m), guard_(true, 0), own_netns_(presence::netns_of("/proc/self"))
{
	// FORCE only where the process could when it registered and can now
	// (an exec into a program with more rights keeps its pid).
	guard_.force_for([this](pid_t pid) {
		auto it = procs_.find(pid);
		return it != procs_.end() && it->second.may_force &&
		       cli::run::program_may_force(pid) == 1;
	});
	if (o.events)
		ev_err_ = ev_.open();
	metrics_.events_up(ev_err_ == 0);
	reg_err_ = listen_register();
}

host::~host()
{
	for (auto &[pid, w] : procs_) {
		if (w.table >= 0)
			close(w.table);
		if (w.pidfd >= 0)
			close(w.pidfd);
	}
	for (auto &[fd, d] : pending_)
		close(fd);
	if (listen_ >= 0) {
		const std::string path = presence::dir() + "/" + registry::register_socket;
		close(listen_);
		unlink(path.c_str());
	}
	if (ep_ >= 0)
		close(ep_);
}
void host::tick(uint64_t now_ms)
{
	lines_window(now_ms);
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	// Registrations that never sent their message go at their deadline.
	for (auto it = pending_.begin(); it != pending_.end();) {
		if (now_ms < it->second.first) {
			++it;
			continue;
		}
		epoll_ctl(ep_, EPOLL_CTL_DEL, it->first, nullptr);
		close(it->first);
		it = pending_.erase(it);
	}
	if (!scan_listed_ || !to_scan_.empty())
		scan_step(std::max<uint64_t>(5000, uint64_t(opt_.interval_ms) * 250));
	share_out(now_ms);
	for (const std::string &said : guard_.take_notes())
		fmt::print(stderr, "sockbufd: {}\n",
			   said); // pids, numbers and the cgroup mount's paths
	if (net_due) {
		next_net_ms_ = now_ms + opt_.net_ms;
		force_all_ = false;
		guard_.forget_reach(); // the floors tried again, once a net interval
		set_changed_ = true;   // and the event map's floors with them
	}
	if (ev_err_ != 0) {
		full_pass(); // polling
	} else {
		// Events: a pass for sockets new to the set (cut before they
		// were watched), at most every --interval, and the net's; and
		// at once for records lost since the last look (the kernel's
		// skipped runs post nothing, and may come with no record to
		// wake on_records()).
		const bool lost = take_lost() > 0;
		if (lost || net_due || (set_changed_ && now_ms >= next_pass_ms_)) {
			sync_watch();
			full_pass();
			next_pass_ms_ = now_ms + opt_.interval_ms;
		}
		// Marks that could not be cleared post nothing: looked at here.
		std::vector<uint32_t> again;
		again.swap(unclear_);
		for (const uint32_t ino : again) {
			auto w = watched_.find(ino);
			if (w != watched_.end() &&
			    ev_.clear(ino, w->second.first, w->second.second) < 0)
				unclear_.push_back(ino);
			guard_.restore_inode(ino,
					     [this](const cli::remote::socket_ref &s, int64_t snd,
						    int64_t rcv, const struct sockbuf_report &rep) {
						     restored(s, snd, rcv, rep);
					     });
		}
	}
	// Counted again only when the set moved: a walk over every guarded
	// socket at each tick was most of an idle daemon's CPU with events.
	if (guard_.generation() != counted_gen_ || procs_.size() != counted_procs_) {
		counted_gen_ = guard_.generation();
		counted_procs_ = procs_.size();
		std::map<std::pair<std::string, std::string>, double> by_service;
		for (const auto &[pid, n] : guard_.sockets_by_process()) {
			auto it = procs_.find(pid);
			if (it != procs_.end())
				by_service[{it->second.svc.comm, it->second.svc.unit}] += double(n);
		}
		metrics_.guarded(by_service);
		metrics_.processes(double(procs_.size()));
	}
}

} // namespace sockbuf::daemon
