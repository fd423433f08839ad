// SPDX-License-Identifier: MIT
// What the guard's event programs (SOCKBUF_GUARD_EVENTS) cost a bulk
// transfer: a loopback TCP stream between two threads of this process,
// run in rounds that alternate three arms in one run -
//   off:   no program attached;
//   on-0:  a guard with events, no socket guarded (every call of the two
//          kernel functions finds nothing in the map);
//   on-N:  a guard with events and N idle guarded sockets in the map
//          (default 10,000; none of them carries the stream).
// Per round: throughput and the process's CPU time per GB (getrusage:
// both threads, user and system, so the programs' time is in it).  The
// guard's thread is not started: nothing is ever cut, so this is the
// price of the programs alone.  Root (or CAP_BPF+CAP_PERFMON) needed.
//
// With --bpf-stats (a kernel-wide switch, BPF_ENABLE_STATS: for a qemu
// guest, not a shared machine) each "on" round also prints the programs'
// own run count and time (run_cnt, run_time_ns of on_mem_raise,
// on_check_space, on_frag_refill and on_alloc_skb, found by name among
// the loaded programs) and their
// share of the round's CPU time: a figure that does not drown in the
// noise of a busy host the way an A/B of throughput does.  It leaves out
// the trampoline's own entry and exit.
//
// With --sets K1,K2,... the arms are program sets instead: K guards with
// events in this process, each loading its own set (as K processes with
// a guard each would; sockbufd loads one for the host), the idle sockets
// shared out among them; "off" first.  The kernel attaches about 38
// programs to one function (BPF_MAX_TRAMP_LINKS): a set past that fails
// (E2BIG), and the arm reports how many loaded.
//
//   guard_events_cost [--bpf-stats] [--sets K,...] [seconds-per-round=2] [rounds=6] [sockets=10000]
#include "lab_stats.h"

#include <sockbuf/sockbuf.h>

#include <bpf/bpf.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace
{

using lab::cpu_s;
using lab::median;

struct result {
	double gbit_s, cpu_s_per_gb;
};

// One bulk transfer of @secs seconds over a fresh loopback connection.
bool transfer(double secs, result *out)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {};
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(sa);
	if (l < 0 || bind(l, (sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (sockaddr *)&sa, &len))
		return false;
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (sockaddr *)&sa, sizeof(sa)))
		return false;
	int s = accept(l, nullptr, nullptr);
	close(l);
	if (s < 0)
		return false;
	std::atomic<uint64_t> got{0};
	std::thread rx([&] {
		std::vector<char> buf(1 << 18);
		for (;;) {
			ssize_t r = recv(s, buf.data(), buf.size(), 0);
			if (r <= 0)
				break;
			got.fetch_add(uint64_t(r), std::memory_order_relaxed);
		}
	});
	std::vector<char> buf(1 << 17, 'x');
	const double c0 = cpu_s();
	const auto t0 = std::chrono::steady_clock::now();
	const auto end = t0 + std::chrono::duration<double>(secs);
	const uint64_t g0 = got.load();
	while (std::chrono::steady_clock::now() < end)
		if (send(c, buf.data(), buf.size(), 0) < 0)
			break;
	const uint64_t bytes = got.load() - g0;
	const double wall =
	    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	const double cpu = cpu_s() - c0;
	shutdown(c, SHUT_WR);
	rx.join();
	close(c);
	close(s);
	out->gbit_s = double(bytes) * 8 / wall / 1e9;
	out->cpu_s_per_gb = cpu / (double(bytes) / 1e9);
	return true;
}

// The event programs' summed run count and time, from the kernel's
// statistics (zero unless they are enabled).
void prog_stats(uint64_t *cnt, uint64_t *ns)
{
	*cnt = *ns = 0;
	uint32_t id = 0;
	while (bpf_prog_get_next_id(id, &id) == 0) {
		int f = bpf_prog_get_fd_by_id(id);
		if (f < 0)
			continue;
		struct bpf_prog_info info;
		memset(&info, 0, sizeof(info));
		uint32_t len = sizeof(info);
		if (bpf_obj_get_info_by_fd(f, &info, &len) == 0 &&
		    (strcmp(info.name, "on_mem_raise") == 0 ||
		     strcmp(info.name, "on_check_space") == 0 ||
		     strcmp(info.name, "on_frag_refill") == 0 ||
		     strcmp(info.name, "on_alloc_skb") == 0)) {
			*cnt += info.run_cnt;
			*ns += info.run_time_ns;
		}
		close(f);
	}
}

// --sets: "off", then per count K, K guards with events (K program sets)
// sharing the idle sockets.
int sets_arms(const std::vector<int> &sets, const std::vector<int> &idle, double secs, int rounds)
{
	const size_t arms = sets.size() + 1;
	std::vector<std::vector<double>> gbit(arms), cpu(arms);
	std::vector<int> loaded(arms, 0), first_err(arms, 0);
	for (int r = 0; r < rounds; r++) {
		for (size_t arm = 0; arm < arms; arm++) {
			const int k = arm == 0 ? 0 : sets[arm - 1];
			std::vector<int> guards;
			int err = 0;
			for (int j = 0; j < k; j++) {
				const int g = sockbuf_guard_new(SOCKBUF_GUARD_EVENTS);
				struct sockbuf_guard_event_totals ev = {};
				if (g >= 0)
					sockbuf_guard_event_stats(g, &ev);
				if (g < 0 || ev.err != 0) {
					err = g < 0 ? g : ev.err;
					if (g >= 0)
						sockbuf_guard_destroy(g);
					break;
				}
				guards.push_back(g);
			}
			const struct sockbuf_floor fl = {4096, 0};
			for (size_t i = 0; !guards.empty() && i < idle.size(); i++)
				if (sockbuf_guard_add(guards[i % guards.size()], idle[i], &fl) !=
				    0) {
					fprintf(stderr, "add failed\n");
					return 3;
				}
			loaded[arm] = int(guards.size());
			first_err[arm] = err;
			result res;
			const bool ok = transfer(secs, &res);
			for (int g : guards)
				sockbuf_guard_destroy(g);
			if (!ok) {
				fprintf(stderr, "transfer: %s\n", strerror(errno));
				return 4;
			}
			gbit[arm].push_back(res.gbit_s);
			cpu[arm].push_back(res.cpu_s_per_gb);
			printf("round %d sets=%-3d (loaded %d%s%s) %6.2f Gbit/s %6.3f CPU-s/GB\n",
			       r, k, loaded[arm], err ? ", then " : "",
			       err ? strerrorname_np(-err) : "", res.gbit_s, res.cpu_s_per_gb);
			fflush(stdout);
		}
	}
	for (size_t arm = 0; arm < arms; arm++)
		printf(
		    "median sets=%-3d loaded %-3d %6.2f Gbit/s %6.3f CPU-s/GB (%+.1f %% CPU/GB vs "
		    "off; %zu idle sockets shared)\n",
		    arm == 0 ? 0 : sets[arm - 1], loaded[arm], median(gbit[arm]), median(cpu[arm]),
		    100 * (median(cpu[arm]) / median(cpu[0]) - 1), idle.size());
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	bool stats = false;
	if (argc > 1 && strcmp(argv[1], "--bpf-stats") == 0) {
		stats = true;
		argv++;
		argc--;
	}
	std::vector<int> sets;
	if (argc > 2 && strcmp(argv[1], "--sets") == 0) {
		for (const char *p = argv[2]; *p;) {
			char *end = nullptr;
			const long k = strtol(p, &end, 10);
			if (end == p || k < 1 || k > 256) {
				fprintf(stderr, "--sets wants counts 1-256, comma-separated\n");
				return 2;
			}
			sets.push_back(int(k));
			p = *end == ',' ? end + 1 : end;
		}
		argv += 2;
		argc -= 2;
	}
	const double secs = argc > 1 ? atof(argv[1]) : 2.0;
	const int rounds = argc > 2 ? atoi(argv[2]) : 6;
	const int n = argc > 3 ? atoi(argv[3]) : 10000;
	if (stats && bpf_enable_stats(BPF_STATS_RUN_TIME) < 0) {
		fprintf(stderr, "BPF_ENABLE_STATS: %s\n", strerror(errno));
		return 5;
	}
	std::vector<double> share[3];
	// Room for the idle sockets (root may raise the hard limit too).
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_max = std::max<rlim_t>(rl.rlim_max, rlim_t(n) + 1024);
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	std::vector<int> idle;
	for (int i = 0; i < n; i++) {
		int f = socket(AF_INET, SOCK_STREAM, 0);
		if (f < 0) {
			fprintf(stderr, "socket %d: %s\n", i, strerror(errno));
			return 1;
		}
		idle.push_back(f);
	}
	if (!sets.empty())
		return sets_arms(sets, idle, secs, rounds);
	const char *names[3] = {"off", "on-0", "on-N"};
	std::vector<double> gbit[3], cpu[3];
	for (int r = 0; r < rounds; r++) {
		for (int arm = 0; arm < 3; arm++) {
			int g = -1;
			if (arm > 0) {
				g = sockbuf_guard_new(SOCKBUF_GUARD_EVENTS);
				struct sockbuf_guard_event_totals ev;
				if (g < 0 || sockbuf_guard_event_stats(g, &ev) != 0 ||
				    ev.err != 0) {
					fprintf(stderr, "events unavailable: %s\n",
						strerror(g < 0 ? -g : -ev.err));
					return 2;
				}
				const struct sockbuf_floor fl = {4096, 0};
				if (arm == 2)
					for (int f : idle)
						if (sockbuf_guard_add(g, f, &fl) != 0) {
							fprintf(stderr, "add failed\n");
							return 3;
						}
			}
			uint64_t cnt0, ns0, cnt1, ns1;
			prog_stats(&cnt0, &ns0);
			const double cpu0 = cpu_s();
			result res;
			if (!transfer(secs, &res)) {
				fprintf(stderr, "transfer: %s\n", strerror(errno));
				return 4;
			}
			const double round_cpu = cpu_s() - cpu0;
			prog_stats(&cnt1, &ns1);
			if (g >= 0)
				sockbuf_guard_destroy(g);
			gbit[arm].push_back(res.gbit_s);
			cpu[arm].push_back(res.cpu_s_per_gb);
			printf("round %d %-5s %6.2f Gbit/s %6.3f CPU-s/GB", r, names[arm],
			       res.gbit_s, res.cpu_s_per_gb);
			if (stats && arm > 0) {
				const double s = double(ns1 - ns0) / 1e9 / round_cpu;
				share[arm].push_back(s);
				printf("  programs: %llu runs, %.0f ns/run, %.3f %% of CPU",
				       (unsigned long long)(cnt1 - cnt0),
				       cnt1 > cnt0 ? double(ns1 - ns0) / double(cnt1 - cnt0) : 0.0,
				       100 * s);
			}
			printf("\n");
			fflush(stdout);
		}
	}
	for (int arm = 0; arm < 3; arm++)
		printf("median %-5s %6.2f Gbit/s %6.3f CPU-s/GB (%+.1f %% throughput, %+.1f %% "
		       "CPU/GB vs off; N=%d)\n",
		       names[arm], median(gbit[arm]), median(cpu[arm]),
		       100 * (median(gbit[arm]) / median(gbit[0]) - 1),
		       100 * (median(cpu[arm]) / median(cpu[0]) - 1), n);
	for (int arm = 1; stats && arm < 3; arm++)
		printf("median %-5s programs' own time: %.3f %% of the process's CPU\n", names[arm],
		       100 * median(share[arm]));
	return 0;
}
