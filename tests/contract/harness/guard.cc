// SPDX-License-Identifier: MIT
#include "guard.h"

#include "clauses.h"
#include "cycle_watch.h"
#include "prog_skips.h"

#include <pthread.h>
#include <sockbuf/sockbuf.h>

#include <fmt/core.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

namespace sockbuf::contract
{

void assign_drivers(std::vector<socket_record> *sockets, guard_driver first, bool with_daemon)
{
	static_assert(int(guard_driver::daemon) == guard_driver_count);
	const int drivers = guard_driver_count + (with_daemon ? 1 : 0);
	std::map<int, guard_driver> of_conn;
	for (auto &s : *sockets) {
		if (s.a == arm::lib_reserve)
			s.driver = guard_driver::events;
		if (s.a != arm::lib_initial || s.conn < 0)
			continue;
		auto it = of_conn.find(s.conn);
		if (it == of_conn.end()) {
			int k = (int(of_conn.size()) + int(first)) % drivers;
			it = of_conn.emplace(s.conn, guard_driver(k)).first;
		}
		s.driver = it->second;
	}
}

floor_guard::floor_guard(std::vector<socket_record> *sockets, arm a, guard_driver d,
			 uint32_t interval_us)
    : arm_(a), driver_(d), interval_us_(interval_us)
{
	// FORCE as the setup may have used it: floors past *mem_max then need
	// it to be restored (and to be accepted at all).
	unsigned flags = SOCKBUF_GUARD_ALLOW_FORCE;
	if (d == guard_driver::events)
		flags |= SOCKBUF_GUARD_EVENTS;
	if (a == arm::lib_reserve)
		flags |= SOCKBUF_GUARD_RESERVE_MEM;
	// The programs it loads are the kernel's list's new ids (nothing
	// else loads programs while the scenario builds its guards).
	const std::set<uint32_t> ids_before =
	    d == guard_driver::events ? bpf_program_ids() : std::set<uint32_t>{};
	id_ = sockbuf_guard_new(flags);
	if (id_ >= 0 && d == guard_driver::events) {
		prog_why_.clear();
		prog_fds_ = open_new_programs(ids_before, bpf_program_ids(), &prog_why_);
	}
	if (id_ < 0) {
		note_error("sockbuf_guard_new", id_);
		return;
	}
	// Reserve mode in its default configuration: the safety net at the
	// library's default interval, as a user gets it.
	for (const auto &s : *sockets) {
		if (s.a != a || s.driver != d || s.r == role::listener || s.fd < 0 ||
		    (s.snd.floor == 0 && s.rcv.floor == 0))
			continue;
		sockbuf_floor fl = {s.snd.floor, s.rcv.floor};
		int ret = sockbuf_guard_add(id_, s.fd, &fl);
		if (ret < 0)
			note_error(fmt::format("{}: sockbuf_guard_add", s.name).c_str(), ret);
		else
			sockets_++;
	}
}

floor_guard::~floor_guard()
{
	stop();
	if (id_ >= 0)
		sockbuf_guard_destroy(id_); // closes the timerfd
	if (stop_fd_ >= 0)
		close(stop_fd_);
	for (const int fd : prog_fds_)
		close(fd);
}

void floor_guard::note_error(const char *call, int err)
{
	errors_++;
	if (events_.size() < 20)
		events_.push_back(
		    fmt::format("{} ({}): {}", call, driver_name(driver_), std::strerror(-err)));
}

void floor_guard::start()
{
	if (id_ < 0 || started_)
		return;
	const std::set<int> before = task_ids();
	if (driver_ != guard_driver::timerfd) {
		int ret = sockbuf_guard_start(id_, interval_us_);
		if (ret < 0)
			note_error("sockbuf_guard_start", ret);
		started_ = ret == 0;
		if (started_)
			tid_ = new_thread(before, task_ids(), "sockbuf-guard");
		return;
	}
	timer_fd_ = sockbuf_guard_timerfd(id_, interval_us_);
	if (timer_fd_ < 0) {
		note_error("sockbuf_guard_timerfd", timer_fd_);
		return;
	}
	stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (stop_fd_ < 0) {
		note_error("eventfd", -errno);
		return;
	}
	loop_ = std::thread([this] {
		pthread_setname_np(pthread_self(), "app-timerfd");
		event_loop();
	});
	started_ = true;
	tid_ = new_thread(before, task_ids(), "app-timerfd");
}

// What an application with an event loop writes: wait for the guard's
// timer (beside its own fds, here only the stop fd) and pass when it
// fires.  Bounded: stop() makes stop_fd_ readable, and poll() wakes at
// least once a second to look.
void floor_guard::event_loop()
{
	for (;;) {
		pollfd p[2] = {{timer_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
		int n = poll(p, 2, 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			note_error("poll", -errno);
			return;
		}
		if (p[1].revents)
			return;
		if (p[0].revents & POLLIN) {
			int ret = sockbuf_guard_pass(id_, nullptr); // reads the timerfd
			if (ret < 0)
				note_error("sockbuf_guard_pass", ret);
		}
	}
}

void floor_guard::stop()
{
	if (!started_)
		return;
	started_ = false;
	if (driver_ != guard_driver::timerfd) {
		int ret = sockbuf_guard_stop(id_);
		if (ret < 0)
			note_error("sockbuf_guard_stop", ret);
		return;
	}
	uint64_t one = 1;
	if (write(stop_fd_, &one, sizeof(one)) != sizeof(one))
		note_error("eventfd write", -errno);
	if (loop_.joinable())
		loop_.join();
}

void floor_guard::last_pass()
{
	if (id_ < 0 || sockets_ == 0)
		return;
	int ret = sockbuf_guard_pass(id_, nullptr);
	if (ret < 0)
		note_error("sockbuf_guard_pass", ret);
}

guard_stats floor_guard::stats(const pass_cost &cost) const
{
	guard_stats g;
	g.driver = driver_name(driver_);
	g.a = arm_;
	g.sockets = sockets_;
	g.interval_us = interval_us_;
	g.restore_errors = errors_;
	g.events = events_;
	sockbuf_guard_totals t = {};
	if (id_ >= 0 && sockbuf_guard_stats(id_, &t) == 0) {
		g.passes = t.passes;
		g.violations = t.below;
		g.restores = t.restored;
		g.restore_errors += t.errors;
		g.max_pass_us = t.max_pass_ns / 1000;
		g.max_late_us = t.max_late_us;
		g.pass_total_us = t.total_pass_ns / 1000;
		g.source = t.passes ? t.source : -1;
	}
	// With events on, passes run at the safety net's interval: that is
	// the bound of a cut the programs do not watch.
	uint32_t interval = interval_us_;
	sockbuf_guard_event_totals e = {};
	if (driver_ == guard_driver::events && id_ >= 0 &&
	    sockbuf_guard_event_stats(id_, &e) == 0) {
		g.events_err = e.err;
		g.attached = e.attached;
		g.records = e.records;
		g.restored_events = e.restored_events;
		g.restored_passes = e.restored_passes;
		g.dropped = e.dropped;
		g.not_below = e.not_below;
		g.clear_failed = e.clear_failed;
		g.max_wait_us = int64_t(e.max_wait_ns / 1000);
		for (size_t k = 0; k < 4; k++)
			g.records_at[k] = e.records_at[k];
		g.round_total_us = int64_t(e.total_round_ns / 1000);
		if (e.err == 0 && e.net_interval_us > interval)
			interval = e.net_interval_us;
	}
	g.interval_us = interval;
	// The library's thread rests as long as a pass took; the timerfd
	// loop here passes again as soon as the timer has fired.
	g.bound_us = repair_bound_us(interval, sockets_, driver_ != guard_driver::timerfd, cost);
	g.tid = tid_;
	return g;
}

} // namespace sockbuf::contract
