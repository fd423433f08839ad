// SPDX-License-Identifier: MIT
// sockbufd against each process guarding itself, judged on the kernel's
// clock (the contract suite's dip judge, tests/contract/judge): PROCS
// unprivileged processes (user nobody) of SOCKETS loopback connections
// each, every sender sized to FLOOR and its floor published; under the
// tcp_mem the lab script lowers (a guest's own), the kernel cuts them.
//
//   --arm daemon  the processes guard nothing: sockbufd (started by the lab
//                 script, events on) restores every cut;
//   --arm own     each process runs its own guard, polling every 10 ms
//                 (unprivileged: no events), SOCKBUF_GUARD_NO_DAEMON.
//
// The parent (root) watches every sender's inode with the judge, which
// timestamps each moment a buffer is left below its floor and each moment
// it is back, at the kernel functions that change them; it prints the
// dips' count, p50, p99 and max, and those still open at the end.
//
// NICE (default 0) is the fleet's nice value: a host daemon can be given
// a higher priority than the workloads it serves, a process's own guard
// thread cannot.
//
//   fleet_judge --arm daemon|own [procs=50] [sockets=200] [seconds=20] [floor=131072] [nice=0]
#include "floor_registry.h"
#include "floored_pairs.h"
#include "kernel_clock.h"

#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

namespace
{

using sockbuf::contract::clock_record;
using sockbuf::contract::kernel_clock;

int nice_ = 0; // the fleet's nice value

int64_t now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool read_full(int fd, void *buf, size_t len)
{
	auto *p = static_cast<char *>(buf);
	while (len > 0) {
		const ssize_t r = read(fd, p, len);
		if (r <= 0)
			return false;
		p += r;
		len -= size_t(r);
	}
	return true;
}

// One process of the fleet: its connections, its floors, its traffic.
// Writes its senders' inodes (uint32_t each) to @report, waits for a byte
// on @go, runs @secs, exits 0.
int child(bool own, int sockets, int floor, double secs, int report, int go)
{
	const passwd *nobody = getpwnam("nobody");
	if (nice_ != 0 && setpriority(PRIO_PROCESS, 0, nice_) != 0)
		return 19;
	if (!nobody || setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)
		return 10;
	struct sockaddr_in sa;
	const int l = sockbuf::daemon_lab::loopback_listener(sockets, &sa);
	if (l < 0)
		return 11;
	int guard = -1;
	if (own && ((guard = sockbuf_guard_new(SOCKBUF_GUARD_NO_DAEMON)) < 0))
		return 12;
	std::vector<int> snd, rcv;
	for (int i = 0; i < sockets; i++) {
		int s = -1, r = -1;
		struct sockbuf_floor fl;
		if (sockbuf::daemon_lab::floored_pair(l, sa, floor, &s, &r, &fl) != 0)
			return 13;
		struct stat st;
		fstat(s, &st);
		if (own) {
			if (sockbuf_guard_add(guard, s, &fl) != 0)
				return 14;
		} else if (sockbuf::daemon_lab::publish_sender(s, fl.snd) != 0) {
			return 15;
		}
		const uint32_t ino = uint32_t(st.st_ino);
		if (write(report, &ino, sizeof(ino)) != ssize_t(sizeof(ino)))
			return 16;
		snd.push_back(s);
		rcv.push_back(r);
	}
	close(report);
	if (own && sockbuf_guard_start(guard, 10'000) != 0)
		return 17;
	char c;
	if (read(go, &c, 1) != 1)
		return 18;
	std::atomic<bool> stop{false};
	// One thread sends on every sender, one reads every receiver at a
	// bounded rate (64 KB/s each): the queues stay full.
	std::thread reader([&] {
		static char buf[4096];
		const auto t0 = std::chrono::steady_clock::now();
		long got = 0;
		while (!stop.load(std::memory_order_relaxed)) {
			const double el =
			    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
				.count();
			if (double(got) > el * 65536.0 * double(rcv.size())) {
				std::this_thread::sleep_for(std::chrono::milliseconds(2));
				continue;
			}
			for (int r : rcv) {
				const ssize_t n = recv(r, buf, sizeof(buf), MSG_DONTWAIT);
				if (n > 0)
					got += n;
			}
		}
	});
	const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
	static char buf[16384];
	while (std::chrono::steady_clock::now() < end) {
		for (int s : snd)
			(void)send(s, buf, sizeof(buf), MSG_DONTWAIT);
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	stop = true;
	reader.join();
	return 0;
}

double pct(std::vector<double> v, double p)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[1], "--arm") != 0 ||
	    (strcmp(argv[2], "daemon") != 0 && strcmp(argv[2], "own") != 0)) {
		fprintf(stderr, "usage: fleet_judge --arm daemon|own [procs] [sockets] [seconds] "
				"[floor]\n");
		return 2;
	}
	const bool own = strcmp(argv[2], "own") == 0;
	const int procs = argc > 3 ? atoi(argv[3]) : 50;
	const int sockets = argc > 4 ? atoi(argv[4]) : 200;
	const double secs = argc > 5 ? atof(argv[5]) : 20;
	const int floor = argc > 6 ? atoi(argv[6]) : 131072;
	nice_ = argc > 7 ? atoi(argv[7]) : 0;
	if (procs < 1 || procs > 1000 || sockets < 1 || sockets > 1000 || secs <= 0 ||
	    floor < 4096) {
		fprintf(stderr, "fleet_judge: bad arguments\n");
		return 2;
	}
	kernel_clock &judge = kernel_clock::get();
	if (!judge.available()) {
		printf("fleet_judge: no kernel clock: %s\n", judge.why().c_str());
		return 77;
	}
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	rl.rlim_cur = rl.rlim_max = rlim_t(4 * sockets + 256);
	setrlimit(RLIMIT_NOFILE, &rl); // inherited; raised as root, before the children drop it
	int go[2];
	if (pipe(go) != 0)
		return 1;
	std::vector<pid_t> kids;
	std::vector<kernel_clock::watch_spec> watch;
	const int64_t t_setup = now_ns();
	for (int p = 0; p < procs; p++) {
		int rep[2];
		if (pipe(rep) != 0)
			return 1;
		const pid_t pid = fork();
		if (pid == 0) {
			close(rep[0]);
			close(go[1]);
			_exit(child(own, sockets, floor, secs, rep[1], go[0]));
		}
		close(rep[1]);
		kids.push_back(pid);
		uint32_t ino;
		int n = 0;
		while (read_full(rep[0], &ino, sizeof(ino))) {
			watch.push_back({ino, floor, 0});
			n++;
		}
		close(rep[0]);
		if (n != sockets) {
			fprintf(stderr, "fleet_judge: process %d set up %d of %d sockets\n", p, n,
				sockets);
			return 1;
		}
	}
	close(go[0]);
	printf("fleet: %d processes x %d sockets set up in %.1f s (arm %s, fleet nice %d)\n", procs,
	       sockets, double(now_ns() - t_setup) / 1e9,
	       own ? "own guards, polling 10 ms" : "sockbufd", nice_);
	fflush(stdout);
	if (int err = judge.begin(watch); err < 0) {
		fprintf(stderr, "fleet_judge: judge: %s\n", strerror(-err));
		return 1;
	}
	// The lab script lowers tcp_mem when it reads this line.
	printf("go\n");
	fflush(stdout);
	const char start_all[1] = {'g'};
	for (size_t i = 0; i < kids.size(); i++)
		if (write(go[1], start_all, 1) != 1)
			return 1;
	int failed = 0;
	for (pid_t k : kids) {
		int st = 0;
		waitpid(k, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			if (!failed)
				fprintf(stderr, "fleet_judge: a process ended with status %d\n",
					WIFEXITED(st) ? WEXITSTATUS(st) : -1);
			failed++;
		}
	}
	uint64_t lost = 0, skipped = 0;
	const std::vector<clock_record> dips = judge.end(now_ns(), &lost, &skipped);
	std::vector<double> ms;
	size_t open = 0;
	for (const clock_record &d : dips) {
		if (d.end_fn < 0) {
			open++;
			continue;
		}
		ms.push_back(double(d.end_ns - d.start_ns) / 1e6);
	}
	printf("dips: %zu closed, %zu open at the end; below the floor (ms): p50 %.3f p99 %.3f "
	       "max %.3f; judge lost %llu, skipped %llu; %d processes failed\n",
	       ms.size(), open, pct(ms, 0.5), pct(ms, 0.99), ms.empty() ? 0.0 : pct(ms, 1.0),
	       (unsigned long long)lost, (unsigned long long)skipped, failed);
	return failed ? 1 : 0;
}
