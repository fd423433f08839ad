// SPDX-License-Identifier: MIT
// A process that publishes floors and keeps no guard of its own, for
// sockbufd's event lab (events_lab.sh, in a qemu guest whose tcp_mem the
// lab lowers): N loopback connections, each sender sized to FLOOR with
// sockbuf_set_initial_bufsize() (unlocked: the kernel may cut it) and its
// floor published in the floor registry as the shim would; each sender
// thread writes as fast as its receiver, which reads at a bounded rate,
// lets it, for SECONDS.  Under memory pressure the kernel cuts the
// senders' buffers; only sockbufd restores them.
//
// Meanwhile one thread samples every sender's SO_SNDBUF every 200 us and
// reports what it saw below the floor: samples, the longest run of
// consecutive low samples on one socket, in time from its first to its
// last (a lower bound on the longest time below), and the lowest size.  The daemon's own figure is
// its sockbuf_below_floor_seconds histogram.
//
//   cut_publisher [connections=8] [floor=262144] [seconds=20] [read_kb_per_s=2048]
#include "floored_pairs.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace
{

using clk = std::chrono::steady_clock;

int sndbuf(int s)
{
	int v = 0;
	socklen_t len = sizeof(v);
	getsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, &len);
	return v;
}

} // namespace

int main(int argc, char **argv)
{
	const int n = argc > 1 ? std::atoi(argv[1]) : 8;
	const int floor = argc > 2 ? std::atoi(argv[2]) : 262144;
	const double secs = argc > 3 ? std::atof(argv[3]) : 20;
	const long rate = (argc > 4 ? std::atol(argv[4]) : 2048) * 1024;
	if (n < 1 || n > 1000 || floor < 4096 || secs <= 0 || secs > 3600 || rate <= 0) {
		std::fprintf(stderr, "usage: cut_publisher [connections 1-1000] [floor >= 4096] "
				     "[seconds] [read_kb_per_s]\n");
		return 2;
	}
	struct sockaddr_in sa;
	const int l = sockbuf::daemon_lab::loopback_listener(n, &sa);
	if (l < 0) {
		std::perror("cut_publisher: listen");
		return 1;
	}
	std::vector<int> snd(static_cast<size_t>(n)), rcv(static_cast<size_t>(n));
	int stored = 0;
	for (int i = 0; i < n; i++) {
		struct sockbuf_floor fl;
		if (sockbuf::daemon_lab::floored_pair(l, sa, floor, &snd[size_t(i)],
						      &rcv[size_t(i)], &fl) != 0) {
			std::perror("cut_publisher: connection");
			return 1;
		}
		// The floor is the size the call stored.
		stored = fl.snd;
		if (sockbuf::daemon_lab::publish_sender(snd[size_t(i)], stored) != 0) {
			std::fprintf(stderr, "cut_publisher: publish failed\n");
			return 1;
		}
	}
	std::printf("ready: %d connections, floor %d (stored)\n", n, stored);
	std::fflush(stdout);

	std::atomic<bool> stop{false};
	std::vector<std::thread> threads;
	for (int i = 0; i < n; i++) {
		threads.emplace_back([&, i] {
			static char buf[65536];
			while (!stop.load(std::memory_order_relaxed))
				if (send(snd[size_t(i)], buf, sizeof(buf), MSG_DONTWAIT) < 0)
					std::this_thread::sleep_for(std::chrono::microseconds(500));
		});
		threads.emplace_back([&, i] {
			static thread_local char buf[16384];
			// A bounded read rate keeps the send queues full.
			const auto t0 = clk::now();
			long got = 0;
			while (!stop.load(std::memory_order_relaxed)) {
				const double el =
				    std::chrono::duration<double>(clk::now() - t0).count();
				if (double(got) > el * double(rate)) {
					std::this_thread::sleep_for(std::chrono::milliseconds(1));
					continue;
				}
				const ssize_t r =
				    recv(rcv[size_t(i)], buf, sizeof(buf), MSG_DONTWAIT);
				if (r > 0)
					got += r;
				else
					std::this_thread::sleep_for(std::chrono::milliseconds(1));
			}
		});
	}
	long samples = 0, low = 0, lowest = stored;
	double longest = 0; // seconds between the first and last low sample of a run
	std::vector<clk::time_point> since(static_cast<size_t>(n));
	std::vector<bool> in_run(static_cast<size_t>(n), false);
	const auto end = clk::now() + std::chrono::duration<double>(secs);
	while (clk::now() < end) {
		for (int i = 0; i < n; i++) {
			const int v = sndbuf(snd[size_t(i)]);
			const auto t = clk::now();
			samples++;
			if (v < stored) {
				low++;
				lowest = std::min<long>(lowest, v);
				if (!in_run[size_t(i)])
					since[size_t(i)] = t;
				in_run[size_t(i)] = true;
				longest = std::max(
				    longest,
				    std::chrono::duration<double>(t - since[size_t(i)]).count());
			} else {
				in_run[size_t(i)] = false;
			}
		}
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	}
	stop = true;
	for (auto &t : threads)
		t.join();
	std::printf("sampled: %ld samples, %ld below the floor, lowest %ld, longest run below "
		    "%.1f ms (first to last low sample)\n",
		    samples, low, lowest, longest * 1e3);
	return 0;
}
