// SPDX-License-Identifier: MIT
// asio-bulk-client: READs of --size bytes, one at a time, over Boost.Asio
// from an asio-bulk-server, its socket sized before connect() by
// sockbuf::asio::open().  Same options and output as tirpc-bulk-client:
//
//   asio-bulk-client --connect=ADDR:PORT [--bufs=default|initial|lock]
//       [--bufsize=SIZE] [--size=SIZE] [--bytes=SIZE] [--seconds=N]
//       [--floor-guard=MS] [--cut-check=SIZE] [--json]
#include "bulk_proto.hpp"

// Boost 1.74's awaitable.hpp uses std::exchange without <utility> (C++20).
#include <utility>

#include <boost/asio.hpp>
#include <sockbuf/asio.hpp>
#include <sockbuf/sockbuf.hpp>

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "../common/bulk_cli.h"

using boost::asio::ip::tcp;

namespace
{

double now_s()
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
	    .count();
}

int get_int(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return ::getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0 ? v : -1;
}

bulk::stat_reply call_stat(tcp::socket &s, uint32_t op, uint32_t arg)
{
	uint32_t req[2] = {op, arg};
	bulk::to_net(req, 2);
	boost::asio::write(s, boost::asio::buffer(req));
	bulk::stat_reply st;
	boost::asio::read(s, boost::asio::buffer(&st, sizeof(st)));
	bulk::from_net(reinterpret_cast<uint32_t *>(&st), 7);
	return st;
}

int usage(const char *why)
{
	std::fprintf(stderr,
		     "asio-bulk-client: %s\n"
		     "usage: asio-bulk-client --connect=ADDR:PORT [--bufs=default|initial|lock]\n"
		     "       [--bufsize=SIZE] [--size=SIZE] [--bytes=SIZE] [--seconds=N]\n"
		     "       [--floor-guard=MS] [--cut-check=SIZE] [--json]\n",
		     why);
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	struct bulk_opts o;
	const char *bad_args = bulk_parse(argc, argv, 1, bulk::max_read, &o);
	if (bad_args)
		return usage(bad_args);

	boost::asio::io_context io;
	tcp::socket s(io);
	const tcp::endpoint ep(boost::asio::ip::address_v4(ntohl(o.addr.sin_addr.s_addr)),
			       ntohs(o.addr.sin_port));
	sockbuf::floor fl{};
	if (o.mode == bufs_default) {
		s.open(tcp::v4());
	} else {
		// The one line: sized before connect().
		auto r = sockbuf::asio::open(s, tcp::v4(), int(o.bufsize),
					     o.mode == bufs_lock ? sockbuf::asio::bufs::lock
								 : sockbuf::asio::bufs::initial);
		if (!r) {
			std::fprintf(stderr, "asio-bulk-client: %s\n", r.error().message().c_str());
			return 1;
		}
		fl = *r;
	}
	boost::system::error_code ec;
	s.connect(ep, ec);
	if (ec) {
		std::fprintf(stderr, "asio-bulk-client: connect: %s\n", ec.message().c_str());
		return 1;
	}
	std::optional<sockbuf::guard> guard;
	if (o.guard_ms) {
		auto g = sockbuf::guard::make();
		std::error_code e = g ? g->add(s.native_handle(), fl) : g.error();
		if (!e)
			e = g->start(std::chrono::milliseconds(o.guard_ms));
		if (e) {
			std::fprintf(stderr, "asio-bulk-client: floor guard: %s\n",
				     e.message().c_str());
			return 1;
		}
		guard.emplace(std::move(*g));
	}

	std::vector<char> buf;
	long long got = 0, calls = 0, bad = 0;
	const double t0 = now_s();
	double t = t0;
	try {
		while (got < o.bytes && t - t0 < o.seconds) {
			uint32_t req[2] = {bulk::op_read, uint32_t(o.call)};
			bulk::to_net(req, 2);
			boost::asio::write(s, boost::asio::buffer(req));
			uint32_t len = 0;
			boost::asio::read(s, boost::asio::buffer(&len, 4));
			len = ntohl(len);
			if (len > bulk::max_read)
				throw std::runtime_error("reply too long");
			buf.resize(len);
			boost::asio::read(s, boost::asio::buffer(buf));
			if (len != uint32_t(o.call) || buf[0] != bulk::pattern(0) ||
			    buf[len - 1] != bulk::pattern(len - 1))
				bad++;
			got += len;
			calls++;
			t = now_s();
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "asio-bulk-client: READ: %s\n", e.what());
		return 1;
	}
	const double secs = t - t0;
	const int fd = s.native_handle();
	const int csnd = get_int(fd, SO_SNDBUF), crcv = get_int(fd, SO_RCVBUF);
	const int clk = get_int(fd, 72 /* SO_BUF_LOCK */);
	const bulk::stat_reply srv = call_stat(s, bulk::op_stat, 0);
	bulk::stat_reply before{}, cut{}, after{};
	double restore_ms = 0;
	if (o.cut_want) {
		before = call_stat(s, bulk::op_stat, 0);
		cut = call_stat(s, bulk::op_cut, 8192);
		const double c0 = now_s();
		restore_ms = -1;
		while (now_s() - c0 < 10) {
			after = call_stat(s, bulk::op_stat, 0);
			if (after.sndbuf >= o.cut_want && after.buf_lock == 0) {
				restore_ms = (now_s() - c0) * 1000;
				break;
			}
			::poll(nullptr, 0, 1);
		}
	}
	const double mbs = secs > 0 ? double(got) / secs / 1e6 : 0.0;
	if (o.json) {
		std::printf(
		    "{\"bytes\":%lld,\"calls\":%lld,\"bad\":%lld,\"seconds\":%.3f,"
		    "\"mb_s\":%.3f,\"client\":{\"sndbuf\":%d,\"rcvbuf\":%d,\"lock\":%d},"
		    "\"server\":{\"sndbuf\":%d,\"rcvbuf\":%d,\"lock\":%d,\"rcv_wscale\":%d}",
		    got, calls, bad, secs, mbs, csnd, crcv, clk, srv.sndbuf, srv.rcvbuf,
		    srv.buf_lock, srv.rcv_wscale);
		if (o.cut_want)
			std::printf(
			    ",\"cut\":{\"before\":%d,\"cut\":%d,\"cut_lock\":%d,\"after\":%d,"
			    "\"after_lock\":%d,\"restore_ms\":%.1f,\"guard_interval_us\":%d,"
			    "\"guard_max_late_us\":%d,\"guard_restored\":%d}",
			    before.sndbuf, cut.sndbuf, cut.buf_lock, after.sndbuf, after.buf_lock,
			    restore_ms, after.guard_interval_us, after.guard_max_late_us,
			    after.guard_restored);
		std::printf("}\n");
	} else {
		std::printf("%lld bytes in %lld READs of %lld, %.2f s: %.3f MB/s (%lld bad)\n"
			    "client socket: snd %d rcv %d lock %d; server's: snd %d rcv %d lock %d "
			    "wscale %d\n",
			    got, calls, o.call, secs, mbs, bad, csnd, crcv, clk, srv.sndbuf,
			    srv.rcvbuf, srv.buf_lock, srv.rcv_wscale);
		if (o.cut_want)
			std::printf("server's send buffer cut %d -> %d (lock %d), %s %.1f ms later "
				    "(%d, lock %d)\n",
				    before.sndbuf, cut.sndbuf, cut.buf_lock,
				    restore_ms >= 0 ? "restored" : "NOT restored", restore_ms,
				    after.sndbuf, after.buf_lock);
	}
	return bad || restore_ms < 0 ? 1 : 0;
}
