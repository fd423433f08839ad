// SPDX-License-Identifier: MIT
#include "guard.h"

#include "clock.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>
#include <sys/socket.h>

#include <algorithm>

namespace sockbuf::contract
{

floor_guard::floor_guard(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us)
    : sockets_(sockets), t0_ns_(t0_ns), period_us_(period_us)
{
}

floor_guard::~floor_guard()
{
	stop();
}

void floor_guard::start()
{
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
	for (const auto &s : *sockets_) {
		if (s.a != arm::lib_initial || s.r == role::listener || s.fd < 0)
			continue;
		sockbuf_floor fl = {s.snd.floor, s.rcv.floor};
		sockbuf_state st = {};
		stats_.checks++;
		int below = sockbuf_check_floor(s.fd, &fl, &st);
		if (below <= 0)
			continue;
		stats_.violations++;
		sockbuf_report rep = {};
		int ret = sockbuf_restore_floor(s.fd, &fl, 0, &rep);
		double t_ms = double(now_ns() - t0_ns_) / 1e6;
		if (ret < 0) {
			stats_.restore_errors++;
			if (stats_.events.size() < 20)
				stats_.events.push_back(fmt::format(
				    "{} t={:.1f}ms restore failed: {}", s.name, t_ms, -ret));
			continue;
		}
		stats_.restores++;
		int snd = -1, rcv = -1;
		socklen_t len = sizeof(int);
		getsockopt(s.fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
		len = sizeof(int);
		getsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
		// Autotuning may grow a buffer between the call and the read; a
		// report larger than what the kernel shows is the lie to catch.
		if ((fl.snd && rep.snd.effective > snd) || (fl.rcv && rep.rcv.effective > rcv))
			stats_.report_mismatch++;
		if (stats_.events.size() < 20)
			stats_.events.push_back(fmt::format(
			    "{} t={:.1f}ms below floor (snd {} rcv {}, floor {}/{}), restored "
			    "to {}/{}",
			    s.name, t_ms, st.sndbuf, st.rcvbuf, fl.snd, fl.rcv, snd, rcv));
	}
}

} // namespace sockbuf::contract
