// SPDX-License-Identifier: MIT
// Calls from many threads at once, with the probe cache refilled under
// them: every call still sees a consistent kernel and reports correctly.
#include "util.h"

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace sockbuf::test;

namespace
{

TEST(Threads, ConcurrentCallsAndProbeRefresh)
{
	constexpr int threads = 6, rounds = 300;
	std::atomic<int> wrong{0};
	std::atomic<bool> stop{false};
	std::thread refresher([&stop] {
		for (int i = 0; i < 200 && !stop; i++)
			sockbuf_probe(nullptr, SOCKBUF_PROBE_FRESH);
	});
	std::vector<std::thread> workers;
	for (int t = 0; t < threads; t++) {
		workers.emplace_back([&wrong, t] {
			for (int i = 0; i < rounds; i++) {
				fd s(tcp());
				int size = 65536 + 4096 * t;
				struct sockbuf_report rep;
				if (sockbuf_set_initial_bufsize(
					s, size, size, SOCKBUF_F_FALLBACK_LOCK, &rep) != 0 ||
				    rep.snd.effective != size || sndbuf(s) != size ||
				    rcvbuf(s) != size)
					wrong++;
				struct sockbuf_floor f = {size, size};
				if (sockbuf_check_floor(s, &f, nullptr) != 0)
					wrong++;
			}
		});
	}
	for (auto &w : workers)
		w.join();
	stop = true;
	refresher.join();
	EXPECT_EQ(wrong.load(), 0);
}

} // namespace
