// SPDX-License-Identifier: MIT
#include "show_watch.h"

#include "show_collect.h"
#include "show_diagnose.h"
#include "show_trace.h"

#include <sockbuf/sockbuf.h>

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <poll.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

namespace sockbuf::cli::show
{

namespace
{

const char *dir_name(int dir)
{
	return dir == SOCKBUF_SND ? "snd" : "rcv";
}

int64_t now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// What the last sample saw of one buffer with a floor.
struct tracked {
	int fd = -1;
	int64_t size = -1;
	bool below = false;
	int samples_below = 0;
	int64_t first_below_ms = 0, last_ok_ms = -1;
	bool seen = false; // in the current sample
};

using key = std::pair<uint32_t, int>; // inode, direction

// "  fd 5 ESTABLISHED  snd 4608/131072  rcv 131072/131072": one line a
// socket with a floor, then one a buffer below it.
void print_socket(const shown_socket &s, const std::map<key, tracked> &state, int64_t t)
{
	std::string line = fmt::format("  fd {} {}", s.fd, diag::state_name(s.info.state));
	std::string below;
	for (int dir : {SOCKBUF_SND, SOCKBUF_RCV}) {
		const int floor = dir == SOCKBUF_SND ? s.floor_snd : s.floor_rcv;
		if (floor <= 0)
			continue;
		const int64_t size = dir == SOCKBUF_SND ? s.info.sndbuf : s.info.rcvbuf;
		line += fmt::format("  {} {}/{}", dir_name(dir), size, floor);
		const int depth = floor_depth(s, dir);
		auto it = state.find({s.info.inode, dir});
		if (depth == 0 || it == state.end())
			continue;
		const tracked &tr = it->second;
		below += fmt::format("    {} BELOW by {}", dir_name(dir), depth);
		if (tr.samples_below <= 1)
			below += " (new)\n";
		else
			below += fmt::format(" for {} ms ({} samples)\n", t - tr.first_below_ms,
					     tr.samples_below);
	}
	fmt::print("{}\n{}", line, below);
}

} // namespace

void report_drop(const drop_event &e, std::FILE *to)
{
	std::string before = e.before >= 0 ? fmt::format(" (was {})", e.before) : "";
	fmt::print(to, "  DROP fd {} {} {} under floor {} by {}{}\n", e.fd, dir_name(e.dir), e.size,
		   e.floor, e.floor - e.size, before);
}

void report_recovery(const recovery_event &e, std::FILE *to)
{
	fmt::print(to, "  {} fd {} {} after {} ms below ({} sample{})\n",
		   e.closed ? "CLOSED" : "BACK", e.fd, dir_name(e.dir),
		   e.back_ms - e.first_below_ms, e.samples, e.samples == 1 ? "" : "s");
}

int watch(int pid, int interval_ms, long count, int trace)
{
	watch_tracer tracer;
	if (tracer.start(trace_mode(trace), stdout) < 0)
		return 1;
	int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
	const int64_t t0 = now_ms();
	std::map<key, tracked> state;
	bool any_below = false;
	struct counts {
		size_t sockets = 0;
		int with_floor = 0, below = 0;
		bool operator==(const counts &o) const
		{
			return sockets == o.sockets && with_floor == o.with_floor &&
			       below == o.below;
		}
	} last;
	struct {
		long samples = 0;
		size_t drops = 0, back = 0, closed = 0;
	} sum;
	std::string end_why = count ? "count reached" : "";
	for (long n = 0; count == 0 || n < count; n++) {
		if (n > 0) {
			// Wait one interval, or less if the process exits.
			struct pollfd p = {pidfd, POLLIN, 0};
			if (pidfd >= 0 && poll(&p, 1, interval_ms) > 0) {
				end_why = fmt::format("process {} exited", pid);
				break;
			}
			if (pidfd < 0)
				poll(nullptr, 0, interval_ms);
		}
		collection c;
		std::string why;
		if (collect_pid(pid, &c, &why) < 0) {
			if (n == 0) {
				fmt::print(stderr, "sockbuf show: {}\n", why);
				if (pidfd >= 0)
					close(pidfd);
				return 1;
			}
			end_why = fmt::format("process {} gone: {}", pid, why);
			break;
		}
		const int64_t t = now_ms() - t0;
		tracer.collect();
		int with_floor = 0, below = 0;
		for (auto &[k, tr] : state)
			tr.seen = false;
		std::vector<drop_event> drops;
		std::vector<recovery_event> backs;
		for (const auto &s : c.sockets) {
			if (s.floor_snd <= 0 && s.floor_rcv <= 0)
				continue;
			with_floor++;
			below += below_floor(s) ? 1 : 0;
			for (int dir : {SOCKBUF_SND, SOCKBUF_RCV}) {
				const int floor = dir == SOCKBUF_SND ? s.floor_snd : s.floor_rcv;
				if (floor <= 0)
					continue;
				tracked &tr = state[{s.info.inode, dir}];
				const int64_t size =
				    dir == SOCKBUF_SND ? s.info.sndbuf : s.info.rcvbuf;
				const bool now_below = floor_depth(s, dir) > 0;
				if (now_below && !tr.below) {
					drops.push_back({pid, s.fd, s.info.inode, dir, floor, size,
							 tr.size, t, tr.last_ok_ms,
							 s.info.local.port, s.info.remote.port});
					tr.first_below_ms = t;
					tr.samples_below = 0;
				} else if (!now_below && tr.below) {
					backs.push_back({pid, s.fd, s.info.inode, dir,
							 tr.samples_below, tr.first_below_ms, t,
							 false});
				}
				if (now_below)
					tr.samples_below++;
				else
					tr.last_ok_ms = t;
				tr.below = now_below;
				tr.fd = s.fd;
				tr.size = size;
				tr.seen = true;
			}
		}
		any_below = any_below || below > 0;
		for (auto it = state.begin(); it != state.end();) {
			if (it->second.seen) {
				++it;
				continue;
			}
			if (it->second.below)
				backs.push_back({pid, it->second.fd, it->first.first,
						 it->first.second, it->second.samples_below,
						 it->second.first_below_ms, t, true});
			it = state.erase(it);
		}
		sum.samples++;
		sum.drops += drops.size();
		for (const auto &b : backs)
			(b.closed ? sum.closed : sum.back)++;
		// Only what changed: the first sample, a count that moved, a drop
		// or a return; the sockets below their floor then.
		const counts now{c.sockets.size(), with_floor, below};
		if (n > 0 && now == last && drops.empty() && backs.empty())
			continue;
		last = now;
		fmt::print("[+{}.{:03}s] pid {}: {} socket{}, {} with a floor, {} below\n",
			   t / 1000, t % 1000, pid, now.sockets, now.sockets == 1 ? "" : "s",
			   with_floor, below);
		for (const auto &b : backs)
			report_recovery(b, stdout);
		for (const auto &d : drops) {
			report_drop(d, stdout);
			// Sample times on the monotonic clock, as the events'.
			const int64_t ms_ns = 1'000'000;
			tracer.explain(d, d.last_ok_ms < 0 ? -1 : (t0 + d.last_ok_ms) * ms_ns,
				       (t0 + d.seen_ms) * ms_ns, stdout);
		}
		for (const auto &s : c.sockets)
			if (below_floor(s))
				print_socket(s, state, t);
		std::fflush(stdout);
	}
	if (pidfd >= 0)
		close(pidfd);
	const int64_t t = now_ms() - t0;
	size_t still = 0;
	for (const auto &[k, tr] : state)
		still += tr.below;
	// Two lines: each fits 80 columns.
	fmt::print("watch ended ({}): {} sample{} in {}.{:03} s\n"
		   "  {} drop{} below a floor, {} back, {} closed while below, {} below now\n",
		   end_why, sum.samples, sum.samples == 1 ? "" : "s", t / 1000, t % 1000, sum.drops,
		   sum.drops == 1 ? "" : "s", sum.back, sum.closed, still);
	for (const auto &[k, tr] : state)
		if (tr.below)
			fmt::print("  still BELOW: fd {} {} for {} ms ({} sample{})\n", tr.fd,
				   dir_name(k.second), t - tr.first_below_ms, tr.samples_below,
				   tr.samples_below == 1 ? "" : "s");
	return any_below ? 3 : 0;
}

} // namespace sockbuf::cli::show
