// SPDX-License-Identifier: MIT
// A process that publishes floors for idle connections and guards nothing
// itself, for sockbufd's idle cost in a guest (idle_events_lab.sh): N
// loopback connections, each sender sized to FLOOR with
// sockbuf_set_initial_bufsize() and its floor published in the floor
// registry as the shim would; then nothing is sent.  It says "ready N"
// and holds them until it is sent a signal, or SECONDS pass.
//
//   idle_publisher [connections=5000] [floor=131072] [seconds=600]
#include "floored_pairs.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv)
{
	const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
	const int floor = argc > 2 ? std::atoi(argv[2]) : 131072;
	const int secs = argc > 3 ? std::atoi(argv[3]) : 600;
	// A table holds 8,192 entries (floor_registry.h).
	if (n < 1 || n > 8000 || floor < 4096 || secs < 1 || secs > 86400) {
		std::fprintf(stderr, "usage: idle_publisher [connections 1-8000] [floor >= 4096] "
				     "[seconds 1-86400]\n");
		return 2;
	}
	const rlim_t need = rlim_t(2 * n + 64);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
		rl.rlim_cur = need;
		rl.rlim_max = rl.rlim_max < need ? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			std::perror("idle_publisher: RLIMIT_NOFILE");
			return 1;
		}
	}
	struct sockaddr_in sa;
	const int l = sockbuf::daemon_lab::loopback_listener(n, &sa);
	if (l < 0) {
		std::perror("idle_publisher: listen");
		return 1;
	}
	std::vector<int> snd(static_cast<size_t>(n)), rcv(static_cast<size_t>(n));
	for (size_t i = 0; i < size_t(n); i++) {
		struct sockbuf_floor fl;
		if (sockbuf::daemon_lab::floored_pair(l, sa, floor, &snd[i], &rcv[i], &fl) != 0) {
			std::perror("idle_publisher: connection");
			return 1;
		}
		if (sockbuf::daemon_lab::publish_sender(snd[i], fl.snd) != 0) {
			std::fprintf(stderr, "idle_publisher: publish failed\n");
			return 1;
		}
	}
	std::printf("ready %d\n", n);
	std::fflush(stdout);
	sleep(unsigned(secs)); // a signal ends it sooner
	return 0;
}
