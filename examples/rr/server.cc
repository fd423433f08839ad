// SPDX-License-Identifier: MIT
// rr-server: the passive side of an RDS-stress-like request-response load.
// One thread per connection reads a request, verifies it and answers with a
// reply of the same size.  Sockets are sized like rds_tcp_tune() did
// (RDS_TCP_DEFAULT_BUFSIZE, 128 KB) through the --bufs switch.
#include "../common/net.h"
#include "../common/options.h"
#include "../common/pattern.h"
#include "../common/sampler.h"
#include "../common/shutdown.h"
#include "protocol.h"

#include <sockbuf/sockbuf.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

const char usage[] = "usage: rr-server [--listen=ADDR:PORT] [--bufs=default|initial|lock|raw]\n"
		     "                 [--bufsize=SIZE] [--max-clients=N] [--seconds=S]\n"
		     "                 [--force] [--trace=FILE]\n"
		     "  --bufsize      size for --bufs=initial|lock|raw (default 128K), up to 1G:\n"
		     "                 past net.core.[wr]mem_max only with --force\n"
		     "  --force        SO_*BUFFORCE past net.core.[wr]mem_max (CAP_NET_ADMIN)\n"
		     "  --max-clients  exit after this many connections ended (0: never)\n"
		     "  --seconds      exit after this long (0: never)\n";

struct server_state {
	examples::pattern pat{rr::max_message};
	std::atomic<uint64_t> requests{0}, bad{0};
	int finished_fd = -1;
};

void serve(server_state &s, int fd)
{
	std::vector<char> in, out; // grown to the largest message seen
	try {
		for (;;) {
			rr::header h{};
			if (!examples::read_full(fd, &h, sizeof(h)))
				break; // the client is done
			if (h.magic != rr::magic_request || h.len > rr::max_message)
				throw std::runtime_error("bad request header");
			if (in.size() < h.len) {
				in.resize(h.len);
				out.resize(h.len);
			}
			if (!examples::read_full(fd, in.data(), h.len))
				throw std::runtime_error("connection closed inside a request");
			s.requests++;
			if (!s.pat.verify(in.data(), h.len, h.seq, rr::salt_request)) {
				s.bad++;
				throw std::runtime_error("request payload failed verification");
			}
			rr::header r{rr::magic_reply, h.len, h.seq};
			s.pat.fill(out.data(), h.len, h.seq, rr::salt_reply);
			examples::write_full(fd, &r, sizeof(r), MSG_MORE);
			examples::write_full(fd, out.data(), h.len);
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "rr-server: connection dropped: %s\n", e.what());
	}
}

int run(const examples::options &o)
{
	auto ep = examples::parse_endpoint(o.str("listen", "127.0.0.1:0"));
	auto mode = examples::parse_bufs(o.str("bufs", "default"));
	auto bufsize = static_cast<int>(o.size("bufsize", 128 * 1024, 4096, SOCKBUF_SIZE_MAX));
	long max_clients = o.num("max-clients", 0, 0, 1000000);
	double seconds = o.seconds("seconds", 0, 0, 86400);

	int sigfd = examples::block_stop_signals();
	server_state s;
	s.finished_fd = eventfd(0, EFD_CLOEXEC);
	std::string note;
	int lfd = examples::listen_on(ep, mode, bufsize, &note, o.has("force"));
	std::printf("rr-server listening on %s:%u %s\n", ep.addr.c_str(), examples::local_port(lfd),
		    note.c_str());
	std::fflush(stdout);
	examples::buffer_sampler sampler(o.str("trace", ""), 5, seconds > 0 ? seconds : 3600);

	std::mutex fds_lock;
	std::vector<int> live; // fds still served, for shutdown
	std::vector<std::thread> threads;
	long accepted = 0;
	// A thread per connection, which closes it and counts it as ended.
	auto serve_in_thread = [&](int fd) {
		sampler.add(fd, static_cast<int>(accepted++));
		{
			std::lock_guard<std::mutex> g(fds_lock);
			live.push_back(fd);
		}
		threads.emplace_back([&, fd] {
			serve(s, fd);
			sampler.remove(fd);
			{
				std::lock_guard<std::mutex> g(fds_lock);
				std::erase(live, fd);
				::close(fd);
			}
			uint64_t one = 1;
			if (::write(s.finished_fd, &one, sizeof(one)) < 0)
				std::perror("rr-server: eventfd");
		});
	};
	examples::accept_until_stopped(lfd, sigfd, s.finished_fd, seconds, max_clients,
				       serve_in_thread);
	::close(lfd);
	{
		std::lock_guard<std::mutex> g(fds_lock);
		for (int fd : live)
			::shutdown(fd, SHUT_RDWR);
	}
	for (auto &t : threads)
		t.join();
	std::printf("rr-server: %ld connections, %llu requests, %llu failed verification\n",
		    accepted, static_cast<unsigned long long>(s.requests.load()),
		    static_cast<unsigned long long>(s.bad.load()));
	::close(s.finished_fd);
	::close(sigfd);
	return s.bad ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	return examples::run_main(
	    argc, argv, "rr-server", usage,
	    {"listen", "bufs", "bufsize", "force", "max-clients", "seconds", "trace", "help"}, run);
}
