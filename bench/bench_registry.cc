// SPDX-License-Identifier: MIT
// What publishing floors for `sockbuf show` costs (impl/internal/floor_registry.h):
// one publish + withdraw pair alone, and sockbuf_guard_add + _remove on a
// real socket, which includes that pair unless the process runs with
// SOCKBUF_FLOOR_REGISTRY=0 (run the binary both ways to compare).
#include "floor_registry.h"

#include <sockbuf/sockbuf.h>

#include <benchmark/benchmark.h>

#include <sys/socket.h>
#include <unistd.h>

namespace
{

void BM_registry_publish_withdraw(benchmark::State &state)
{
	namespace reg = sockbuf::registry;
	// Other sockets already published: probes pass over taken slots.
	const uint64_t others = uint64_t(state.range(0));
	for (uint64_t i = 0; i < others; i++)
		reg::publish(5'000'000 + i, 65536, 65536, reg::by_guard);
	uint64_t inode = 1;
	for (auto _ : state) {
		int ret = reg::publish(inode, 131072, 131072, reg::by_guard);
		benchmark::DoNotOptimize(ret);
		reg::withdraw(inode, reg::by_guard);
		inode = inode % 4096 + 1;
	}
	for (uint64_t i = 0; i < others; i++)
		reg::withdraw(5'000'000 + i, reg::by_guard);
}

void BM_guard_add_remove(benchmark::State &state)
{
	int guard = sockbuf_guard_new(SOCKBUF_GUARD_NO_DIAG);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	const struct sockbuf_floor floor = {65536, 65536};
	if (guard < 0 || fd < 0) {
		state.SkipWithError("no guard or socket");
		return;
	}
	for (auto _ : state) {
		int a = sockbuf_guard_add(guard, fd, &floor);
		int r = sockbuf_guard_remove(guard, fd);
		benchmark::DoNotOptimize(a + r);
	}
	close(fd);
	sockbuf_guard_destroy(guard);
}

} // namespace

BENCHMARK(BM_registry_publish_withdraw)->Arg(0)->Arg(1000)->Arg(6000);
BENCHMARK(BM_guard_add_remove);

BENCHMARK_MAIN();
