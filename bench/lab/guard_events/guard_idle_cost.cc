// SPDX-License-Identifier: MIT
// What a floor guard costs while nothing is cut: N established loopback
// connections (both ends in this process, no traffic), the client ends
// guarded at their own send buffer size, and the library's thread left to
// run for a while, in rounds that alternate the drivers in one run -
//   poll:        passes every 10 ms (sockbuf_guard_start(g, 10000));
//   bpf:         the same, each pass one BPF iterator (SOCKBUF_GUARD_BPF);
//   events:      SOCKBUF_GUARD_EVENTS, passes only as the safety net
//                (the library's default, SOCKBUF_GUARD_NET_DEFAULT_US);
//   events+bpf:  the same, the safety net's pass a BPF iterator;
//   events@1s, events@5s, events@20s, events+bpf@20s: the safety net
//                every 1, 5 or 20 s (sockbuf_guard_set_net_interval()): where the
//                cost with nothing cut goes as the net is stretched;
//   poll@1s, poll@20s, poll@60s, poll@120s, bpf@1s, bpf@20s, bpf@60s,
//                bpf@120s: polling at the safety net's intervals, the
//                same passes without the programs: what the net costs
//                where fexit is refused (natively here).
// Per round: the process's CPU time over the window as a share of one
// core (getrusage: every thread, user and system; the main thread only
// waits; the window closes before the guard is stopped, and the stop's
// CPU is reported on its own), and the guard's own totals (passes, their summed wall time,
// restores: 0 expected, nothing is cut).  The window opens when the
// first pass (made as the driver starts) has ended: what a program that
// runs for hours pays; that first pass is reported on its own.  An arm whose guard cannot have
// what it asks for (events or BPF refused: no privilege, no BTF, no
// fexit) is reported with the reason and left out, never measured as
// something else.
//
//   guard_idle_cost [seconds-per-round=60] [rounds=3] [connections=10000]
//   [arms=poll,bpf,events,events+bpf]
#include "lab_stats.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace
{

using lab::cpu_s;
using lab::median;

struct arm {
	const char *name;
	unsigned int flags;
	// With events: the safety net's interval; without: the polling
	// interval.  0: the safety net's default, polling every 10 ms.
	unsigned int net_us;
};

const arm all_arms[] = {{"poll", 0, 0},
			{"bpf", SOCKBUF_GUARD_BPF, 0},
			{"events", SOCKBUF_GUARD_EVENTS, 0},
			{"events+bpf", SOCKBUF_GUARD_EVENTS | SOCKBUF_GUARD_BPF, 0},
			{"events@1s", SOCKBUF_GUARD_EVENTS, 1'000'000},
			{"events@5s", SOCKBUF_GUARD_EVENTS, 5'000'000},
			{"events@20s", SOCKBUF_GUARD_EVENTS, 20'000'000},
			{"events+bpf@20s", SOCKBUF_GUARD_EVENTS | SOCKBUF_GUARD_BPF, 20'000'000},
			{"poll@1s", 0, 1'000'000},
			{"poll@20s", 0, 20'000'000},
			{"poll@60s", 0, 60'000'000},
			{"bpf@1s", SOCKBUF_GUARD_BPF, 1'000'000},
			{"bpf@20s", SOCKBUF_GUARD_BPF, 20'000'000},
			{"bpf@60s", SOCKBUF_GUARD_BPF, 60'000'000},
			{"poll@120s", 0, 120'000'000},
			{"bpf@120s", SOCKBUF_GUARD_BPF, 120'000'000}};

// Room for 2 * @n sockets and the listener (root may raise the hard limit).
void raise_nofile(int n)
{
	struct rlimit rl = {};
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_max = std::max<rlim_t>(rl.rlim_max, rlim_t(2 * n) + 1024);
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

// @n established connections over loopback; the client ends in @clients,
// the accepted ends in @servers.  Prints progress every 1000.
bool connect_all(int n, std::vector<int> *clients, std::vector<int> *servers)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	if (l < 0 || bind(l, (sockaddr *)&sa, sizeof(sa)) || listen(l, 128) ||
	    getsockname(l, (sockaddr *)&sa, &len)) {
		fprintf(stderr, "listener: %s\n", strerror(errno));
		return false;
	}
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c < 0 || connect(c, (sockaddr *)&sa, sizeof(sa)) != 0) {
			fprintf(stderr, "connection %d: %s\n", i, strerror(errno));
			return false;
		}
		int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
		if (s < 0) {
			fprintf(stderr, "accept %d: %s\n", i, strerror(errno));
			return false;
		}
		clients->push_back(c);
		servers->push_back(s);
		if ((i + 1) % 1000 == 0) {
			printf("connected %d of %d\n", i + 1, n);
			fflush(stdout);
		}
	}
	close(l);
	return true;
}

// Waits out @secs without using the CPU (the window measured): one sleep
// to an absolute deadline, repeated only if a signal ends it early (a
// wake-up a second costs about 0.3 ms of CPU each in a TCG guest, as much
// as the guard's whole idle share there).
void idle_for(double secs)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	const double end = double(until.tv_sec) + double(until.tv_nsec) / 1e9 + secs;
	until.tv_sec = time_t(end);
	until.tv_nsec = long((end - double(until.tv_sec)) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
	}
}

// Why @g does not have what @flags asked for, or "" when it does.
std::string refused(int g, unsigned int flags)
{
	if (flags & SOCKBUF_GUARD_EVENTS) {
		struct sockbuf_guard_event_totals ev = {};
		if (sockbuf_guard_event_stats(g, &ev) == 0 && ev.err != 0)
			return std::string("events: ") + strerror(-ev.err);
	}
	if (flags & SOCKBUF_GUARD_BPF) {
		// The iterator is tried at the first pass.
		struct sockbuf_guard_totals t = {};
		sockbuf_guard_pass(g, nullptr);
		if (sockbuf_guard_stats(g, &t) == 0 &&
		    (t.bpf_err != 0 || t.source != SOCKBUF_GUARD_SRC_BPF))
			return std::string("BPF pass: ") +
			       strerror(t.bpf_err ? -t.bpf_err : EOPNOTSUPP);
	}
	return "";
}

} // namespace

int main(int argc, char **argv)
{
	const double secs = argc > 1 ? atof(argv[1]) : 60.0;
	const int rounds = argc > 2 ? atoi(argv[2]) : 3;
	const int n = argc > 3 ? atoi(argv[3]) : 10000;
	const std::string want = argc > 4 ? argv[4] : "poll,bpf,events,events+bpf";
	if (secs <= 0 || secs > 3600 || rounds < 1 || rounds > 100 || n < 1 || n > 100000) {
		fprintf(stderr, "usage: guard_idle_cost [seconds 0-3600] [rounds 1-100] "
				"[connections 1-100000] [arms]\n");
		return 64;
	}
	std::vector<arm> arms;
	for (const arm &a : all_arms)
		if (("," + want + ",").find("," + std::string(a.name) + ",") != std::string::npos)
			arms.push_back(a);
	if (arms.empty()) {
		std::string known;
		for (const arm &a : all_arms)
			known += (known.empty() ? "" : ", ") + std::string(a.name);
		fprintf(stderr, "no known arm in '%s' (%s)\n", want.c_str(), known.c_str());
		return 64;
	}
	raise_nofile(n);
	std::vector<int> clients, servers;
	if (!connect_all(n, &clients, &servers))
		return 1;
	std::vector<std::vector<double>> share(arms.size());
	std::vector<std::string> why(arms.size());
	for (int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < arms.size(); k++) {
			if (!why[k].empty())
				continue;
			const int g = sockbuf_guard_new(arms[k].flags);
			if (g < 0) {
				fprintf(stderr, "sockbuf_guard_new: %s\n", strerror(-g));
				return 2;
			}
			for (int c : clients) {
				int have = 0;
				socklen_t l = sizeof(have);
				getsockopt(c, SOL_SOCKET, SO_SNDBUF, &have, &l);
				const struct sockbuf_floor fl = {std::min(have, 16384), 0};
				const int ret = sockbuf_guard_add(g, c, &fl);
				if (ret != 0) {
					fprintf(stderr, "sockbuf_guard_add: %s\n", strerror(-ret));
					return 3;
				}
			}
			const bool events = (arms[k].flags & SOCKBUF_GUARD_EVENTS) != 0;
			const unsigned int poll_us =
			    !events && arms[k].net_us != 0 ? arms[k].net_us : 10'000;
			if (events && arms[k].net_us != 0 &&
			    sockbuf_guard_set_net_interval(g, arms[k].net_us) != 0) {
				fprintf(stderr, "sockbuf_guard_set_net_interval: rejected\n");
				return 2;
			}
			why[k] = refused(g, arms[k].flags);
			if (!why[k].empty()) {
				printf("arm %s left out: %s\n", arms[k].name, why[k].c_str());
				sockbuf_guard_destroy(g);
				continue;
			}
			struct sockbuf_guard_totals t0 = {}, t1 = {};
			struct sockbuf_guard_event_totals e0 = {}, e1 = {};
			sockbuf_guard_stats(g, &t0);
			sockbuf_guard_event_stats(g, &e0);
			const double s0 = cpu_s();
			const int ret = sockbuf_guard_start(g, poll_us);
			if (ret != 0) {
				fprintf(stderr, "sockbuf_guard_start: %s\n", strerror(-ret));
				return 2;
			}
			// The start's pass (due at once) ends the start; the window
			// opens after it (bounded: 60 s).
			const auto start_by =
			    std::chrono::steady_clock::now() + std::chrono::seconds(60);
			struct sockbuf_guard_totals first = t0;
			while (first.passes == t0.passes &&
			       std::chrono::steady_clock::now() < start_by) {
				poll(nullptr, 0, 1);
				sockbuf_guard_stats(g, &first);
			}
			const double c0 = cpu_s();
			const double m0 = cpu_s(RUSAGE_THREAD); // this thread: the bench's own
			const auto w0 = std::chrono::steady_clock::now();
			const double start_ms = 1e3 * (c0 - s0);
			t0 = first;
			idle_for(secs);
			struct sockbuf_guard_totals running = {};
			sockbuf_guard_stats(g, &running); // the driver's interval
			// The window closes before the stop: stopping (the thread's
			// join; with events, detaching the programs and freeing their
			// map) is paid once, reported on its own.
			const double wall =
			    std::chrono::duration<double>(std::chrono::steady_clock::now() - w0)
				.count();
			const double cpu = cpu_s() - c0;
			const double main_ms = 1e3 * (cpu_s(RUSAGE_THREAD) - m0);
			const double c_stop = cpu_s();
			sockbuf_guard_stop(g);
			const double stop_ms = 1e3 * (cpu_s() - c_stop);
			sockbuf_guard_stats(g, &t1);
			sockbuf_guard_event_stats(g, &e1);
			sockbuf_guard_destroy(g);
			const uint64_t passes = t1.passes - t0.passes;
			share[k].push_back(cpu / wall);
			printf("round %d %-14s %8.4f %% of a core  %6llu passes, %.2f ms each, "
			       "%llu restored, %llu records, interval %u us; start %.1f ms CPU, "
			       "stop %.1f ms CPU, bench's own thread %.1f ms in the window\n",
			       r, arms[k].name, 100 * cpu / wall, (unsigned long long)passes,
			       passes ? double(t1.total_pass_ns - t0.total_pass_ns) / 1e6 /
					    double(passes)
				      : 0.0,
			       (unsigned long long)(t1.restored - t0.restored),
			       (unsigned long long)(e1.records - e0.records), running.interval_us,
			       start_ms, stop_ms, main_ms);
			fflush(stdout);
		}
	}
	for (size_t k = 0; k < arms.size(); k++) {
		if (share[k].empty())
			continue;
		const auto [lo, hi] = std::minmax_element(share[k].begin(), share[k].end());
		printf("median %-14s %8.4f %% of a core (%.4f-%.4f, %zu rounds; %d guarded "
		       "established sockets, %.0f s each)\n",
		       arms[k].name, 100 * median(share[k]), 100 * *lo, 100 * *hi, share[k].size(),
		       n, secs);
	}
	for (int f : clients)
		close(f);
	for (int f : servers)
		close(f);
	return 0;
}
