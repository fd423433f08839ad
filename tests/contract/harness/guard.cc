// SPDX-License-Identifier: MIT
#include "guard.h"

#include "clauses.h"
#include "clock.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

namespace sockbuf::contract
{

floor_guard::floor_guard(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us)
    : sockets_(sockets), t0_ns_(t0_ns), period_us_(period_us)
{
	// FORCE as the setup may have used it: floors past *mem_max then need
	// it to be restored (and to be accepted at all).
	id_ = sockbuf_guard_new(SOCKBUF_GUARD_ALLOW_FORCE);
	if (id_ < 0) {
		stats_.restore_errors++;
		stats_.events.push_back(fmt::format("sockbuf_guard_new: {}", std::strerror(-id_)));
		return;
	}
	for (const auto &s : *sockets_) {
		if (s.a != arm::lib_initial || s.r == role::listener || s.fd < 0 ||
		    (s.snd.floor == 0 && s.rcv.floor == 0))
			continue;
		sockbuf_floor fl = {s.snd.floor, s.rcv.floor};
		int ret = sockbuf_guard_add(id_, s.fd, &fl);
		if (ret < 0) {
			stats_.restore_errors++;
			if (stats_.events.size() < 20)
				stats_.events.push_back(fmt::format("{}: sockbuf_guard_add: {}",
								    s.name, std::strerror(-ret)));
		}
	}
}

floor_guard::~floor_guard()
{
	stop();
	if (id_ >= 0)
		sockbuf_guard_destroy(id_);
}

void floor_guard::note(const struct sockbuf_guard_report &rep)
{
	stats_.checks += uint64_t(rep.sockets);
	stats_.violations += uint64_t(rep.below);
	stats_.restores += uint64_t(rep.restored);
	stats_.restore_errors += uint64_t(rep.errors);
	if (rep.below && stats_.events.size() < 20)
		stats_.events.push_back(fmt::format(
		    "t={:.1f}ms pass: {} below the floor (deepest {} bytes), {} restored, {} "
		    "failed, {} via {}",
		    double(now_ns() - t0_ns_) / 1e6, rep.below, rep.worst_depth, rep.restored,
		    rep.errors, rep.sockets,
		    rep.diag == SOCKBUF_GUARD_SRC_DIAG	  ? "inet_diag"
		    : rep.diag == SOCKBUF_GUARD_SRC_URING ? "io_uring"
							  : "getsockopt"));
}

// The suite drives passes itself, on its observer thread at the profile's
// period, so that the guard runs with the same scheduling as the sampler
// that judges it; the pass itself is the library's.
void floor_guard::start()
{
	if (id_ < 0)
		return;
	stop_ = false;
	thread_ = std::thread([this] {
		make_observer_thread();
		int64_t next = now_ns();
		while (!stop_.load(std::memory_order_relaxed)) {
			int64_t begin = now_ns();
			pass();
			int64_t end = now_ns();
			// Real-time: always rest at least as long as the pass took.
			next = std::max(next + int64_t(period_us_) * 1000, end + (end - begin));
			sleep_until_ns(next);
		}
	});
}

void floor_guard::stop()
{
	stop_ = true;
	if (thread_.joinable())
		thread_.join();
}

void floor_guard::pass()
{
	if (id_ < 0)
		return;
	struct sockbuf_guard_report rep;
	int ret = sockbuf_guard_pass(id_, &rep);
	if (ret < 0) {
		stats_.restore_errors++;
		if (stats_.events.size() < 20)
			stats_.events.push_back(
			    fmt::format("sockbuf_guard_pass: {}", std::strerror(-ret)));
		return;
	}
	note(rep);
	stats_.max_pass_us = std::max(stats_.max_pass_us, rep.duration_ns / 1000);
}

int64_t floor_guard::bound_us() const
{
	return int64_t(period_us_) + stats_.max_pass_us + guard_sched_allowance_us;
}

} // namespace sockbuf::contract
