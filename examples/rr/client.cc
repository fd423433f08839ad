// SPDX-License-Identifier: MIT
// rr-client: the active side of an RDS-stress-like load.  --threads
// connections, each with a sender keeping up to --depth requests in flight
// and a receiver that verifies every reply and records its latency.
// Sockets are sized before connect() by --bufs, like rds_tcp_tune() did on
// both ends.  Stops after --bytes of requests or --seconds.
#include "../common/net.h"
#include "../common/options.h"
#include "../common/pattern.h"
#include "../common/sampler.h"
#include "../common/stats.h"
#include "protocol.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace
{

const char usage[] =
    "usage: rr-client --connect=ADDR:PORT [--threads=N] [--size=SIZE]\n"
    "                 [--depth=N] [--bytes=SIZE] [--seconds=S]\n"
    "                 [--bufs=default|initial|lock|raw] [--bufsize=SIZE] [--force]\n"
    "                 [--trace=FILE] [--json]\n"
    "  --threads   connections, one sender and one receiver each (default 16)\n"
    "  --size      request and reply size (default 100K)\n"
    "  --depth     requests in flight per connection (default 1)\n"
    "  --bytes     stop after this many request bytes in total (default 1G)\n"
    "  --seconds   stop after this long (default 10)\n"
    "  --bufsize   size for --bufs=initial|lock|raw (default 128K), up to 1G:\n"
    "              past net.core.[wr]mem_max only with --force\n"
    "  --force     SO_*BUFFORCE past net.core.[wr]mem_max (CAP_NET_ADMIN)\n";

struct shared {
	examples::pattern pat{rr::max_message};
	uint32_t size = 0;
	long depth = 1;
	uint64_t byte_budget = 0;
	mutable std::atomic<uint64_t> bytes_claimed{0}; // shared budget
	double deadline = 0;
};

struct conn_result {
	uint64_t completed = 0, bad = 0;
	std::vector<double> latency_us;
	std::string error;
};

struct conn_state {
	std::mutex lock;
	std::condition_variable changed;
	std::deque<std::pair<uint64_t, double>> in_flight; // seq, send time
	bool sender_done = false;
};

void receive(int fd, conn_state &c, const shared &sh, conn_result &res)
{
	std::vector<char> buf(sh.size);
	try {
		for (;;) {
			rr::header h{};
			if (!examples::read_full(fd, &h, sizeof(h))) {
				std::lock_guard<std::mutex> g(c.lock);
				if (!c.sender_done || !c.in_flight.empty())
					throw std::runtime_error("server closed with requests "
								 "outstanding");
				return;
			}
			if (h.magic != rr::magic_reply || h.len != sh.size)
				throw std::runtime_error("bad reply header");
			if (!examples::read_full(fd, buf.data(), h.len))
				throw std::runtime_error("connection closed inside a reply");
			double now = examples::now_seconds();
			std::lock_guard<std::mutex> g(c.lock);
			if (c.in_flight.empty() || c.in_flight.front().first != h.seq)
				throw std::runtime_error("reply out of order");
			if (!sh.pat.verify(buf.data(), h.len, h.seq, rr::salt_reply))
				res.bad++;
			res.latency_us.push_back((now - c.in_flight.front().second) * 1e6);
			c.in_flight.pop_front();
			res.completed++;
			c.changed.notify_one();
		}
	} catch (const std::exception &e) {
		std::lock_guard<std::mutex> g(c.lock);
		if (res.error.empty())
			res.error = e.what();
		c.sender_done = true;
		c.changed.notify_all();
	}
}

void run_connection(int fd, uint64_t conn_id, const shared &sh, conn_result &res)
{
	conn_state c;
	std::thread rx(receive, fd, std::ref(c), std::cref(sh), std::ref(res));
	std::vector<char> buf(sh.size);
	try {
		for (uint64_t n = 0; examples::now_seconds() < sh.deadline; n++) {
			{
				std::unique_lock<std::mutex> g(c.lock);
				c.changed.wait(g, [&] {
					return c.sender_done ||
					       c.in_flight.size() < static_cast<size_t>(sh.depth);
				});
				if (c.sender_done)
					break;
			}
			// The byte budget is shared by all connections.
			if (sh.bytes_claimed.fetch_add(sh.size) + sh.size > sh.byte_budget)
				break;
			const uint64_t seq = (conn_id << 40) | n;
			rr::header h{rr::magic_request, sh.size, seq};
			sh.pat.fill(buf.data(), sh.size, seq, rr::salt_request);
			{
				std::lock_guard<std::mutex> g(c.lock);
				c.in_flight.emplace_back(seq, examples::now_seconds());
			}
			examples::write_full(fd, &h, sizeof(h), MSG_MORE);
			examples::write_full(fd, buf.data(), sh.size);
		}
	} catch (const std::exception &e) {
		std::lock_guard<std::mutex> g(c.lock);
		if (res.error.empty())
			res.error = e.what();
	}
	{
		std::lock_guard<std::mutex> g(c.lock);
		c.sender_done = true;
	}
	// Half-close: the server answers what is in flight, then closes.
	::shutdown(fd, res.error.empty() ? SHUT_WR : SHUT_RDWR);
	rx.join();
}

int run(const examples::options &o)
{
	if (!o.has("connect"))
		throw examples::usage_error("--connect is required");
	auto ep = examples::parse_endpoint(o.str("connect", ""));
	const long threads = o.num("threads", 16, 1, 1024);
	shared sh;
	sh.size = static_cast<uint32_t>(o.size("size", 100 * 1024, 16, rr::max_message));
	sh.depth = o.num("depth", 1, 1, 1024);
	sh.byte_budget = o.size("bytes", 1ull << 30, 1, 1ull << 44);
	const double seconds = o.seconds("seconds", 10, 0.01, 86400);
	auto mode = examples::parse_bufs(o.str("bufs", "default"));
	auto bufsize = static_cast<int>(o.size("bufsize", 128 * 1024, 4096, SOCKBUF_SIZE_MAX));

	std::vector<int> fds;
	std::string note;
	try {
		for (long i = 0; i < threads; i++)
			fds.push_back(
			    examples::connect_to(ep, mode, bufsize, &note, o.has("force")));
	} catch (...) {
		for (int fd : fds)
			::close(fd);
		throw;
	}
	for (int fd : fds) {
		timeval tv{static_cast<time_t>(seconds) + 10, 0}; // bounds a lost reply
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	examples::buffer_sampler sampler(o.str("trace", ""), 5, seconds + 5);
	sampler.add(fds[0], 0); // one connection is enough to show the shape

	std::vector<conn_result> results(static_cast<size_t>(threads));
	std::vector<std::thread> workers;
	const double start = examples::now_seconds();
	sh.deadline = start + seconds;
	for (long i = 0; i < threads; i++)
		workers.emplace_back(run_connection, fds[static_cast<size_t>(i)],
				     static_cast<uint64_t>(i), std::cref(sh),
				     std::ref(results[static_cast<size_t>(i)]));
	for (auto &t : workers)
		t.join();
	const double elapsed = examples::now_seconds() - start;
	sampler.remove(fds[0]);
	for (int fd : fds)
		::close(fd);

	uint64_t completed = 0, bad = 0;
	std::vector<double> lat_all;
	std::string error;
	for (auto &r : results) {
		completed += r.completed;
		bad += r.bad;
		lat_all.insert(lat_all.end(), r.latency_us.begin(), r.latency_us.end());
		if (error.empty() && !r.error.empty())
			error = r.error;
	}
	auto lat = examples::summarize(lat_all);
	// Payload both ways, as rds-stress counts it.
	const double gbit = 2.0 * static_cast<double>(completed) * sh.size * 8 / 1e9 / elapsed;
	nlohmann::json j = {{"transport", "rr"},
			    {"size", sh.size},
			    {"threads", threads},
			    {"depth", sh.depth},
			    {"bufs", examples::bufs_name(mode)},
			    {"bufsize", bufsize},
			    {"requests", completed},
			    {"bad_replies", bad},
			    {"seconds", elapsed},
			    {"rps", static_cast<double>(completed) / elapsed},
			    {"Gbps", gbit},
			    {"MBps", gbit * 1e3 / 8},
			    {"client_bufs", note},
			    {"error", error}};
	j.update(examples::latency_json(lat)); // p50_us ... max_us
	if (o.has("json")) {
		std::printf("%s\n", j.dump().c_str());
	} else {
		std::printf(
		    "rr-client: %ld x %u B, depth %ld: %llu requests in %.2f s: %.0f req/s, "
		    "%.3f Gb/s (both ways)\n"
		    "  latency us p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f\n"
		    "  %llu failed verification%s%s\n",
		    threads, sh.size, sh.depth, static_cast<unsigned long long>(completed), elapsed,
		    completed / elapsed, gbit, lat.p50_us, lat.p90_us, lat.p99_us, lat.p999_us,
		    lat.max_us, static_cast<unsigned long long>(bad),
		    error.empty() ? "" : "; error: ", error.c_str());
	}
	return (bad || !error.empty() || completed == 0) ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	return examples::run_main(argc, argv, "rr-client", usage,
				  {"connect", "threads", "size", "depth", "bytes", "seconds",
				   "bufs", "bufsize", "force", "trace", "json", "help"},
				  run);
}
