// SPDX-License-Identifier: MIT
// The floor guard's cost: one pass over 10, 1,000 and 10,000 registered,
// established loopback sockets, with each size source forced in turn
// (getsockopt per socket, batched getsockopt over io_uring, one inet_diag
// dump, one BPF iterator where it can be loaded)
// and the guard's own choice, both directions floored or only the
// receive side, next to a bare getsockopt loop and bare dumps over the
// same sockets.  Nothing is below its floor, so no pass restores: this is
// the price of looking.  BM_guard_thread_during_transfer reports the share
// of wall time a 10 ms guard thread spends in passes during a bulk
// transfer; BM_guard_thread_idle_cpu the CPU time such a thread costs the
// process (wakeups included) with nothing else running.
//
// Sources are forced through the test seam (sockbuf_testable): with no
// hook set it costs one atomic load per socket-option call.
//
// 10,000 connections need 20,000 descriptors: the benchmark raises
// RLIMIT_NOFILE as far as it may and skips sizes it cannot hold.
#include <sockbuf/sockbuf.h>

#include "diag.h"
#include "guard.h"

#include <benchmark/benchmark.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace
{

// N established loopback connections; the client ends are what a guard
// would hold.  With peers_here false the accepted ends live in a child
// process, so that 10,000 connections fit in a 20,000-descriptor limit.
class connections
{
public:
	explicit connections(int n, bool peers_here = false)
	{
		listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in sa = {};
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		socklen_t len = sizeof(sa);
		if (listener_ < 0 || ::bind(listener_, (sockaddr *)&sa, sizeof(sa)) ||
		    ::listen(listener_, 4096) || ::getsockname(listener_, (sockaddr *)&sa, &len))
			return;
		int hold[2] = {-1, -1};
		if (!peers_here) {
			if (::pipe2(hold, O_CLOEXEC) != 0)
				return;
			child_ = ::fork();
			if (child_ == 0) { // accept n, hold them until the pipe closes
				::close(hold[1]);
				std::vector<int> keep;
				for (int i = 0; i < n; i++) {
					int s =
					    ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
					if (s < 0)
						_exit(1);
					keep.push_back(s);
				}
				char c;
				while (::read(hold[0], &c, 1) > 0) {
				}
				_exit(0);
			}
			::close(hold[0]);
			hold_ = hold[1];
			if (child_ < 0)
				return;
		}
		for (int i = 0; i < n; i++) {
			int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (c < 0 || ::connect(c, (sockaddr *)&sa, sizeof(sa)) != 0) {
				if (c >= 0)
					::close(c);
				return;
			}
			clients.push_back(c);
			if (!peers_here)
				continue;
			int s = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
			if (s < 0)
				return;
			servers.push_back(s);
		}
		ok = true;
	}
	~connections()
	{
		for (int f : clients)
			::close(f);
		for (int f : servers)
			::close(f);
		if (listener_ >= 0)
			::close(listener_);
		if (hold_ >= 0)
			::close(hold_); // the child sees EOF and exits
		if (child_ > 0)
			::waitpid(child_, nullptr, 0);
	}
	connections(const connections &) = delete;
	connections &operator=(const connections &) = delete;

	bool ok = false;
	std::vector<int> clients;
	std::vector<int> servers; // servers[i] is clients[i]'s peer (peers_here)

private:
	int listener_ = -1;
	int hold_ = -1;
	pid_t child_ = -1;
};

bool room_for(int n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return false;
	rlim_t want = rlim_t(n + 64);
	if (rl.rlim_cur < want) {
		rl.rlim_cur = std::min(want, rl.rlim_max);
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur >= want;
}

// A guard over every client end with a floor of 4608 (the smallest send
// buffer) and 2304 (the smallest receive buffer), or only the receive
// floor: nothing is ever below it.
int guard_over(const connections &c, unsigned int flags, bool rcv_only = false)
{
	int g = sockbuf_guard_new(flags);
	struct sockbuf_floor fl = {rcv_only ? 0 : 4608, 2304};
	for (int fd : c.clients)
		if (g >= 0 && sockbuf_guard_add(g, fd, &fl) != 0)
			return -1;
	return g;
}

constexpr int auto_source = -1;

// Passes with one size source forced (auto_source: the guard's choice).
void BM_guard_pass(benchmark::State &state, int source, bool rcv_only)
{
	int n = int(state.range(0));
	if (!room_for(n)) {
		state.SkipWithError("RLIMIT_NOFILE too small for this many connections");
		return;
	}
	connections c(n);
	sockbuf::guard::force_source(source);
	int g = c.ok ? guard_over(c, 0, rcv_only) : -1;
	if (g < 0) {
		sockbuf::guard::force_source(auto_source);
		state.SkipWithError("could not set up the connections or the guard");
		return;
	}
	struct sockbuf_guard_report rep = {};
	sockbuf_guard_pass(g, &rep); // makes the ring, opens netlink
	if (source != auto_source && rep.diag != source) {
		struct sockbuf_guard_totals t = {};
		sockbuf_guard_stats(g, &t);
		sockbuf::guard::force_source(auto_source);
		sockbuf_guard_destroy(g);
		state.SkipWithError(
		    source == SOCKBUF_GUARD_SRC_URING
			? ("no io_uring source: " + std::to_string(t.uring_err)).c_str()
		    : source == SOCKBUF_GUARD_SRC_BPF
			? ("no BPF source: " + std::to_string(t.bpf_err)).c_str()
			: "the forced source is unavailable");
		return;
	}
	int sources[4] = {0, 0, 0, 0};
	for (auto _ : state) {
		sockbuf_guard_pass(g, &rep);
		sources[rep.diag]++;
		benchmark::DoNotOptimize(rep);
	}
	sockbuf::guard::force_source(auto_source);
	state.counters["passes_getsockopt"] = sources[SOCKBUF_GUARD_SRC_GETSOCKOPT];
	state.counters["passes_diag"] = sources[SOCKBUF_GUARD_SRC_DIAG];
	state.counters["passes_uring"] = sources[SOCKBUF_GUARD_SRC_URING];
	state.counters["passes_bpf"] = sources[SOCKBUF_GUARD_SRC_BPF];
	state.counters["sockets"] = double(rep.sockets);
	state.counters["ns_per_socket"] = benchmark::Counter(
	    double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
	sockbuf_guard_destroy(g);
}

// sockbuf_guard_remove() and sockbuf_guard_add() of one socket among n
// registered (no pass running): what a transport pays per connection
// that comes and goes.
void BM_guard_remove_add(benchmark::State &state)
{
	int n = int(state.range(0));
	if (!room_for(n)) {
		state.SkipWithError("RLIMIT_NOFILE too small for this many connections");
		return;
	}
	connections c(n);
	int g = c.ok ? guard_over(c, 0) : -1;
	if (g < 0) {
		state.SkipWithError("could not set up the connections or the guard");
		return;
	}
	const int fd = c.clients.back();
	const struct sockbuf_floor fl = {4608, 2304};
	for (auto _ : state) {
		if (sockbuf_guard_remove(g, fd) != 0 || sockbuf_guard_add(g, fd, &fl) != 0) {
			state.SkipWithError("remove or add failed");
			break;
		}
	}
	sockbuf_guard_destroy(g);
}

// One inet_diag dump of full sockets, both families (family 0) or IPv4
// only (what the guard asks for when it guards only IPv4 sockets).
void BM_diag_dump(benchmark::State &state, int family)
{
	int n = int(state.range(0));
	if (!room_for(n)) {
		state.SkipWithError("RLIMIT_NOFILE too small for this many connections");
		return;
	}
	connections c(n);
	sockbuf::diag::session s;
	if (!c.ok || s.open() < 0) {
		state.SkipWithError("could not set up the connections or inet_diag");
		return;
	}
	sockbuf::diag::filter f;
	f.tcp_info = false;
	f.family = family;
	for (auto _ : state) {
		long seen = 0;
		s.each(f, [&seen](const sockbuf::diag::socket_info &) { seen++; });
		benchmark::DoNotOptimize(seen);
	}
	state.counters["ns_per_socket"] = benchmark::Counter(
	    double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// What a hand-written floor check costs: two getsockopt per socket.
void BM_getsockopt_loop(benchmark::State &state)
{
	int n = int(state.range(0));
	if (!room_for(n)) {
		state.SkipWithError("RLIMIT_NOFILE too small for this many connections");
		return;
	}
	connections c(n);
	if (!c.ok) {
		state.SkipWithError("could not set up the connections");
		return;
	}
	for (auto _ : state) {
		int below = 0;
		for (int fd : c.clients) {
			int v = 0;
			socklen_t len = sizeof(v);
			getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len);
			below += v < 4608;
			getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len);
			below += v < 2304;
		}
		benchmark::DoNotOptimize(below);
	}
	state.counters["ns_per_socket"] = benchmark::Counter(
	    double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// A 10 ms guard thread over N idle connections and one busy one while
// the busy one moves data for the measured time: the share of wall time
// spent inside passes (an upper bound on the guard's CPU share).
void BM_guard_thread_during_transfer(benchmark::State &state)
{
	const int idle = int(state.range(0));
	if (!room_for(2 * idle + 2)) {
		state.SkipWithError("RLIMIT_NOFILE too small");
		return;
	}
	connections c(idle + 1, true);
	int g = c.ok ? guard_over(c, 0) : -1;
	if (g < 0 || sockbuf_guard_start(g, 10'000) != 0) {
		state.SkipWithError("could not set up the connections or the guard");
		return;
	}
	// The busy pair: the last client writes, a thread drains its peer.
	int writer = c.clients.back();
	int peer = c.servers.back();
	std::atomic<bool> stop{false};
	std::thread reader([peer, &stop] {
		std::vector<char> buf(1 << 16);
		while (!stop.load(std::memory_order_relaxed))
			if (::recv(peer, buf.data(), buf.size(), MSG_DONTWAIT) <= 0)
				std::this_thread::yield();
	});
	std::vector<char> chunk(1 << 16, 'x');
	struct sockbuf_guard_totals before = {}, after = {};
	sockbuf_guard_stats(g, &before);
	auto t0 = std::chrono::steady_clock::now();
	uint64_t bytes = 0;
	for (auto _ : state) {
		ssize_t n = ::send(writer, chunk.data(), chunk.size(), MSG_DONTWAIT);
		if (n > 0)
			bytes += uint64_t(n);
	}
	auto wall = std::chrono::steady_clock::now() - t0;
	sockbuf_guard_stats(g, &after);
	stop = true;
	reader.join();
	sockbuf_guard_destroy(g);
	double wall_ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count());
	state.counters["guard_share_pct"] =
	    100.0 * double(after.total_pass_ns - before.total_pass_ns) / wall_ns;
	state.counters["passes"] = double(after.passes - before.passes);
	state.counters["MB_per_s"] = double(bytes) / wall_ns * 1e3;
}

// A 10 ms guard thread over N idle sockets (0: an empty guard, the
// wakeup alone), nothing else running in the process: its CPU time (the
// thread's wakeups, clock reads and passes) per wall time.  Each
// iteration blocks 100 ms in poll on nothing.
void BM_guard_thread_idle_cpu(benchmark::State &state)
{
	connections c(int(state.range(0)), true);
	int g = c.ok ? guard_over(c, 0) : -1;
	if (g < 0 || sockbuf_guard_start(g, 10'000) != 0) {
		state.SkipWithError("could not set up the connection or the guard");
		return;
	}
	struct timespec c0, c1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	auto t0 = std::chrono::steady_clock::now();
	for (auto _ : state) {
		struct pollfd none = {-1, 0, 0};
		::poll(&none, 1, 100);
	}
	auto wall = std::chrono::steady_clock::now() - t0;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	struct sockbuf_guard_totals t = {};
	sockbuf_guard_stats(g, &t);
	sockbuf_guard_destroy(g);
	double cpu_ns = double(c1.tv_sec - c0.tv_sec) * 1e9 + double(c1.tv_nsec - c0.tv_nsec);
	double wall_ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count());
	state.counters["cpu_pct"] = 100.0 * cpu_ns / wall_ns;
	state.counters["pass_share_pct"] = 100.0 * double(t.total_pass_ns) / wall_ns;
	state.counters["passes"] = double(t.passes);
	state.counters["last_source"] = double(t.source);
}

// The socket counts every pass and dump benchmark runs at, in microseconds.
void socket_counts(benchmark::internal::Benchmark *b)
{
	b->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_guard_pass, auto, auto_source, false) -> Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, getsockopt, SOCKBUF_GUARD_SRC_GETSOCKOPT, false)
    ->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, io_uring, SOCKBUF_GUARD_SRC_URING, false)->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, inet_diag, SOCKBUF_GUARD_SRC_DIAG, false)->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, bpf, SOCKBUF_GUARD_SRC_BPF, false)->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, getsockopt_rcv_only, SOCKBUF_GUARD_SRC_GETSOCKOPT, true)
    ->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_guard_pass, io_uring_rcv_only, SOCKBUF_GUARD_SRC_URING, true)
    ->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_diag_dump, both_families, 0)->Apply(socket_counts);
BENCHMARK_CAPTURE(BM_diag_dump, ipv4_only, AF_INET)->Apply(socket_counts);
BENCHMARK(BM_getsockopt_loop)->Apply(socket_counts);
BENCHMARK(BM_guard_remove_add)->Apply(socket_counts);
BENCHMARK(BM_guard_thread_idle_cpu)->Arg(0)->Arg(1)->Iterations(30)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_guard_thread_during_transfer)
    ->Arg(0)
    ->Arg(1000)
    ->MinTime(2.0)
    ->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
