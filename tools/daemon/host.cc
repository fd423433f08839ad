// SPDX-License-Identifier: MIT
#include "host.h"

#include "daemon_presence.h"
#include "floor_read.h"
#include "force_rights.h"
#include "read_file.h"

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <ctime>
#include <dirent.h>

namespace sockbuf::daemon
{

namespace
{

// The process's name and its systemd unit (the last component of its
// cgroup v2 path that ends in .service or .scope), for the metrics.
service service_of(pid_t pid)
{
	service s;
	const std::string proc = "/proc/" + std::to_string(pid);
	if (fileio::read_file((proc + "/comm").c_str(), &s.comm) == 0)
		while (!s.comm.empty() && s.comm.back() == '\n')
			s.comm.pop_back();
	std::string cg;
	if (fileio::read_file((proc + "/cgroup").c_str(), &cg) == 0) {
		const size_t at = cg.find("0::");
		if (at != std::string::npos) {
			std::string path = cg.substr(at + 3, cg.find('\n', at) - at - 3);
			while (!path.empty()) {
				const size_t slash = path.rfind('/');
				const std::string last = path.substr(slash + 1);
				if (last.size() > 8 &&
				    (last.ends_with(".service") || last.ends_with(".scope"))) {
					s.unit = last;
					break;
				}
				if (slash == std::string::npos)
					break;
				path.resize(slash);
			}
		}
	}
	// A process names itself: its name goes into labels and log lines
	// only made safe (no newline to forge a journal line, valid UTF-8).
	s.comm = clean(s.comm);
	s.unit = clean(s.unit);
	return s;
}

uint64_t now_us()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
}

} // namespace

host::host(const options &o, metrics &m)
    : opt_(o), metrics_(m), guard_(true, 0), own_netns_(presence::netns_of("/proc/self"))
{
	guard_.force_for([](pid_t pid) { return cli::run::program_may_force(pid) == 1; });
	if (o.events)
		ev_err_ = ev_.open();
	metrics_.events_up(ev_err_ == 0);
}

void host::scan_dir()
{
	DIR *d = opendir(registry::default_dir);
	if (!d)
		return;
	std::set<pid_t> present;
	while (dirent *e = readdir(d)) {
		int pid = 0;
		uint64_t start = 0;
		if (!registry::parse_file_name(e->d_name, &pid, &start))
			continue;
		if (registry::process_start_time(pid) != start)
			continue; // stale: its process is gone (or another has its pid)
		present.insert(pid_t(pid));
		watched &w = procs_[pid_t(pid)];
		if (w.start != start) {
			w = watched{};
			w.start = start;
			w.svc = service_of(pid_t(pid));
			counted_gen_ = ~uint64_t(0); // counted under its name at the next tick
		}
		// Another file under the same name: the process exec'd (the new
		// image makes its own table), and its count may equal the old
		// one's.  Read it whole, and the process's name again.
		if (w.file != uint64_t(e->d_ino)) {
			if (w.file) {
				w.svc = service_of(pid_t(pid));
				counted_gen_ = ~uint64_t(0);
			}
			w.file = uint64_t(e->d_ino);
			w.read = false;
		}
	}
	closedir(d);
	for (auto it = procs_.begin(); it != procs_.end();) {
		if (present.count(it->first)) {
			++it;
			continue;
		}
		guard_.sync_published(it->first, {}); // forgets its sockets
		set_changed_ = true;
		last_line_.erase(last_line_.lower_bound({it->first, INT_MIN}),
				 last_line_.upper_bound({it->first, INT_MAX}));
		it = procs_.erase(it);
	}
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

void host::refresh(pid_t pid, watched &w, uint64_t now_ms)
{
	const std::string proc = "/proc/" + std::to_string(pid);
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	if (w.read && !net_due) {
		// The header alone, owner and layout checked as for a whole read.
		registry::header_info hi;
		std::string why;
		const int ret = registry::read_header(pid, w.start, &hi, &why);
		if (ret == -ESRCH) {
			dir_dirty_ = true; // gone (killed: no inotify event): forgotten next tick
			return;
		}
		if (ret == 0 && hi.changes == w.changes && hi.changes != 0)
			return; // unchanged (0: a writer that never counts)
		if (now_ms < w.last_read_ms + opt_.reread_ms)
			return; // changed, read again soon
	}
	const uint64_t ns = presence::netns_of(proc);
	if (ns && own_netns_ && ns != own_netns_) {
		w.read = true; // looked at again when its table moves
		w.last_read_ms = now_ms;
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
	const int ret = registry::read_pid(pid, &t, &why);
	w.read = true;
	w.last_read_ms = now_ms;
	if (ret == -ESRCH || ret == -ENOENT) {
		dir_dirty_ = true; // gone: the next tick's scan forgets it
		return;
	}
	if (ret < 0) {
		refuse(pid, w, ret == -EPERM ? "owner" : (ret == -ESTALE ? "stale" : "contents"),
		       why);
		return;
	}
	metrics_.table_read();
	w.changes = t.changes;
	w.refused.clear();
	std::map<uint32_t, struct sockbuf_floor> floors;
	for (const registry::entry &e : t.entries)
		if (e.inode <= UINT32_MAX && (e.snd > 0 || e.rcv > 0))
			floors[uint32_t(e.inode)] = {e.snd, e.rcv};
	guard_.sync_published(pid, floors);
	set_changed_ = true;
}

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

void host::tick(uint64_t now_ms)
{
	lines_window(now_ms);
	const bool net_due = force_all_ || now_ms >= next_net_ms_;
	if (dir_dirty_ || net_due) {
		dir_dirty_ = false;
		scan_dir();
	}
	for (auto &[pid, w] : procs_)
		refresh(pid, w, now_ms);
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
		// were watched), at most every --interval, and the net's.
		if (net_due || (set_changed_ && now_ms >= next_pass_ms_)) {
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

void host::full_pass()
{
	const uint64_t t0 = cli::remote::monotonic_ms();
	const auto errors_before = guard_.stats().errors;
	guard_.pass([this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			   const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); });
	if (guard_.stats().errors > errors_before)
		metrics_.refusals({}, "error", double(guard_.stats().errors - errors_before));
	metrics_.pass(double(cli::remote::monotonic_ms() - t0) / 1000.0);
	if (ev_err_ == 0)
		sync_watch(); // the pass may have dropped closed sockets
}

void host::sync_watch()
{
	set_changed_ = false;
	std::map<uint32_t, std::pair<int, int>> now;
	// What a restore would raise to (the owner's reach where its limits
	// keep it short): a map floor above it would post a record at every
	// send and ACK that no restore can answer.
	for (const cli::remote::socket_ref &s : guard_.sockets()) {
		auto &f = now[s.inode];
		f.first = std::max(f.first, s.floor.snd ? s.want_snd() : 0);
		f.second = std::max(f.second, s.floor.rcv ? s.want_rcv() : 0);
	}
	for (auto it = watched_.begin(); it != watched_.end();) {
		if (now.count(it->first)) {
			++it;
			continue;
		}
		ev_.unwatch(it->first);
		it = watched_.erase(it);
	}
	for (const auto &[ino, f] : now) {
		auto it = watched_.find(ino);
		if (it != watched_.end() && it->second == f)
			continue;
		// Not in the map (full: -E2BIG, or no memory): the passes still
		// keep it, at the net's interval.
		if (ev_.watch(ino, f.first, f.second) == 0)
			watched_[ino] = f;
	}
}

void host::on_records()
{
	inos_.clear();
	posted_ns_.clear();
	if (ev_.drain(&inos_, &posted_ns_) < 0 && inos_.empty())
		return;
	const uint64_t lost = ev_.lost();
	const uint64_t lost_now = lost - lost_seen_;
	lost_seen_ = lost;
	metrics_.records(double(inos_.size()), double(lost_now));
	metrics_.event_wait_max(double(ev_.max_wait_ns()) / 1e9);
	const auto cb = [this](const cli::remote::socket_ref &s, int64_t snd, int64_t rcv,
			       const struct sockbuf_report &rep) { restored(s, snd, rcv, rep); };
	for (size_t i = 0; i < inos_.size(); i++) {
		const uint32_t ino = inos_[i];
		auto w = watched_.find(ino);
		if (w == watched_.end()) {
			ev_.unwatch(ino); // no longer the daemon's
			continue;
		}
		// The mark first, then the restore: a cut between the two posts
		// again (a harmless second look), where the other order would
		// leave a socket cut after the restore with no record at all.
		if (ev_.clear(ino, w->second.first, w->second.second) < 0)
			unclear_.push_back(ino);
		posted_now_ = i < posted_ns_.size() ? posted_ns_[i] : 0;
		const uint64_t errors = guard_.stats().errors;
		const bool guarded = guard_.restore_inode(ino, cb);
		posted_now_ = 0;
		const cli::remote::socket_ref *s = guarded ? guard_.find_inode(ino) : nullptr;
		if (!s || guard_.stats().errors != errors) {
			// Gone, or its restore failed (EPERM from pidfd_getfd and
			// the like): out of the map, so that it cannot post at every
			// send; passes look at it, and the next change of the set
			// puts it back.
			ev_.unwatch(ino);
			watched_.erase(w);
			continue;
		}
		// Restored short of its floor (the owner's limits): the map holds
		// what it can reach, not the floor it cannot.
		const std::pair<int, int> want = {s->floor.snd ? s->want_snd() : 0,
						  s->floor.rcv ? s->want_rcv() : 0};
		if (want != w->second && ev_.watch(ino, want.first, want.second) == 0)
			w->second = want;
	}
	if (lost_now)
		full_pass(); // a record had no room: look at everything
}

} // namespace sockbuf::daemon
