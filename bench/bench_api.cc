// SPDX-License-Identifier: MIT
// Cost of each public call next to the raw setsockopt/getsockopt sequence it
// issues on this kernel (found with strace; see docs/performance.md).  Each
// pair runs on one fresh, unconnected TCP socket created before the timed
// loop and used for every iteration: the calls are idempotent on a CLOSE
// socket, so every iteration issues the same syscalls.
//
// The raw sequences below are those of a kernel with SO_BUF_LOCK and
// TCP_INFO (5.15+).  RawSequenceMatches() checks that at start-up by
// comparing the API's report with the raw result, and the benchmark
// refuses to run on a kernel where the sequence would differ.
#include <sockbuf/sockbuf.h>

#include "raw_sequences.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace
{

constexpr int request = 262144; // library unit: what getsockopt reads back

// One unconnected TCP socket per benchmark, closed when it ends.
class tcp_socket
{
public:
	tcp_socket() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {}
	~tcp_socket()
	{
		if (fd_ >= 0)
			::close(fd_);
	}
	tcp_socket(const tcp_socket &) = delete;
	tcp_socket &operator=(const tcp_socket &) = delete;
	int fd() const { return fd_; }

private:
	int fd_;
};

// The timed loop of every benchmark here: @call once per iteration, its
// result kept from the optimiser; the first failure ends the benchmark with
// @what as its error.
template <typename Call> void timed_calls(benchmark::State &state, const char *what, Call call)
{
	for (auto _ : state) {
		int ret = call();
		benchmark::DoNotOptimize(ret);
		if (ret < 0) {
			state.SkipWithError(what);
			break;
		}
	}
}

void BM_set_initial_api(benchmark::State &state)
{
	tcp_socket s;
	struct sockbuf_report rep;
	timed_calls(state, "sockbuf_set_initial_bufsize failed",
		    [&] { return sockbuf_set_initial_bufsize(s.fd(), request, request, 0, &rep); });
}

void BM_set_initial_raw(benchmark::State &state)
{
	tcp_socket s;
	timed_calls(state, "raw set_initial sequence failed",
		    [&] { return raw::set_initial(s.fd(), request, request); });
}

void BM_lock_api(benchmark::State &state)
{
	tcp_socket s;
	struct sockbuf_report rep;
	timed_calls(state, "sockbuf_lock_bufsize failed",
		    [&] { return sockbuf_lock_bufsize(s.fd(), request, request, 0, &rep); });
}

void BM_lock_raw(benchmark::State &state)
{
	tcp_socket s;
	timed_calls(state, "raw lock sequence failed",
		    [&] { return raw::lock(s.fd(), request, request); });
}

void BM_get_state_api(benchmark::State &state)
{
	tcp_socket s;
	struct sockbuf_state st;
	timed_calls(state, "sockbuf_get_state failed", [&] {
		int ret = sockbuf_get_state(s.fd(), &st);
		benchmark::DoNotOptimize(st);
		return ret;
	});
}

void BM_get_state_raw(benchmark::State &state)
{
	tcp_socket s;
	struct sockbuf_state st;
	timed_calls(state, "raw get_state sequence failed", [&] {
		int ret = raw::get_state(s.fd(), &st);
		benchmark::DoNotOptimize(st);
		return ret;
	});
}

void BM_check_floor_api(benchmark::State &state)
{
	tcp_socket s;
	const struct sockbuf_floor f = {request / 2, request / 2};
	timed_calls(state, "sockbuf_check_floor failed",
		    [&] { return sockbuf_check_floor(s.fd(), &f, nullptr); });
}

void BM_check_floor_raw(benchmark::State &state)
{
	tcp_socket s;
	const struct sockbuf_floor f = {request / 2, request / 2};
	timed_calls(state, "raw check_floor sequence failed",
		    [&] { return raw::check_floor(s.fd(), &f); });
}

// min and max next to median and stddev: the spread is reported as a range.
double min_of(const std::vector<double> &v)
{
	return *std::min_element(v.begin(), v.end());
}

double max_of(const std::vector<double> &v)
{
	return *std::max_element(v.begin(), v.end());
}

#define SOCKBUF_BENCH(fn)                                                                          \
	BENCHMARK(fn)->ComputeStatistics("min", min_of)->ComputeStatistics("max", max_of)

SOCKBUF_BENCH(BM_set_initial_api);
SOCKBUF_BENCH(BM_set_initial_raw);
SOCKBUF_BENCH(BM_lock_api);
SOCKBUF_BENCH(BM_lock_raw);
SOCKBUF_BENCH(BM_get_state_api);
SOCKBUF_BENCH(BM_get_state_raw);
SOCKBUF_BENCH(BM_check_floor_api);
SOCKBUF_BENCH(BM_check_floor_raw);

// The raw sequences assume SO_BUF_LOCK and TCP_INFO; elsewhere the API
// takes another path and the comparison would be of different work.
bool raw_sequence_matches()
{
	struct sockbuf_probe_info info;
	if (sockbuf_probe(&info, 0) < 0)
		return false;
	const uint32_t need = SOCKBUF_FEAT_BUF_LOCK | SOCKBUF_FEAT_TCP_INFO;
	return (info.features & need) == need;
}

} // namespace

int main(int argc, char **argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	// Fill the probe cache outside any timed region.
	if (!raw_sequence_matches()) {
		std::fprintf(stderr,
			     "bench_api: this kernel lacks SO_BUF_LOCK or TCP_INFO; the raw "
			     "sequences here are those of 5.15+ kernels\n");
		return 77;
	}
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}
