// SPDX-License-Identifier: MIT
// asio.hpp - sockbuf for Asio (Boost.Asio or standalone asio): an acceptor
// sized before listen() and a socket sized before connect(), so that the
// window scale the handshake fixes follows the size; the floor to keep is
// returned.  Include Asio first; this header includes neither Asio.
//
//   namespace sa = sockbuf::asio;
//   tcp::acceptor acc(io);
//   sockbuf::floor fl = sa::listen(acc, {tcp::v4(), 2049}, 1 << 20).value();
//   auto g = sockbuf::guard::make().value();
//   g.add_listener(acc.native_handle(), fl);   // connections async_accept() hands back
//   g.start(std::chrono::milliseconds(10));
//
//   tcp::socket s(io);
//   sockbuf::floor cf = sa::open(s, tcp::v4(), 1 << 20).value();
//   s.connect(server);                           // or async_connect()
//
// The socket is made with socket(2), sized, and handed over with assign():
// what Asio does afterwards (bind, listen, accept, connect on an open
// socket) keeps the size; Asio never sets SO_SNDBUF/SO_RCVBUF itself.
// Errors of the sizing come back as std::error_code (generic category,
// as from sockbuf.hpp) and the socket is closed; assign() itself throws
// as Asio does (only when the object already holds a socket).
#pragma once

#include <sockbuf/sockbuf.hpp>

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace sockbuf::asio
{

// How the socket is sized: a start that keeps autotuning (the default,
// sockbuf_set_initial_bufsize()), or a lock (sockbuf_lock_bufsize()).
// The flags are sockbuf_set_initial_bufsize()'s; a lock takes them
// without the fallbacks.
enum class bufs { initial, lock };

namespace detail
{

// A new socket of @family/@protocol sized @size each way; the fd or an error.
inline result<int> sized_socket(int family, int protocol, int size, bufs how, unsigned int flags,
				floor *fl)
{
	const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, protocol);
	if (fd < 0)
		return make_error(-errno);
	struct sockbuf_report rep;
	// A lock needs no fallback: those flags are set_initial's alone.
	constexpr unsigned int fallbacks = SOCKBUF_F_FALLBACK_LOCK | SOCKBUF_F_FALLBACK_DEFAULT;
	const int err = how == bufs::lock
			    ? sockbuf_lock_bufsize(fd, size, size, flags & ~fallbacks, &rep)
			    : sockbuf_set_initial_bufsize(fd, size, size, flags, &rep);
	if (err < 0) {
		::close(fd);
		return make_error(err);
	}
	*fl = {};
	sockbuf_report_floor(&rep, fl);
	return fd;
}

} // namespace detail

// Opens @acceptor on a socket sized @size (both directions), with
// SO_REUSEADDR, bound to @ep and listening.  Returns the floor its
// connections start with ({0, 0} for a lock).
template <class Acceptor, class Endpoint>
result<floor> listen(Acceptor &acceptor, const Endpoint &ep, int size, bufs how = bufs::initial,
		     int backlog = SOMAXCONN, unsigned int flags = SOCKBUF_F_FALLBACK_LOCK)
{
	floor fl{};
	auto fd = detail::sized_socket(ep.protocol().family(), ep.protocol().protocol(), size, how,
				       flags, &fl);
	if (!fd)
		return fd.error();
	const int one = 1;
	if (::setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    ::bind(*fd, reinterpret_cast<const struct sockaddr *>(ep.data()),
		   socklen_t(ep.size())) < 0 ||
	    ::listen(*fd, backlog) < 0) {
		const int e = errno;
		::close(*fd);
		return make_error(-e);
	}
	try {
		acceptor.assign(ep.protocol(), *fd);
	} catch (...) {
		::close(*fd);
		throw;
	}
	return fl;
}

// Opens @socket for @protocol on a socket sized @size, not yet connected:
// connect() or async_connect() it next.  Returns its floor ({0, 0} for a
// lock).
template <class Socket, class Protocol>
result<floor> open(Socket &socket, const Protocol &protocol, int size, bufs how = bufs::initial,
		   unsigned int flags = SOCKBUF_F_FALLBACK_LOCK)
{
	floor fl{};
	auto fd =
	    detail::sized_socket(protocol.family(), protocol.protocol(), size, how, flags, &fl);
	if (!fd)
		return fd.error();
	try {
		socket.assign(protocol, *fd);
	} catch (...) {
		::close(*fd);
		throw;
	}
	return fl;
}

} // namespace sockbuf::asio
