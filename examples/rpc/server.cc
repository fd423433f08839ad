// SPDX-License-Identifier: MIT
// rpc-server: an NFS/SUNRPC-like server.  One reader thread per connection
// takes records off the socket; a pool of worker threads verifies each call
// and sends the reply.  The listener is sized like svc_sock_setbufsize()
// did, requests x max message, through the --bufs switch.
#include "../common/net.h"
#include "../common/options.h"
#include "../common/pattern.h"
#include "../common/sampler.h"
#include "../common/shutdown.h"
#include "protocol.h"
#include "record_marking.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

const char usage[] = "usage: rpc-server [--listen=ADDR:PORT] [--bufs=default|initial|lock|raw]\n"
		     "                  [--requests=N] [--max-msg=SIZE] [--threads=N]\n"
		     "                  [--marker=separate|combined] [--cork] [--max-clients=N]\n"
		     "                  [--bufsize=SIZE] [--force] [--seconds=S] [--trace=FILE]\n"
		     "  --listen       address to listen on (default 127.0.0.1:0, port printed)\n"
		     "  --bufs         how the listener is sized (default: default)\n"
		     "  --requests     requests the buffer must hold (default 3, svc_tcp's 3)\n"
		     "  --max-msg      largest message, buffer = requests x max-msg (default 1M)\n"
		     "  --bufsize      buffer size instead of requests x max-msg, up to 1G:\n"
		     "                 past net.core.[wr]mem_max only with --force\n"
		     "  --force        SO_*BUFFORCE past net.core.[wr]mem_max (CAP_NET_ADMIN)\n"
		     "  --threads      worker pool size (default 4)\n"
		     "  --marker       record marker as its own MSG_MORE send or in the payload's\n"
		     "                 sendmsg (default combined)\n"
		     "  --cork         TCP_CORK around each reply\n"
		     "  --max-clients  exit after this many connections ended (default 0: never)\n"
		     "  --seconds      exit after this long (default 0: never)\n"
		     "  --trace        sample each connection's buffer sizes to this CSV\n";

struct connection {
	int fd;
	examples::buffer_sampler *sampler;
	int finished_fd; // eventfd the main loop watches
	std::mutex send_lock;
	~connection()
	{
		sampler->remove(fd);
		::close(fd);
		uint64_t one = 1;
		if (::write(finished_fd, &one, sizeof(one)) < 0)
			std::perror("rpc-server: eventfd");
	}
};

struct job {
	std::shared_ptr<connection> conn;
	std::vector<char> record;
};

struct server_state {
	rpc::send_options send_opt;
	uint64_t max_msg = rpc::max_payload; // larger payloads are garbage
	examples::pattern pat{rpc::max_payload};
	std::mutex lock;
	std::condition_variable ready;
	std::deque<job> queue;
	bool stopping = false;
	std::atomic<uint64_t> calls{0}, bad_calls{0}, send_errors{0};
};

// Verifies one call and sends its reply.
void serve(server_state &s, job &j, std::vector<char> &reply_buf)
{
	rpc::call_header ch{};
	bool ok = j.record.size() >= sizeof(ch);
	if (ok) {
		std::memcpy(&ch, j.record.data(), sizeof(ch));
		ch.op = ntohl(ch.op);
		ch.call_len = ntohl(ch.call_len);
		ch.reply_len = ntohl(ch.reply_len);
		ok = (ch.op == rpc::op_write || ch.op == rpc::op_read) &&
		     ch.call_len == j.record.size() - sizeof(ch) && ch.call_len <= s.max_msg &&
		     ch.reply_len <= s.max_msg &&
		     s.pat.verify(j.record.data() + sizeof(ch), ch.call_len, ntohl(ch.xid),
				  rpc::salt_call);
	}
	s.calls++;
	rpc::reply_header rh{ch.xid, htonl(ok ? rpc::status_ok : rpc::status_garbage), 0};
	size_t len = ok ? ch.reply_len : 0;
	if (!ok)
		s.bad_calls++;
	rh.len = htonl(static_cast<uint32_t>(len));
	if (len)
		s.pat.fill(reply_buf.data(), len, ntohl(ch.xid), rpc::salt_reply);
	iovec parts[2] = {{&rh, sizeof(rh)}, {reply_buf.data(), len}};
	std::lock_guard<std::mutex> g(j.conn->send_lock);
	try {
		rpc::send_record(j.conn->fd, parts, len ? 2 : 1, s.send_opt);
	} catch (const std::exception &e) {
		s.send_errors++; // the client went away; its reader sees EOF
	}
}

void worker(server_state &s)
{
	std::vector<char> reply_buf(rpc::max_payload);
	for (;;) {
		job j;
		{
			std::unique_lock<std::mutex> g(s.lock);
			s.ready.wait(g, [&] { return s.stopping || !s.queue.empty(); });
			if (s.queue.empty())
				return;
			j = std::move(s.queue.front());
			s.queue.pop_front();
		}
		serve(s, j, reply_buf);
	}
}

void reader(server_state &s, std::shared_ptr<connection> conn)
{
	const size_t max_record = sizeof(rpc::call_header) + rpc::max_payload;
	try {
		for (;;) {
			job j{conn, {}};
			if (!rpc::recv_record(conn->fd, j.record, max_record))
				break;
			std::lock_guard<std::mutex> g(s.lock);
			s.queue.push_back(std::move(j));
			s.ready.notify_one();
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "rpc-server: connection dropped: %s\n", e.what());
	}
}

int run(const examples::options &o)
{
	auto ep = examples::parse_endpoint(o.str("listen", "127.0.0.1:0"));
	auto mode = examples::parse_bufs(o.str("bufs", "default"));
	long requests = o.num("requests", 3, 1, 4096);
	uint64_t max_msg = o.size("max-msg", 1u << 20, 1024, 1u << 30);
	long threads = o.num("threads", 4, 1, 256);
	long max_clients = o.num("max-clients", 0, 0, 1000000);
	double seconds = o.seconds("seconds", 0, 0, 86400);
	uint64_t bufsize = static_cast<uint64_t>(requests) * max_msg;
	if (o.has("bufsize"))
		bufsize = o.size("bufsize", 0, 4096, SOCKBUF_SIZE_MAX);
	else if (bufsize > SOCKBUF_SIZE_MAX)
		throw examples::usage_error("--requests x --max-msg exceeds SOCKBUF_SIZE_MAX");
	server_state s;
	s.max_msg = max_msg;
	std::string marker = o.str("marker", "combined");
	if (marker == "separate")
		s.send_opt.marker = rpc::marker_mode::separate;
	else if (marker != "combined")
		throw examples::usage_error("--marker must be separate or combined");
	s.send_opt.cork = o.has("cork");

	int sigfd = examples::block_stop_signals();
	int finished_fd = eventfd(0, EFD_CLOEXEC);
	std::string note;
	int lfd = examples::listen_on(ep, mode, static_cast<int>(bufsize), &note, o.has("force"));
	std::printf("rpc-server listening on %s:%u %s\n", ep.addr.c_str(),
		    examples::local_port(lfd), note.c_str());
	std::fflush(stdout);

	examples::buffer_sampler sampler(o.str("trace", ""), 5, seconds > 0 ? seconds : 3600);
	std::vector<std::thread> pool;
	for (long i = 0; i < threads; i++)
		pool.emplace_back(worker, std::ref(s));
	std::vector<std::thread> readers;
	std::vector<std::weak_ptr<connection>> conns;
	long accepted = 0;
	examples::accept_until_stopped(lfd, sigfd, finished_fd, seconds, max_clients, [&](int fd) {
		auto c = std::make_shared<connection>();
		c->fd = fd;
		c->sampler = &sampler;
		c->finished_fd = finished_fd;
		sampler.add(fd, static_cast<int>(accepted));
		accepted++;
		conns.push_back(c);
		readers.emplace_back(reader, std::ref(s), std::move(c));
	});
	// Clean shutdown: no new connections, wake every reader, drain the pool.
	::close(lfd);
	for (auto &w : conns)
		if (auto c = w.lock())
			::shutdown(c->fd, SHUT_RDWR);
	for (auto &t : readers)
		t.join();
	{
		std::lock_guard<std::mutex> g(s.lock);
		s.stopping = true;
		s.ready.notify_all();
	}
	for (auto &t : pool)
		t.join();
	std::printf("rpc-server: %ld connections, %llu calls, %llu failed verification\n", accepted,
		    static_cast<unsigned long long>(s.calls.load()),
		    static_cast<unsigned long long>(s.bad_calls.load()));
	::close(finished_fd);
	::close(sigfd);
	return s.bad_calls ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	return examples::run_main(argc, argv, "rpc-server", usage,
				  {"listen", "bufs", "bufsize", "force", "requests", "max-msg",
				   "threads", "marker", "cork", "max-clients", "seconds", "trace",
				   "help"},
				  run);
}
