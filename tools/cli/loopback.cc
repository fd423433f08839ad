// SPDX-License-Identifier: MIT
#include "loopback.h"

#include <sockbuf/sockbuf.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sockbuf::lab
{

void sample_range::add(int v)
{
	if (first < 0)
		first = min = max = v;
	min = v < min ? v : min;
	max = v > max ? v : max;
	last = v;
}

namespace
{

using clock = std::chrono::steady_clock;

// The byte at stream offset @off: a pattern that catches loss, duplication
// and reordering (it does not repeat every 256 bytes).
inline unsigned char pattern(uint64_t off)
{
	return (unsigned char)((off * 2654435761u) >> 13);
}

struct fd_guard {
	int fd = -1;
	~fd_guard()
	{
		if (fd >= 0)
			::close(fd);
	}
};

int getint(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	return ::getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

int rcv_wscale(int fd)
{
	struct tcp_info ti {
	};
	socklen_t len = sizeof(ti);
	if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return -1;
	return (ti.tcpi_options & TCPI_OPT_WSCALE) ? ti.tcpi_rcv_wscale : 0;
}

void send_all(int fd, uint64_t bytes, clock::time_point deadline, sample_range *sndbuf)
{
	std::vector<unsigned char> buf(256 * 1024);
	uint64_t off = 0;
	while (off < bytes && clock::now() < deadline) {
		size_t n = buf.size();
		if (bytes - off < n)
			n = bytes - off;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		size_t done = 0;
		while (done < n) {
			ssize_t w = ::send(fd, buf.data() + done, n - done, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return; // reader gone or the bound hit
			done += (size_t)w;
		}
		off += n;
		sndbuf->add(getint(fd, SOL_SOCKET, SO_SNDBUF));
	}
	::shutdown(fd, SHUT_WR);
}

} // namespace

transfer_result bulk_transfer(uint64_t bytes, double max_seconds, const setup_fn &listener_setup,
			      const setup_fn &client_setup, const char *addr)
{
	transfer_result r;
	auto fail = [&r](const char *what) {
		r.err = -errno;
		r.what = what;
		return r;
	};
	fd_guard lst, cli, srv;
	struct sockaddr_in sa {
	};
	sa.sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		errno = EINVAL;
		return fail("address");
	}
	lst.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lst.fd < 0)
		return fail("socket");
	int one = 1;
	::setsockopt(lst.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (listener_setup && (r.err = listener_setup(lst.fd)) < 0) {
		r.what = "listener setup";
		return r;
	}
	socklen_t slen = sizeof(sa);
	if (::bind(lst.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return fail("bind");
	if (::listen(lst.fd, 4) < 0)
		return fail("listen");
	if (::getsockname(lst.fd, (struct sockaddr *)&sa, &slen) < 0)
		return fail("getsockname");

	cli.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cli.fd < 0)
		return fail("socket");
	if (client_setup && (r.err = client_setup(cli.fd)) < 0) {
		r.what = "client setup";
		return r;
	}
	if (::connect(cli.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return fail("connect");
	srv.fd = ::accept4(lst.fd, nullptr, nullptr, SOCK_CLOEXEC);
	if (srv.fd < 0)
		return fail("accept");

	r.server_rcvbuf.add(getint(srv.fd, SOL_SOCKET, SO_RCVBUF));
	r.server_lock = getint(srv.fd, SOL_SOCKET, SO_BUF_LOCK);
	r.server_rcv_wscale = rcv_wscale(srv.fd);
	r.client_rcv_wscale = rcv_wscale(cli.fd);

	auto start = clock::now();
	auto deadline = start + std::chrono::duration_cast<clock::duration>(
				    std::chrono::duration<double>(max_seconds));
	std::thread sender(send_all, cli.fd, bytes, deadline, &r.client_sndbuf);

	std::vector<unsigned char> buf(256 * 1024);
	while (true) {
		auto now = clock::now();
		if (now >= deadline) {
			r.timed_out = true;
			break;
		}
		int ms = (int)std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)
			     .count() +
			 1;
		struct pollfd p = {srv.fd, POLLIN, 0};
		int pr = ::poll(&p, 1, ms);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue; // deadline check above ends the loop
		ssize_t n = ::recv(srv.fd, buf.data(), buf.size(), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(r.bytes + i))
				r.corrupt = true;
		r.bytes += (uint64_t)n;
		r.server_rcvbuf.add(getint(srv.fd, SOL_SOCKET, SO_RCVBUF));
		if (r.corrupt)
			break;
	}
	r.seconds = std::chrono::duration<double>(clock::now() - start).count();
	// Unblock a sender still inside send() before joining it.
	::shutdown(srv.fd, SHUT_RDWR);
	::shutdown(cli.fd, SHUT_RDWR);
	sender.join();
	return r;
}

} // namespace sockbuf::lab
