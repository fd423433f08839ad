// SPDX-License-Identifier: MIT
// asio-bulk-server: the BULK protocol (bulk_proto.hpp) on Boost.Asio, its
// acceptor sized before listen() by sockbuf::asio::listen() and a floor
// guard watching the listener, so that every socket async_accept() hands
// back keeps the floor.  Same options and output as tirpc-bulk-server:
//
//   asio-bulk-server --listen=ADDR:PORT [--bufs=default|initial|lock]
//                    [--bufsize=SIZE] [--floor-guard=MS] [--seconds=N]
#include "bulk_proto.hpp"

// Boost 1.74's awaitable.hpp uses std::exchange without <utility> (C++20).
#include <utility>

#include <boost/asio.hpp>
#include <sockbuf/asio.hpp>
#include <sockbuf/sockbuf.hpp>

#include <netinet/tcp.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/bulk_cli.h"

using boost::asio::ip::tcp;

namespace
{

std::optional<sockbuf::guard> g_guard;
unsigned int g_interval_us = 0;
std::vector<char> g_data; // the pattern, grown as READs ask (one io thread)

int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

bulk::stat_reply stat_of(int fd)
{
	bulk::stat_reply st{};
	st.sndbuf = get_int(fd, SOL_SOCKET, SO_SNDBUF);
	st.rcvbuf = get_int(fd, SOL_SOCKET, SO_RCVBUF);
	st.buf_lock = get_int(fd, SOL_SOCKET, 72 /* SO_BUF_LOCK */);
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	st.rcv_wscale =
	    ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_rcv_wscale : -1;
	if (g_guard) {
		if (auto t = g_guard->stats()) {
			st.guard_restored = int32_t(t->restored);
			st.guard_max_late_us = int32_t(t->max_late_us);
			st.guard_interval_us = int32_t(g_interval_us);
		}
	}
	return st;
}

class session : public std::enable_shared_from_this<session>
{
public:
	explicit session(tcp::socket s) : s_(std::move(s)) {}
	void next()
	{
		auto self = shared_from_this();
		boost::asio::async_read(s_, boost::asio::buffer(req_),
					[self](boost::system::error_code ec, size_t) {
						if (!ec)
							self->handle();
					});
	}

private:
	void handle()
	{
		bulk::from_net(req_, 2);
		auto self = shared_from_this();
		auto again = [self](boost::system::error_code ec, size_t) {
			if (!ec)
				self->next();
		};
		if (req_[0] == bulk::op_read && req_[1] <= bulk::max_read) {
			const uint32_t n = req_[1];
			for (uint32_t i = uint32_t(g_data.size()); i < n; i++)
				g_data.push_back(bulk::pattern(i));
			len_ = htonl(n);
			std::vector<boost::asio::const_buffer> out{
			    boost::asio::buffer(&len_, 4), boost::asio::buffer(g_data.data(), n)};
			boost::asio::async_write(s_, out, again);
			return;
		}
		const int fd = s_.native_handle();
		if (req_[0] == bulk::op_cut) {
			const int half = int(req_[1] / 2); // the kernel doubles
			::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
		} else if (req_[0] != bulk::op_stat) {
			return; // garbage: the connection closes
		}
		st_ = stat_of(fd);
		bulk::to_net(reinterpret_cast<uint32_t *>(&st_), 7);
		boost::asio::async_write(s_, boost::asio::buffer(&st_, sizeof(st_)), again);
	}
	tcp::socket s_;
	uint32_t req_[2];
	uint32_t len_ = 0;
	bulk::stat_reply st_{};
};

void accept_loop(tcp::acceptor &acc)
{
	acc.async_accept([&acc](boost::system::error_code ec, tcp::socket s) {
		if (!ec)
			std::make_shared<session>(std::move(s))->next();
		accept_loop(acc);
	});
}

int usage(const char *why)
{
	std::fprintf(stderr,
		     "asio-bulk-server: %s\n"
		     "usage: asio-bulk-server --listen=ADDR:PORT [--bufs=default|initial|lock]\n"
		     "       [--bufsize=SIZE] [--floor-guard=MS] [--seconds=N]\n",
		     why);
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	struct bulk_opts o;
	const char *bad_args = bulk_parse(argc, argv, 0, 0, &o);
	if (bad_args)
		return usage(bad_args);
	::signal(SIGTERM, [](int) { _exit(0); });
	::signal(SIGALRM, [](int) { _exit(0); });
	::signal(SIGPIPE, SIG_IGN);
	if (o.seconds > 0)
		::alarm(unsigned(o.seconds));

	boost::asio::io_context io;
	tcp::acceptor acc(io);
	const tcp::endpoint ep(boost::asio::ip::address_v4(ntohl(o.addr.sin_addr.s_addr)),
			       ntohs(o.addr.sin_port));
	sockbuf::floor fl{};
	if (o.mode == bufs_default) {
		acc.open(ep.protocol());
		acc.set_option(tcp::acceptor::reuse_address(true));
		acc.bind(ep);
		acc.listen();
	} else {
		// The one line: sized before listen(), then bound and listening.
		auto r = sockbuf::asio::listen(acc, ep, int(o.bufsize),
					       o.mode == bufs_lock ? sockbuf::asio::bufs::lock
								   : sockbuf::asio::bufs::initial);
		if (!r) {
			std::fprintf(stderr, "asio-bulk-server: %s\n", r.error().message().c_str());
			return 1;
		}
		fl = *r;
	}
	if (o.guard_ms) {
		auto g = sockbuf::guard::make();
		std::error_code ec = g ? g->add_listener(acc.native_handle(), fl) : g.error();
		g_interval_us = unsigned(o.guard_ms) * 1000u;
		if (!ec)
			ec = g->start(std::chrono::microseconds(g_interval_us));
		if (ec) {
			std::fprintf(stderr, "asio-bulk-server: floor guard: %s\n",
				     ec.message().c_str());
			return 1;
		}
		g_guard.emplace(std::move(*g));
	}
	std::printf("serving BULK on %s (bufs %s, guard %d ms)\n", ep.address().to_string().c_str(),
		    o.mode == bufs_initial ? "initial"
		    : o.mode == bufs_lock  ? "lock"
					   : "default",
		    o.guard_ms);
	std::fflush(stdout);
	accept_loop(acc);
	io.run();
	return 1;
}
