// SPDX-License-Identifier: MIT
// What the shim adds to setsockopt(SO_RCVBUF): the plain libc call against
// the shim's interposed one, in one process.  The shim is dlopen()ed with
// RTLD_LOCAL so that it does not interpose on this program; its setsockopt
// is called through the pointer dlsym() returns, and its load-time setup
// runs with the SOCKBUF_SHIM value each benchmark sets before the dlopen.
//
//   bench_shim --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// Under `sockbuf run --via seccomp -- bench_shim --benchmark_filter=plain`
// the plain rows are the supervised calls (SO_RCVBUF: a round trip to the
// supervisor; SO_KEEPALIVE: the filter alone).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72 // Linux 5.14 (asm-generic/socket.h)
#endif

namespace
{

using setsockopt_fn = int (*)(int, int, int, const void *, socklen_t);

// The shim reads its configuration once, when it is loaded: one
// configuration per process (--shim-config=...).
setsockopt_fn load_shim(const char *config)
{
	setenv("SOCKBUF_SHIM", config, 1);
	void *h = dlopen(SOCKBUF_SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		std::fprintf(stderr, "bench_shim: %s\n", dlerror());
		std::exit(1);
	}
	return reinterpret_cast<setsockopt_fn>(dlsym(h, "setsockopt"));
}

setsockopt_fn g_shim = nullptr;
const char *g_config = "policy:initial";

void run(benchmark::State &state, setsockopt_fn fn, int name = SO_RCVBUF, int value = 65536)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		state.SkipWithError("socket() failed");
		return;
	}
	for (auto _ : state) {
		int ret = fn(fd, SOL_SOCKET, name, &value, sizeof(value));
		benchmark::DoNotOptimize(ret);
	}
	close(fd);
}

void BM_setsockopt_plain(benchmark::State &state)
{
	run(state, &setsockopt);
}

void BM_setsockopt_shim(benchmark::State &state)
{
	state.SetLabel(g_config);
	run(state, g_shim);
}

// An option neither the shim nor the seccomp filter of `sockbuf run --via
// seccomp` acts on: under the filter, the cost of the filter alone.
void BM_setsockopt_keepalive_plain(benchmark::State &state)
{
	run(state, &setsockopt, SO_KEEPALIVE);
}

// A program sizes each socket once or twice: the first call on a new
// socket, with socket() and close() around it (the shim's first call also
// checks the protocol, reads the size back and publishes the floor).
void run_first(benchmark::State &state, setsockopt_fn fn)
{
	int value = 65536;
	for (auto _ : state) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int ret = fn(fd, SOL_SOCKET, SO_RCVBUF, &value, sizeof(value));
		benchmark::DoNotOptimize(ret);
		close(fd);
	}
}

void BM_first_call_plain(benchmark::State &state)
{
	run_first(state, &setsockopt);
}

void BM_first_call_shim(benchmark::State &state)
{
	state.SetLabel(g_config);
	run_first(state, g_shim);
}

// The parts of the shim's repeated call beside the program's own: the
// socket's cookie (its identity), and SO_BUF_LOCK read and written (one
// direction unlocked, the other kept).  Their sum is the least a call that
// keeps the buffer unlocked can cost.
// getsockopt(SOL_SOCKET, @name) of @len bytes on one socket, repeated.
void run_get(benchmark::State &state, int name, socklen_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		state.SkipWithError("socket() failed");
		return;
	}
	uint64_t out = 0;
	for (auto _ : state) {
		socklen_t got = len;
		benchmark::DoNotOptimize(getsockopt(fd, SOL_SOCKET, name, &out, &got));
	}
	close(fd);
}

void BM_part_cookie(benchmark::State &state)
{
	run_get(state, SO_COOKIE, sizeof(uint64_t));
}

void BM_part_lock_read(benchmark::State &state)
{
	run_get(state, SO_BUF_LOCK, sizeof(int));
}

void BM_part_lock_write(benchmark::State &state)
{
	run(state, &setsockopt, SO_BUF_LOCK, 0);
}

BENCHMARK(BM_setsockopt_plain)->UseRealTime();
BENCHMARK(BM_setsockopt_keepalive_plain)->UseRealTime();
BENCHMARK(BM_setsockopt_shim)->UseRealTime();
BENCHMARK(BM_first_call_plain)->UseRealTime();
BENCHMARK(BM_first_call_shim)->UseRealTime();
BENCHMARK(BM_part_cookie)->UseRealTime();
BENCHMARK(BM_part_lock_read)->UseRealTime();
BENCHMARK(BM_part_lock_write)->UseRealTime();

} // namespace

int main(int argc, char **argv)
{
	// --shim-config=STRING picks the shim's configuration for this run
	// (default policy:initial); run once per configuration to compare.
	int kept = 1;
	for (int i = 1; i < argc; i++) {
		if (!std::strncmp(argv[i], "--shim-config=", 14))
			g_config = argv[i] + 14;
		else
			argv[kept++] = argv[i];
	}
	argc = kept;
	g_shim = load_shim(g_config);
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}
