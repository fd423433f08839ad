// SPDX-License-Identifier: MIT
// rpc-client: keeps --slots calls outstanding on one connection, like an
// NFS client's slot table; a writer sends calls and a reader matches the
// replies by xid, verifies them and records latency.  Stops after --bytes
// of payload or --seconds, whichever comes first.
#include "../common/net.h"
#include "../common/options.h"
#include "../common/pattern.h"
#include "../common/sampler.h"
#include "../common/stats.h"
#include "protocol.h"
#include "record_marking.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace
{

const char usage[] =
    "usage: rpc-client --connect=ADDR:PORT [--op=write|read] [--size=SIZE]\n"
    "                  [--slots=N] [--bytes=SIZE] [--seconds=S] [--fragment=SIZE]\n"
    "                  [--marker=separate|combined] [--cork]\n"
    "                  [--bufs=default|initial|lock|raw] [--bufsize=SIZE] [--force]\n"
    "                  [--trace=FILE] [--json]\n"
    "  --op        write: payload in the call; read: payload in the reply\n"
    "  --size      payload per call, 8K..1M (default 64K)\n"
    "  --slots     calls outstanding at once (default 16)\n"
    "  --bytes     stop after this much payload (default 256M)\n"
    "  --seconds   stop after this long (default 10)\n"
    "  --fragment  split each record into fragments of this size (default: one)\n"
    "  --bufs      how the client socket is sized (default: default)\n"
    "  --bufsize   size for --bufs=initial|lock|raw (default 128K), up to 1G:\n"
    "              past net.core.[wr]mem_max only with --force\n"
    "  --force     SO_*BUFFORCE past net.core.[wr]mem_max (CAP_NET_ADMIN)\n"
    "  --json      print the result as one JSON object\n";

struct client_state {
	std::mutex lock;
	std::condition_variable slot_free;
	std::unordered_map<uint32_t, double> sent_at; // xid -> send time
	std::vector<double> latency_us;
	uint64_t completed = 0, bad_replies = 0;
	bool writer_done = false;
	std::string reader_error;
};

void read_replies(int fd, client_state &s, const examples::pattern &pat, uint32_t expect_len)
{
	std::vector<char> rec;
	const size_t max_record = sizeof(rpc::reply_header) + rpc::max_payload;
	try {
		for (;;) {
			// The writer half-closes when done; the server answers
			// every call, then closes: EOF here is the normal end.
			if (!rpc::recv_record(fd, rec, max_record)) {
				std::lock_guard<std::mutex> g(s.lock);
				if (!s.writer_done || !s.sent_at.empty())
					throw std::runtime_error(
					    "server closed with calls outstanding");
				return;
			}
			double now = examples::now_seconds();
			rpc::reply_header rh{};
			bool ok = rec.size() >= sizeof(rh);
			if (ok) {
				std::memcpy(&rh, rec.data(), sizeof(rh));
				ok = ntohl(rh.status) == rpc::status_ok &&
				     ntohl(rh.len) == expect_len &&
				     rec.size() == sizeof(rh) + expect_len &&
				     pat.verify(rec.data() + sizeof(rh), expect_len, ntohl(rh.xid),
						rpc::salt_reply);
			}
			std::lock_guard<std::mutex> g(s.lock);
			auto it = s.sent_at.find(ntohl(rh.xid));
			if (it == s.sent_at.end()) {
				s.bad_replies++;
				throw std::runtime_error("reply to an unknown xid");
			}
			s.latency_us.push_back((now - it->second) * 1e6);
			s.sent_at.erase(it);
			s.completed++;
			if (!ok)
				s.bad_replies++;
			s.slot_free.notify_one();
		}
	} catch (const std::exception &e) {
		std::lock_guard<std::mutex> g(s.lock);
		s.reader_error = e.what();
		s.slot_free.notify_all();
	}
}

int run(const examples::options &o)
{
	if (!o.has("connect"))
		throw examples::usage_error("--connect is required");
	auto ep = examples::parse_endpoint(o.str("connect", ""));
	std::string op_name = o.str("op", "write");
	if (op_name != "write" && op_name != "read")
		throw examples::usage_error("--op must be write or read");
	const bool write_op = op_name == "write";
	const auto size =
	    static_cast<uint32_t>(o.size("size", 64 * 1024, 8 * 1024, rpc::max_payload));
	const long slots = o.num("slots", 16, 1, 1024);
	const uint64_t bytes = o.size("bytes", 256ull << 20, 1, 1ull << 40);
	const double seconds = o.seconds("seconds", 10, 0.01, 86400);
	auto mode = examples::parse_bufs(o.str("bufs", "default"));
	const uint64_t bufsize = o.size("bufsize", 128 * 1024, 4096, SOCKBUF_SIZE_MAX);
	rpc::send_options send_opt;
	send_opt.fragment = o.size("fragment", 0, 0, rpc::max_fragment);
	if (o.has("fragment") && send_opt.fragment < 1)
		throw examples::usage_error("--fragment must be at least 1");
	std::string marker = o.str("marker", "combined");
	if (marker == "separate")
		send_opt.marker = rpc::marker_mode::separate;
	else if (marker != "combined")
		throw examples::usage_error("--marker must be separate or combined");
	send_opt.cork = o.has("cork");

	std::string note;
	int fd = examples::connect_to(ep, mode, static_cast<int>(bufsize), &note, o.has("force"));
	// Bounds a wait for a reply that never comes.
	timeval tv{static_cast<time_t>(seconds) + 10, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	examples::buffer_sampler sampler(o.str("trace", ""), 5, seconds + 5);
	sampler.add(fd, 0);

	examples::pattern pat(rpc::max_payload);
	client_state s;
	std::thread rd(read_replies, fd, std::ref(s), std::cref(pat), write_op ? 0u : size);
	std::vector<char> payload(size);
	uint64_t sent_bytes = 0;
	uint32_t xid = 0;
	std::string error;
	const double start = examples::now_seconds();
	try {
		while (sent_bytes < bytes && examples::now_seconds() - start < seconds) {
			{
				std::unique_lock<std::mutex> g(s.lock);
				s.slot_free.wait(g, [&] {
					return !s.reader_error.empty() ||
					       s.sent_at.size() < static_cast<size_t>(slots);
				});
				if (!s.reader_error.empty())
					break;
			}
			xid++;
			rpc::call_header ch{htonl(xid),
					    htonl(write_op ? rpc::op_write : rpc::op_read),
					    htonl(write_op ? size : 0), htonl(write_op ? 0 : size)};
			if (write_op)
				pat.fill(payload.data(), size, xid, rpc::salt_call);
			iovec parts[2] = {{&ch, sizeof(ch)}, {payload.data(), size}};
			{
				std::lock_guard<std::mutex> g(s.lock);
				s.sent_at[xid] = examples::now_seconds();
			}
			rpc::send_record(fd, parts, write_op ? 2 : 1, send_opt);
			sent_bytes += size;
		}
	} catch (const std::exception &e) {
		error = e.what();
	}
	{
		std::lock_guard<std::mutex> g(s.lock);
		s.writer_done = true;
	}
	// No more calls: the server drains and closes, which ends the reader.
	::shutdown(fd, error.empty() ? SHUT_WR : SHUT_RDWR);
	rd.join();
	const double elapsed = examples::now_seconds() - start;
	sampler.remove(fd);
	::close(fd);
	if (error.empty())
		error = s.reader_error;

	auto lat = examples::summarize(s.latency_us);
	const double mbytes = static_cast<double>(s.completed) * size / 1e6;
	nlohmann::json j = {{"transport", "rpc"},
			    {"op", op_name},
			    {"size", size},
			    {"slots", slots},
			    {"bufs", examples::bufs_name(mode)},
			    {"calls", s.completed},
			    {"bad_replies", s.bad_replies},
			    {"seconds", elapsed},
			    {"iops", static_cast<double>(s.completed) / elapsed},
			    {"MBps", mbytes / elapsed},
			    {"client_bufs", note},
			    {"error", error}};
	j.update(examples::latency_json(lat)); // p50_us ... max_us
	if (o.has("json")) {
		std::printf("%s\n", j.dump().c_str());
	} else {
		std::printf("rpc-client: %s %u B x %llu calls in %.2f s: %.0f IOPS, %.1f MB/s\n"
			    "  latency us p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f\n"
			    "  %llu failed verification%s%s\n",
			    op_name.c_str(), size, static_cast<unsigned long long>(s.completed),
			    elapsed, s.completed / elapsed, mbytes / elapsed, lat.p50_us,
			    lat.p90_us, lat.p99_us, lat.p999_us, lat.max_us,
			    static_cast<unsigned long long>(s.bad_replies),
			    error.empty() ? "" : "; error: ", error.c_str());
	}
	return (s.bad_replies || !error.empty() || s.completed == 0) ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	return examples::run_main(argc, argv, "rpc-client", usage,
				  {"connect", "op", "size", "slots", "bytes", "seconds", "fragment",
				   "marker", "cork", "bufs", "bufsize", "force", "trace", "json",
				   "help"},
				  run);
}
